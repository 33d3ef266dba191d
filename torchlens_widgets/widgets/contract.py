"""The contract matrix in a notebook: run it and show the pass/fail grid (static HTML, so a saved
notebook shows it as it was)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from ..lenses.contract import ContractReport, contract_matrix
from ..render.contract import contract_html, contract_text

__all__ = ["ContractView", "show_contract"]


class ContractView:
    """A contract report for display: the grid in a notebook, one line per case elsewhere."""

    def __init__(self, report: ContractReport) -> None:
        self.report = report

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        data = self.report.to_dict()
        return {"text/html": contract_html(data), "text/plain": contract_text(data)}


def show_contract(op: Callable[..., Any], reference: Callable[..., Any], example: Sequence[torch.Tensor],
                  **kwargs: Any) -> ContractView:
    """`contract_matrix(op, reference, example, **kwargs)`, shown as a grid; `.report` holds the data."""
    return ContractView(contract_matrix(op, reference, example, **kwargs))
