"""Live widgets (anywidget): lens data in, interactive pictures out, static fallback included."""

from .dispatch import DispatchTraceWidget, dispatch_widget
from .stride import StrideDiagram, stride_diagram

__all__ = ["DispatchTraceWidget", "StrideDiagram", "dispatch_widget", "stride_diagram"]
