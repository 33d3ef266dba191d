"""The stride widget's Python side: traits, selection, mime bundle with static fallbacks, bad input."""

from __future__ import annotations

import pytest
import torch

from torchlens_widgets import LayoutError, stride_diagram


def test_mimebundle_carries_widget_svg_and_plain_text() -> None:
    x = torch.zeros(2, 3)
    w = stride_diagram(x, x.t(), names=["x", "xt"])
    data, _ = w._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in data
    assert data["image/svg+xml"].startswith("<svg")
    assert data["text/plain"].startswith("StrideDiagram: 2 tensors over 1 storage")
    assert "xt: shape [3, 2] stride [1, 3] offset 0, non-contiguous · view of x" in data["text/plain"]
    assert repr(w) == data["text/plain"]


def test_bundle_is_the_built_esm() -> None:
    w = stride_diagram(torch.ones(2))
    assert "export" in w._esm and "http://" not in w._esm.replace("http://www.w3.org", "")


def test_selection_from_python_matches_storage_semantics() -> None:
    row = torch.arange(3.0)
    w = stride_diagram(row, row.expand(2, 3), names=["row", "wide"])
    sel = w.select_element("wide", (1, 2))
    assert sel == {"storage": "S0", "cell": 2, "elements": [[0, 2], [1, 2], [1, 5]]}
    assert w.selection == sel
    w.select_cell("S0", 0)
    assert w.selection["elements"] == [[0, 0], [1, 0], [1, 3]]
    with pytest.raises(KeyError, match="no storage 'S9'"):
        w.select_cell("S9", 0)
    with pytest.raises(IndexError, match="out of range"):
        w.select_element("row", (5,))


def test_base_and_version_are_reported() -> None:
    x = torch.zeros(4)
    v = x[1:3]
    v.add_(1)
    w = stride_diagram(x, v, names=["x", "v"])
    tv = w.model["tensors"][1]
    assert tv["base"] == "x" and tv["version"] == 1 and tv["offset"] == 1


@pytest.mark.parametrize(
    "args, kwargs, error, message",
    [
        ((), {}, ValueError, "at least one tensor"),
        (([1, 2],), {}, LayoutError, "expected a torch.Tensor"),
        ((torch.ones(2), torch.ones(2)), {"names": ["a"]}, ValueError, "one per tensor"),
        ((torch.ones(2),), {"names": "a"}, ValueError, "sequence of 1 strings"),
    ],
)
def test_bad_input(args: tuple, kwargs: dict, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        stride_diagram(*args, **kwargs)


def test_huge_and_meta_tensors_render() -> None:
    w = stride_diagram(torch.empty(1, device="meta").expand(10_000, 10_000))
    assert "showing" in w.static_text()
    assert w.model["tensors"][0]["shown"] <= 384


def test_missing_bundle_degrades_to_a_message(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from torchlens_widgets.widgets import _base

    monkeypatch.setattr(_base, "STATIC", tmp_path)
    with pytest.warns(UserWarning, match="bundle .* is missing"):
        esm = _base.bundle("stride")
    assert isinstance(esm, str) and "was not built" in esm


def test_static_picture_says_it_is_static_and_the_live_view_does_not() -> None:
    """Issue 25 item 7: the saved picture says "run the cell to interact"; the live view's data does not."""
    from torchlens_widgets.render.portable import STATIC_NOTE

    x = torch.zeros(2, 3)
    w = stride_diagram(x, x.t(), names=["x", "xt"])
    data, _ = w._repr_mimebundle_()
    assert STATIC_NOTE in data["image/svg+xml"] and STATIC_NOTE not in w.static_svg()
    assert 'class="tlw-static ' in data["image/svg+xml"]  # no pointer cursor over it once inlined
    assert all(STATIC_NOTE not in str(getattr(w, name)) for name in w.trait_names(sync=True))
