"""torchlens-widgets: see what PyTorch does below its Python API.

Lenses turn runtime state into plain data (`layout`), widgets draw it live (`stride_diagram`),
and `torchlens_widgets.course` checks exercises.
"""

from .lenses.autograd import grad_graph, record_backward
from .lenses.dispatch import DispatchTrace, DispatchTraceError, dispatch_trace
from .lenses.layout import Layout, LayoutError, layout, shares_storage, storage_index
from .lenses.memory import load_snapshot, profile_memory

__version__ = "0.1.0"

__all__ = [
    "DispatchTrace",
    "DispatchTraceError",
    "DispatchTraceWidget",
    "dispatch_trace",
    "dispatch_widget",
    "grad_graph",
    "GradGraphWidget",
    "Layout",
    "LayoutError",
    "layout",
    "load_snapshot",
    "MemoryTimelineWidget",
    "profile_memory",
    "record_backward",
    "shares_storage",
    "show_grad_graph",
    "show_memory",
    "storage_index",
    "stride_diagram",
    "StrideDiagram",
]


def __getattr__(name: str):  # widgets import anywidget: load them only when asked for
    if name in ("stride_diagram", "StrideDiagram", "dispatch_widget", "DispatchTraceWidget",
                "show_grad_graph", "GradGraphWidget", "show_memory", "MemoryTimelineWidget"):
        from . import widgets

        return getattr(widgets, name)
    raise AttributeError(f"module 'torchlens_widgets' has no attribute {name!r}")
