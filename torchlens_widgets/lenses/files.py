"""Reading files a learner was sent: bounded, so a crafted file costs an error, not minutes or gigabytes."""

from __future__ import annotations

import gzip
import io
import zlib
from pathlib import Path

__all__ = ["MAX_FILE_BYTES", "gunzip_bounded", "read_bounded"]

#: The most a trace or snapshot may cost, on disk and once decompressed (a gzip bomb stops here).
MAX_FILE_BYTES = 512 << 20


def gunzip_bounded(raw: bytes, where: str, error: type[Exception], limit: int | None = None) -> bytes:
    """Decompress at most `limit` bytes; past it, or for a truncated or corrupt file, raise `error`."""
    limit = MAX_FILE_BYTES if limit is None else limit
    out = bytearray()
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(raw)) as fh:
            while chunk := fh.read(1 << 20):
                out += chunk
                if len(out) > limit:
                    raise error(f"{where} decompresses to over {limit >> 20} MiB; export a shorter recording")
    except (EOFError, OSError, zlib.error) as e:
        raise error(f"{where} is a damaged gzip file ({e}); write it again") from None
    return bytes(out)


def read_bounded(path: Path, where: str, error: type[Exception]) -> bytes:
    """The bytes of `path`, gunzipped if it is gzip; a file over MAX_FILE_BYTES raises `error`."""
    if path.stat().st_size > MAX_FILE_BYTES:
        raise error(f"{where} is over {MAX_FILE_BYTES >> 20} MiB; export a shorter recording")
    raw = path.read_bytes()
    return gunzip_bounded(raw, where, error) if raw[:2] == b"\x1f\x8b" else raw
