"""Test-wide settings: checks must never write to the real progress store."""

import os
import tempfile

os.environ.setdefault("TORCHLENS_PROGRESS", os.path.join(tempfile.mkdtemp(prefix="tlw-progress-"), "progress.json"))
