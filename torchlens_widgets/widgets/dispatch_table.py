"""The dispatch-table widget: one operator's table with the row that runs highlighted, for the same call
in several states (as given, no_grad, inference_mode, autocast, a dispatch mode, meta inputs): pick a
state and the highlight moves. Python computes every state's table (render.dispatch_table); the page
only switches between them. The static fallback is the selected state's HTML."""

from __future__ import annotations

from typing import Any

import traitlets as t

from ..lenses.dispatch_table import DispatchTableError, dispatch_table, scenarios
from ..render.dispatch_table import DTABLE_CSS, choice_dict, dispatch_table_html, dispatch_table_text
from ..render.markup import esc
from ..render.theme import STYLE
from ._base import HtmlFallbackWidget, bundle

__all__ = ["DispatchTableWidget", "show_dispatch_table"]


class DispatchTableWidget(HtmlFallbackWidget):
    """`model` = {op, schema, css, scenarios: [{name, chosen, html, text}]}; `selected` = a scenario's name
    (set by the page's buttons, or from Python)."""

    _esm = bundle("dtable")
    model = t.Dict().tag(sync=True)
    selected = t.Unicode("").tag(sync=True)

    @t.validate("selected")
    def _valid(self, proposal: Any) -> str:
        names = [s["name"] for s in self.model.get("scenarios", [])]
        if names and proposal["value"] not in names:
            raise t.TraitError(f"no state {proposal['value']!r}; the states are {names}")
        return str(proposal["value"])

    def _current(self) -> dict[str, Any]:
        found = [s for s in self.model.get("scenarios", []) if s["name"] == self.selected]
        return found[0] if found else self.model["scenarios"][0]

    @property
    def chosen(self) -> str | None:
        """The key whose entry runs in the selected state."""
        return self._current()["chosen"]

    def static_html(self) -> str:
        s = self._current()
        return (f'<div class="tlw-dtable tlw-theme"><style>{STYLE}{DTABLE_CSS}</style>'
                f"<div><b>{esc(self.model['op'])}</b>, {esc(s['name'])}:</div>{s['html']}</div>")

    def static_text(self) -> str:
        return f"{self._current()['name']}:\n{self._current()['text']}"


def show_dispatch_table(op: object, *args: Any, selected: str = "as given") -> DispatchTableWidget:
    """The table of `op` (e.g. torch.ops.aten.add.Tensor) for a call with `args`, in each state."""
    table = dispatch_table(op).to_dict()
    rows = []
    for name, choice in scenarios(op, *args):
        c = choice_dict(choice)
        rows.append({"name": name, "chosen": c["chosen"], "html": dispatch_table_html(table, c, fragment=True),
                     "text": dispatch_table_text(table, c)})
    if selected not in [r["name"] for r in rows]:
        raise DispatchTableError(f"selected={selected!r}: pick one of {[r['name'] for r in rows]}")
    model = {"op": table["op"], "schema": table["schema"], "css": STYLE + DTABLE_CSS, "scenarios": rows}
    return DispatchTableWidget(model=model, selected=selected)
