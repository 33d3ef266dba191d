"""tools/record_gpu.py --dry-run runs every topic's code on the CPU, so the one GPU run is not where bugs are found."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

from record_gpu import TOPICS  # noqa: E402

# Run in a child: the dry run must import only the lens layer (the GPU image has no widget dependencies).
CHILD = """
import sys
sys.argv = ["record_gpu.py", "--dry-run", "--strict", "--out", sys.argv[1], "--only", sys.argv[2]]
sys.path.insert(0, "tools")
import record_gpu
code = record_gpu.main()
# (the package's own import notes torch's functions in course.integrity, which needs only torch, and installs
# course.trusted, which needs only the standard library)
ui = sorted(m for m in sys.modules if m.startswith(("torchlens_widgets.widgets", "torchlens_widgets.render",
                                                    "torchlens_widgets.course.", "anywidget", "ipywidgets",
                                                    "traitlets", "IPython"))
            and m not in ("torchlens_widgets.course.integrity", "torchlens_widgets.course.trusted"))
assert not ui, f"the recorder imported {ui}: the GPU image lacks them"
sys.exit(code)
"""


# The dry runs that compile most (2-4 CPU-minutes together) run in `make test-recorder`, before a GPU session records;
# `make test` keeps the others, so a change that breaks the recorder's use of the lenses still fails CI.
HEAVY = ("allocator", "compile", "fusion", "precision", "traces")


@pytest.mark.parametrize("topic", [pytest.param(t, marks=pytest.mark.recorder) if t in HEAVY else t for t in TOPICS])
def test_dry_run_records_every_step_of(topic: str, tmp_path: Path) -> None:
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor")}
    done = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path), topic], cwd=ROOT, capture_output=True,
                          text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    prov = json.loads((tmp_path / topic / "provenance.json").read_text())
    assert prov["dry_run"] is True and prov["torch"] == __import__("torch").__version__
    assert prov["steps"] and all(s["ok"] for s in prov["steps"]), prov["steps"]
    for name in prov["files"]:
        path = tmp_path / topic / name
        assert path.stat().st_size > 0, name
        if name.endswith(".json.gz"):
            with gzip.open(path, "rt") as f:
                json.load(f)


def test_without_a_gpu_the_real_run_refuses_with_advice(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "tools/record_gpu.py", "--out", str(tmp_path)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "--dry-run" in done.stderr
    assert not any(tmp_path.iterdir())
