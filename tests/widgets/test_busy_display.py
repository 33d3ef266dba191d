"""The kernel's busy line (widgets/build.py `DisplayLine`, connected to torchlens_widgets.busy): one display handle,
empty when made (what nbval compares), moving while the work runs, empty again at the end (what a saved notebook
keeps: no elapsed time)."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from torchlens_widgets import busy


def test_long_work_in_a_kernel_moves_one_display_then_empties_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import IPython.display

    from torchlens_widgets.widgets import build as widget

    made: list[tuple[float, dict[str, Any]]] = []
    updates: list[tuple[float, dict[str, Any]]] = []
    t0 = time.monotonic()

    class Handle:
        def update(self, data: dict[str, Any], raw: bool = False) -> None:
            assert raw
            updates.append((time.monotonic() - t0, data))

    def display(data: dict[str, Any], raw: bool = False, display_id: bool = False) -> Handle:
        assert raw and display_id
        made.append((time.monotonic() - t0, data))
        return Handle()

    monkeypatch.setattr(IPython.display, "display", display)
    monkeypatch.setattr(busy, "in_kernel", lambda: True)
    before = busy.connect(widget.display_line)
    try:
        with busy.working("precompiling the lean headers", "GCC parses them once for this machine", every=0.2):
            time.sleep(0.9)
    finally:
        busy.connect(before)
    assert [d for _, d in made] == [{}], "one display, made empty"
    assert updates[0][0] < 2.0, f"the first update came after {updates[0][0]:.2f} s"
    first = updates[0][1]
    assert first["text/plain"] == "precompiling the lean headers: GCC parses them once for this machine (0 s)"
    assert "precompiling the lean headers" in first["text/html"] and "(0 s)" in first["text/html"]
    assert any("(1 s)" in d.get("text/plain", "") for _, d in updates[1:-1]), updates
    assert updates[-1][1] == {}, "the saved output keeps no elapsed time"
    assert not [t for t in threading.enumerate() if t.name == "torchlens-busy"]


def test_outside_a_kernel_the_widget_layer_shows_nothing() -> None:
    from torchlens_widgets.widgets import build as widget

    assert widget.display_line() is None


def test_the_package_entry_point_connects_the_kernel_display(monkeypatch: pytest.MonkeyPatch) -> None:
    import IPython.display

    import torchlens_widgets
    from torchlens_widgets.widgets import build as widget

    connector = busy.connected()
    assert connector is torchlens_widgets._kernel_display, "importing the package connects the kernel display"
    assert connector() is None, "outside a kernel it opens nothing (a terminal gets the stderr line)"
    monkeypatch.setattr(IPython.display, "display", lambda data, raw=False, display_id=False: object())
    monkeypatch.setattr(busy, "in_kernel", lambda: True)
    assert isinstance(connector(), widget.DisplayLine)
