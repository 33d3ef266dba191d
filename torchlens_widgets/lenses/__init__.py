"""Lenses: PyTorch runtime state → plain data (dataclasses, JSON-ready dicts).

They know torch and never the UI: nothing here imports `render/`, `widgets/` or `course/`
(tests/lenses/test_layering.py holds them to it).
"""
