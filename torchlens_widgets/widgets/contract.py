"""The contract matrix in a notebook: run it and show the pass/fail grid (static HTML, so a saved
notebook shows it as it was)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from ..lenses.contract import contract_matrix
from ..render.contract import contract_html, contract_text
from ._base import ReportView

__all__ = ["ContractView", "show_contract"]


class ContractView(ReportView):
    """A contract report for display: the grid in a notebook, one line per case elsewhere."""

    render_html = staticmethod(contract_html)
    render_text = staticmethod(contract_text)


def show_contract(op: Callable[..., Any], reference: Callable[..., Any], example: Sequence[torch.Tensor],
                  **kwargs: Any) -> ContractView:
    """`contract_matrix(op, reference, example, **kwargs)`, shown as a grid; `.report` holds the data."""
    return ContractView(contract_matrix(op, reference, example, **kwargs))
