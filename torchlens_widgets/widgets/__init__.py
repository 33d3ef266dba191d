"""Live widgets (anywidget): lens data in, interactive pictures out, static fallback included."""

from .dispatch import DispatchTraceWidget, dispatch_widget
from .dispatch_table import DispatchTableWidget, show_dispatch_table
from .grad_graph import GradGraphWidget, show_grad_graph
from .memory import MemoryTimelineWidget, show_memory
from .stride import StrideDiagram, stride_diagram

__all__ = [
    "DispatchTableWidget",
    "DispatchTraceWidget",
    "GradGraphWidget",
    "MemoryTimelineWidget",
    "StrideDiagram",
    "dispatch_widget",
    "show_dispatch_table",
    "show_grad_graph",
    "show_memory",
    "stride_diagram",
]
