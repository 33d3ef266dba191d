"""The sandbox's namespaces hold from inside, for root and for an unprivileged user: no capabilities, mounts that
cannot be undone, nothing of the host but what was bound, and no way to the host's root through /proc."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from torchlens_widgets.course import sandbox

_INSIDE = r"""
grep -q '^CapEff:\s*0000000000000000$' /proc/self/status && echo no-capabilities
umount /tmp 2>/dev/null || echo umount-refused
mount -t tmpfs tmpfs /usr 2>/dev/null || echo mount-refused
[ -e /work ] || [ -e /root ] || [ -e /home ] || echo host-folders-absent
[ -e /etc/shadow ] || echo shadow-absent
ls /proc/1/root/work /proc/1/root/root >/dev/null 2>&1 || echo proc-root-closed
touch /usr/x 2>/dev/null || echo usr-read-only
[ $$ -le 3 ] && echo own-pid-namespace
"""
_EXPECTED = ["no-capabilities", "umount-refused", "mount-refused", "host-folders-absent", "shadow-absent",
             "proc-root-closed", "usr-read-only", "own-pid-namespace"]


def _run(prefix: list[str]) -> list[str]:
    argv = [*prefix, sandbox.bwrap() or "bwrap", *sandbox._namespaces(), *sandbox._system(), "--", "/bin/sh", "-c",
            _INSIDE]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    return done.stdout.split()


@pytest.mark.skipif(not sandbox.available(), reason=f"no sandbox here: {sandbox.INSTALL}")
def test_the_sandbox_holds_from_inside() -> None:
    assert _run([]) == _EXPECTED


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv") or not sandbox.available(),
                    reason="switches to an unprivileged user with setpriv, as root")
def test_the_sandbox_holds_for_an_unprivileged_user() -> None:
    probe = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                            sandbox.bwrap() or "bwrap", "--unshare-user", "--ro-bind", "/", "/", "--", "/bin/true"],
                           capture_output=True, timeout=30)
    if probe.returncode != 0:
        pytest.skip("this kernel does not let an unprivileged user create user namespaces")
    assert _run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]) == _EXPECTED
