"""Every pytest run (unit tests and nbval over the notebooks) records progress in a throwaway file.

Kernels that nbval starts inherit this environment, so running the suite never touches a learner's
real progress store (tests/course/test_progress_isolation.py proves it).
"""

import os
import tempfile

os.environ["TORCHLENS_PROGRESS"] = os.path.join(tempfile.mkdtemp(prefix="tlw-progress-"), "progress.json")
