"""Live widgets (anywidget): lens data in, interactive pictures out, static fallback included."""

from .dispatch import DispatchTraceWidget, dispatch_widget
from .grad_graph import GradGraphWidget, show_grad_graph
from .stride import StrideDiagram, stride_diagram

__all__ = [
    "DispatchTraceWidget",
    "GradGraphWidget",
    "StrideDiagram",
    "dispatch_widget",
    "show_grad_graph",
    "stride_diagram",
]
