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
# The lean headers' precompiled state (~300 MB, ~20 s to make) is kept for the checkout, not per process: every
# pytest run and worker shares it, and it never lands in the learner's cache. It is made on first need.
os.environ.setdefault("TORCHLENS_PCH_DIR", os.path.join(os.path.dirname(os.path.abspath(__file__)), ".test-cache",
                                                        "precompiled"))
