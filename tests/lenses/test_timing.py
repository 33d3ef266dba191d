"""The timing lens's thread scopes put torch's thread count back, also when the block raises (a check failing
inside one must not leave the learner's kernel on another count)."""

from __future__ import annotations

import pytest
import torch

from torchlens_widgets.lenses.timing import one_thread, threads


def test_thread_scopes_restore_the_count_when_the_block_raises() -> None:
    before = torch.get_num_threads()
    with pytest.raises(RuntimeError, match="inside"):
        with threads(before + 2):
            assert torch.get_num_threads() == before + 2
            raise RuntimeError("inside")
    assert torch.get_num_threads() == before
    with one_thread():
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
