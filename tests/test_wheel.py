"""The wheel a learner installs: both extensions in its shared data (enabled by `pip install`, no
`jupyter lab build`), the LICENSE it declares, the widget bundles, and nothing from the build tree."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LAB = "torchlens_widgets-0.1.0.data/data/share/jupyter/labextensions/torchlens-widgets/"
SERVER_CONFIG = "torchlens_widgets-0.1.0.data/data/etc/jupyter/jupyter_server_config.d/torchlens_widgets.json"
JS_BUDGET = 150 * 1024


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Built from a copy of the checkout (the build writes its JS outputs into the tree it builds, and other
    tests read this checkout's), reusing its node_modules."""
    out = tmp_path_factory.mktemp("wheel")
    tree = tmp_path_factory.mktemp("tree") / "repo"
    skip = {REPO / n for n in (".venv", ".git", "course", "labextension/node_modules", "labextension/lib")}
    shutil.copytree(REPO, tree, symlinks=True,
                    ignore=lambda d, names: [n for n in names if Path(d) / n in skip or n == "__pycache__"])
    (tree / "labextension" / "node_modules").symlink_to(REPO / "labextension" / "node_modules")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out),
                    str(tree)], check=True, cwd=tree, timeout=600)
    (found,) = out.glob("torchlens_widgets-*.whl")
    return found


def test_wheel_carries_both_extensions_the_license_and_the_bundles(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names), "the LICENSE pyproject declares"
    assert f"{LAB}package.json" in names
    lab_js = [n for n in names if n.startswith(f"{LAB}static/") and n.endswith(".js")]
    assert any("remoteEntry" in n for n in lab_js), lab_js
    with zipfile.ZipFile(wheel) as z:
        size = sum(z.getinfo(n).file_size for n in lab_js)
        config = json.loads(z.read(SERVER_CONFIG))
        package = json.loads(z.read(f"{LAB}package.json"))
    assert size <= JS_BUDGET, f"lab extension JS is {size} bytes (budget {JS_BUDGET})"
    assert config == {"ServerApp": {"jpserver_extensions": {"torchlens_widgets.course.server": True}}}
    assert package["name"] == "torchlens-widgets" and package["jupyterlab"]["_build"]["load"].startswith("static/remoteEntry")
    for bundle in ("stride", "dispatch", "gradgraph", "memory", "dtable", "tgrid"):
        assert f"torchlens_widgets/static/{bundle}.js" in names
    assert "torchlens_widgets/course/REST.md" in names
    assert not [n for n in names if "node_modules" in n or n.startswith(("tests/", "labextension/"))]


def test_installed_wheel_enables_both_extensions(wheel: Path, tmp_path: Path) -> None:
    """Installed into a fresh environment: Jupyter lists the lab extension and the server extension as enabled
    there, without a build step. (Its dependencies come from this environment through a .pth file, so the
    test needs no network.)"""
    fresh = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(fresh)], check=True, timeout=300)
    python = fresh / "bin" / "python"
    # the fresh environment's own pip, before it can see anything of this one: pip with --prefix or a
    # shared site-packages would uninstall this environment's (editable) copy first
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-compile", "--no-index", str(wheel)],
                   check=True, timeout=300)
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())
    deps = [p for p in map(Path, sys.path) if p.name == "site-packages" and p.is_dir()]
    (site / "_this_env_deps.pth").write_text("\n".join(map(str, deps)) + "\n")  # appended after its own packages
    env = {k: v for k, v in os.environ.items() if not k.startswith("JUPYTER")}
    env.update(JUPYTER_CONFIG_DIR=str(tmp_path / "cfg"), JUPYTER_DATA_DIR=str(tmp_path / "data"))

    def jupyter(module: str, *args: str) -> str:  # `jupyter labextension` etc. as modules: no scripts in this venv
        done = subprocess.run([str(python), "-m", module, *args], env=env, capture_output=True, text=True, timeout=120)
        return " ".join((done.stdout + done.stderr).split())

    labs = jupyter("jupyterlab.labextensions", "list")
    assert f"{fresh}/share/jupyter/labextensions torchlens-widgets v0.1.0 enabled OK" in labs.replace("\x1b[32m", "").replace(
        "\x1b[0m", ""), labs
    servers = jupyter("jupyter_server.extension.serverextension", "list").replace("\x1b[32m", "").replace("\x1b[0m", "")
    assert f"Config dir: {fresh}/etc/jupyter" in servers, servers
    assert "torchlens_widgets.course.server enabled" in servers and "torchlens_widgets.course.server OK" in servers, servers
