"""Every pytest run (unit tests and nbval over the notebooks) records progress in a throwaway file and
builds C++ extensions in a throwaway cache.

Kernels that nbval starts inherit this environment, so running the suite never touches a learner's
real progress store or build cache (tests/course/test_progress_isolation.py proves it for progress).
"""

import os
import tempfile

_scratch = tempfile.mkdtemp(prefix="tlw-test-")
os.environ["TORCHLENS_PROGRESS"] = os.path.join(_scratch, "progress.json")
os.environ["TORCHLENS_BUILD_DIR"] = os.path.join(_scratch, "extensions")
