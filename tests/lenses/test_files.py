"""Bounded reading of files a learner was sent: size on disk and once decompressed."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

import torchlens_widgets.lenses.files as files


class _Err(ValueError):
    pass


def test_read_bounded_reads_plain_and_gzip_and_refuses_oversized(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plain, packed = tmp_path / "a.json", tmp_path / "a.json.gz"
    plain.write_bytes(b"[1, 2]")
    packed.write_bytes(gzip.compress(b"[1, 2]"))
    assert files.read_bounded(plain, "a.json", _Err) == files.read_bounded(packed, "a.json.gz", _Err) == b"[1, 2]"
    monkeypatch.setattr(files, "MAX_FILE_BYTES", 4)
    with pytest.raises(_Err, match="a.json is over 0 MiB"):
        files.read_bounded(plain, "a.json", _Err)
