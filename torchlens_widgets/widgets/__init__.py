"""Live widgets (anywidget): lens data in, interactive pictures out, static fallback included."""

from .stride import StrideDiagram, stride_diagram

__all__ = ["StrideDiagram", "stride_diagram"]
