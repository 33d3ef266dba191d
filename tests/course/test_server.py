"""The course server extension over real HTTP: auth required, the outline in course order, live progress,
validation in a fresh kernel (killed on timeout), reset from the released copy; paths confined to the course."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import stat
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pytest

from torchlens_widgets.course.progress import ProgressStore
from torchlens_widgets.course.server import ENV_COURSE, ENV_RUN, ENV_VALIDATE_TIMEOUT, TorchlensCourse

REPO = Path(__file__).resolve().parents[2]
MARK = "TORCHLENS_TEST_SERVER"  # in the test server's environment, so in every process it starts


@dataclass
class Server:
    url: str
    token: str
    store: Path
    course: str = ""
    pid: int = 0
    mark: str = ""

    def get(self, path: str, token: str | None = "use", body: dict | None = None) -> tuple[int, dict]:
        return self.post_raw(path, None if body is None else json.dumps(body).encode(), token)

    def post_raw(self, path: str, data: bytes | None, token: str | None = "use") -> tuple[int, dict]:
        headers = {} if token is None else {"Authorization": f"token {self.token if token == 'use' else token}"}
        req = urllib.request.Request(self.url + path, headers=headers, data=data, method="POST" if data else "GET")
        try:
            with urllib.request.urlopen(req, timeout=120) as resp:
                return resp.status, json.loads(resp.read() or b"{}")
        except urllib.error.HTTPError as exc:
            body = exc.read()
            try:
                return exc.code, json.loads(body or b"{}")
            except json.JSONDecodeError:
                return exc.code, {"raw": body.decode(errors="replace")[:200]}


def _notebook(path: Path, title: str, thesis: str, grades: list[tuple[str, int]]) -> None:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell(f"# {title}\n\n**Thesis.** {thesis} More text.")]
    for gid, pts in grades:
        cell = nbformat.v4.new_code_cell(f"# test for {gid}")
        cell.metadata["nbgrader"] = {"grade": True, "solution": False, "locked": True, "points": pts,
                                     "grade_id": gid, "schema_version": 3}
        nb.cells.append(cell)
    nbformat.write(nb, path)


LOOP_TIMEOUT_S = 8


def _graded(source: str, gid: str, points: int = 1) -> nbformat.NotebookNode:
    cell = nbformat.v4.new_code_cell(source)
    cell.metadata["nbgrader"] = {"grade": True, "solution": False, "locked": True, "points": points,
                                 "grade_id": gid, "schema_version": 3}
    return cell


def _checks_notebook(path: Path) -> None:
    """Checks that pass, fail, miss their answer, never start (the cell raised first) and fail quietly
    (the cell swallows the failure: only the result the check attaches to its display says so); a
    student copy (hidden tests)."""
    from torchlens_widgets.course.markers import HIDDEN_PLACEHOLDER

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [
        nbformat.v4.new_markdown_cell("# Checks\n\n**Thesis.** Checks grade."),
        nbformat.v4.new_code_cell("def answer():\n    return 41"),
        _graded("from torchlens_widgets.course import check\nwith check('03-pass', points=1) as c:\n"
                "    c.that(answer() > 0, 'answer() is positive')", "03-pass"),
        _graded("from torchlens_widgets.course import check\nwith check('03-fail', points=2) as c:\n"
                f"    c.equal(answer(), 42, what='answer()')\n{HIDDEN_PLACEHOLDER}", "03-fail", 2),
        _graded("from torchlens_widgets.course import check\nwith check('03-missing', points=1) as c:\n"
                "    c.equal(unwritten(), 1, what='unwritten()')", "03-missing"),
        _graded("from torchlens_widgets.course import check\nratio = 1 / 0\nwith check('03-raises', points=1) as c:\n"
                "    c.that(ratio > 0, 'ratio is positive')", "03-raises"),
        _graded("from torchlens_widgets.course import check\ntry:\n    with check('03-caught', points=1) as c:\n"
                "        c.equal(answer(), 40, what='answer() again')\nexcept Exception:\n    pass", "03-caught"),
    ]
    nbformat.write(nb, path)


def _released_notebook(src: Path, course: Path) -> None:
    """05-reset.ipynb, released from a source with a solution: the course keeps a pristine copy."""
    from torchlens_widgets.course.release import release_path

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    answer = nbformat.v4.new_code_cell("def double(x):\n    ### BEGIN SOLUTION\n    return 2 * x\n    ### END SOLUTION")
    answer.metadata["nbgrader"] = {"grade": False, "solution": True, "locked": False,
                                   "grade_id": "05-double-answer", "schema_version": 3}
    nb.cells = [nbformat.v4.new_markdown_cell("# Reset\n\n**Thesis.** Start over."), answer,
                _graded("from torchlens_widgets.course import check\nwith check('05-double', points=1) as c:\n"
                        "    c.equal(double(2), 4, what='double(2)')", "05-double")]
    src.mkdir()
    nbformat.write(nb, src / "05-reset.ipynb")
    release_path(src, course)


def _loop_notebook(path: Path) -> None:
    """Never ends; its kernel leaves its pid in .kernel.pid first and starts a daemon in a session of its own,
    so the test can see them go."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell("import os, subprocess\nopen('.kernel.pid', 'w').write(str(os.getpid()))\n"
                                          "subprocess.Popen(['setsid', 'sleep', '1000'])  # a daemon of its own\n"
                                          "while True:\n    pass"),
                _graded("from torchlens_widgets.course import check\nwith check('04-after', points=1) as c:\n"
                        "    c.that(True, 'never reached')", "04-after")]
    nbformat.write(nb, path)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("server")
    root = tmp / "root"
    course = root / "course"
    course.mkdir(parents=True)
    _notebook(course / "02-views.ipynb", "Views", "A view shares storage.", [("02-a", 2), ("02-b", 3)])
    _notebook(course / "01-runtime.ipynb", "The runtime", "Every call crosses layers.", [("01-a", 1)])
    (course / "notes.ipynb").write_text("{}")  # not a course notebook (no NN- prefix)
    _checks_notebook(course / "03-checks.ipynb")
    _loop_notebook(course / "04-loop.ipynb")
    _released_notebook(tmp / "src", course)
    (root / "outside.ipynb").write_text("{}")
    (course / "link.ipynb").symlink_to(root / "outside.ipynb")
    (course / "loop.ipynb").symlink_to(course / "loop2.ipynb")
    (course / "loop2.ipynb").symlink_to(course / "loop.ipynb")
    store = tmp / "progress.json"
    token, port, mark = secrets.token_hex(16), _free_port(), secrets.token_hex(8)
    # enabled by the config file the wheel installs, put in this server's private config folder
    enable = tmp / "config" / "jupyter_server_config.d"
    enable.mkdir(parents=True)
    shutil.copy(REPO / "jupyter-config" / "jupyter_server_config.d" / "torchlens_widgets.json", enable)
    env = dict(os.environ, TORCHLENS_PROGRESS=str(store), JUPYTER_CONFIG_DIR=str(tmp / "config"),
               JUPYTER_DATA_DIR=str(tmp / "data"), JUPYTER_RUNTIME_DIR=str(tmp / "runtime"), **{MARK: mark})
    for name in (ENV_COURSE, ENV_VALIDATE_TIMEOUT):
        env.pop(name, None)
    cmd = [sys.executable, "-m", "jupyter_server", "--no-browser", f"--port={port}", "--ServerApp.ip=127.0.0.1",
           f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}", "--ServerApp.port_retries=0",
           f"--TorchlensCourse.course_dir={course}", "--TorchlensCourse.validate_timeout=40",
           "--TorchlensCourse.cell_timeout=30"]
    if os.geteuid() == 0:
        cmd.append("--allow-root")
    log = (tmp / "server.log").open("w")
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
    srv = Server(f"http://127.0.0.1:{port}", token, store, str(course), proc.pid, mark)
    try:
        for _ in range(150):
            try:
                if srv.get("/api/status")[0] == 200:
                    break
            except OSError:
                pass
            time.sleep(0.2)
        else:
            pytest.fail(f"jupyter server did not start: {(tmp / 'server.log').read_text()[-2000:]}")
        yield srv
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        log.close()


@pytest.mark.parametrize("path", ["/torchlens/api/outline", "/torchlens/api/progress", "/torchlens/api/validate",
                                  "/torchlens/api/reset"])
def test_every_endpoint_needs_jupyter_s_token(server: Server, path: str) -> None:
    body = {"path": "01-runtime.ipynb"} if path.endswith("validate") else None
    if path.endswith("reset"):  # refused before anything is touched; with the token, a 400 for the bad id
        assert server.get(path, token=None, body={"path": "05-reset.ipynb", "grade_id": "05-double"})[0] in (401, 403)
        assert server.get(path, body={"path": "05-reset.ipynb", "grade_id": "nope"})[0] == 400
        return
    assert server.get(path, token=None, body=body)[0] in (401, 403)
    assert server.get(path, token="wrong", body=body)[0] in (401, 403)
    assert server.get(path, body=body)[0] == 200


def test_outline_lists_course_notebooks_in_order_with_exercises(server: Server) -> None:
    status, body = server.get("/torchlens/api/outline")
    assert status == 200 and body["problem"] is None
    assert body["course_dir"] == server.course  # from c.TorchlensCourse.course_dir
    assert [nb["path"] for nb in body["notebooks"]] == ["course/01-runtime.ipynb", "course/02-views.ipynb",
                                                        "course/03-checks.ipynb", "course/04-loop.ipynb",
                                                        "course/05-reset.ipynb"]
    views = body["notebooks"][1]
    assert (views["title"], views["thesis"], views["points"]) == ("Views", "A view shares storage.", 5)
    assert views["exercises"] == [{"grade_id": "02-a", "points": 2}, {"grade_id": "02-b", "points": 3}]


def test_progress_follows_the_store_without_a_restart(server: Server) -> None:
    status, body = server.get("/torchlens/api/progress")
    assert status == 200 and body["total"] == {"earned": 0, "possible": 14, "exercises": 10, "passed": 0}
    ProgressStore(server.store).record_pass("02-b", 3, 3, notebook="02-views.ipynb", scope="visible")
    status, body = server.get("/torchlens/api/progress")
    views = next(nb for nb in body["notebooks"] if nb["notebook"] == "02")
    assert {e["grade_id"]: e["status"] for e in views["exercises"]} == {"02-a": "not passed", "02-b": "visible"}
    a, b = views["exercises"]
    assert (a["passed"], a["first_passed"], b["passed"]) == (False, None, True)
    assert b["first_passed"] == ProgressStore(server.store).passed()["02-b"]["first_passed"] and b["last_passed"]
    assert (views["earned"], views["possible"]) == (3, 5)
    assert body["total"]["passed"] == 1 and body["store"] == str(server.store)


@pytest.mark.parametrize(
    "path", ["../outside.ipynb", "/etc/passwd", "link.ipynb", "01-runtime.py", "", None, "missing.ipynb"],
    ids=["dotdot", "absolute", "symlink-out", "not-ipynb", "empty", "none", "missing"])
def test_validate_refuses_paths_outside_the_course(server: Server, path: object) -> None:
    status, body = server.get("/torchlens/api/validate", body={"path": path})
    assert status == 400 and body["error"], body


@pytest.mark.parametrize("path", ["loop.ipynb", "nul\0byte.ipynb", "x" * 5000 + ".ipynb", "deep/" * 2000 + "a.ipynb"],
                         ids=["symlink-loop", "nul-byte", "5000-characters", "deep-path"])
def test_bad_paths_answer_400_with_a_reason(server: Server, path: str) -> None:
    for endpoint, extra in (("validate", {}), ("reset", {"grade_id": "05-double"})):
        status, body = server.get(f"/torchlens/api/{endpoint}", body={"path": path, **extra})
        assert status == 400 and body["error"], (endpoint, status, body)


def test_deeply_nested_or_huge_json_answers_400(server: Server) -> None:
    for raw in (b"[" * 100_000 + b"]" * 100_000, b'{"path": "' + b"a" * 200_000 + b'"}'):
        status, body = server.post_raw("/torchlens/api/validate", raw)
        assert status == 400 and "JSON object" in body["error"], (status, body)


@pytest.mark.parametrize("timeout", [0, -1, "soon", True])
def test_validate_refuses_a_nonsense_timeout(server: Server, timeout: object) -> None:
    status, body = server.get("/torchlens/api/validate", body={"path": "01-runtime.ipynb", "timeout": timeout})
    assert status == 400 and "timeout" in body["error"], body


def test_validate_reports_each_visible_check_and_never_all_passed_with_hidden_tests(server: Server) -> None:
    before = server.store.read_text() if server.store.exists() else None
    status, body = server.get("/torchlens/api/validate", body={"path": "03-checks.ipynb"})
    assert status == 200, body
    by_id = {c["grade_id"]: c for c in body["checks"]}
    assert by_id["03-pass"]["status"] == "passed"
    assert by_id["03-fail"]["status"] == "failed" and "answer()" in by_id["03-fail"]["message"]
    assert by_id["03-missing"]["status"] == "not attempted" and "unwritten" in by_id["03-missing"]["message"]
    assert by_id["03-raises"]["status"] == "not attempted" and "ZeroDivisionError" in by_id["03-raises"]["message"]
    assert by_id["03-caught"]["status"] == "failed" and "answer() again" in by_id["03-caught"]["message"]
    assert [c["grade_id"] for c in body["checks"]] == ["03-pass", "03-fail", "03-missing", "03-raises", "03-caught"]
    assert body["hidden_tests"] is True and "graded" in body["notice"]
    after = server.store.read_text() if server.store.exists() else None
    assert after == before  # validation never writes the learner's progress


def _environ(pid: int) -> list[bytes]:
    try:
        return Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:  # gone, or not ours
        return []


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie is gone
    except (OSError, IndexError):
        return False


def _validation_processes(mark: str) -> list[int]:
    """Processes a validation of this test's server started (the validator, its kernel) still running."""
    ours = f"{MARK}={mark}".encode()
    return [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit() and _alive(int(p.name))
            and ours in (env := _environ(int(p.name))) and any(e.startswith(f"{ENV_RUN}=".encode()) for e in env)]


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="reads processes from /proc (Linux)")
def test_validate_of_an_endless_notebook_times_out_cleanly(server: Server) -> None:
    assert f"{MARK}={server.mark}".encode() in _environ(server.pid)  # the /proc scan below sees our processes
    pid_file = Path(server.course) / ".kernel.pid"
    t0 = time.monotonic()
    status, body = server.get("/torchlens/api/validate", body={"path": "04-loop.ipynb", "timeout": LOOP_TIMEOUT_S})
    elapsed = time.monotonic() - t0
    assert status == 200 and body["stopped"] == "timeout", body
    assert [c["status"] for c in body["checks"]] == ["timeout"]
    assert elapsed < LOOP_TIMEOUT_S + 8  # it stops itself; the server would kill it at GRACE_S past the deadline
    assert int(pid_file.read_text()) > 0  # the loop did start in a kernel (its pid is its PID namespace's) ...
    assert _validation_processes(server.mark) == []  # ... which is gone, and so is all the validation started


def test_reset_restores_the_stub_and_keeps_the_learner_s_answer_in_a_backup(server: Server) -> None:
    course = Path(server.course)
    nb_path = course / "05-reset.ipynb"
    nb = nbformat.read(nb_path, as_version=4)
    stub = nb.cells[1].source
    assert "NotImplementedError" in stub and "2 * x" not in stub
    nb.cells[1].source = "def double(x):\n    return x + x  # my answer"
    nb.cells[0].source += "\n\nmy note"
    nbformat.write(nb, nb_path)
    status, body = server.get("/torchlens/api/reset", body={"path": "05-reset.ipynb", "grade_id": "05-double"})
    assert status == 200, body
    after = nbformat.read(nb_path, as_version=4)
    assert after.cells[1].source == stub and after.cells[1].outputs == [] and after.cells[1].id == nb.cells[1].id
    assert after.cells[0].source.endswith("my note")  # nothing else changed
    backup = Path(body["backup"])
    assert backup.is_file() and backup.is_relative_to(course / ".torchlens" / "backups")
    assert "return x + x  # my answer" in backup.read_text()
    # a second reset at once keeps the first backup (the learner's answer) and adds its own
    status, again = server.get("/torchlens/api/reset", body={"path": "05-reset.ipynb", "grade_id": "05-double"})
    assert status == 200 and again["backup"] != body["backup"] and "my answer" in backup.read_text()


def test_open_backup_copies_a_reset_s_backup_where_jupyter_opens_it(server: Server) -> None:
    """Jupyter's contents API refuses files in dot folders (.torchlens/backups): "Open backup" asks for a copy in
    backups/ beside the notebook and opens the path this answers, relative to the server's root."""
    status, done = server.get("/torchlens/api/reset", body={"path": "05-reset.ipynb", "grade_id": "05-double"})
    assert status == 200, done
    name = Path(done["backup"]).name
    body = {"path": "05-reset.ipynb", "backup": name}
    assert server.get("/torchlens/api/backup", token=None, body=body)[0] in (401, 403)
    status, copy = server.get("/torchlens/api/backup", body=body)
    assert status == 200, copy
    course = Path(server.course)
    assert copy["path"] == f"{course.name}/backups/{name}"
    assert Path(copy["backup"]).read_text() == Path(done["backup"]).read_text()
    for bad in ({"path": "05-reset.ipynb", "backup": "../05-reset.ipynb"}, {"path": "05-reset.ipynb"},
                {"path": "../outside.ipynb", "backup": name}, {"path": "05-reset.ipynb", "backup": "nope.ipynb"}):
        status, answer = server.get("/torchlens/api/backup", body=bad)
        assert status == 400 and answer["error"], (bad, answer)


def test_reset_keeps_the_notebook_s_mode_and_writes_private_backups(tmp_path: Path) -> None:
    from torchlens_widgets.course.reset import ResetError, reset_exercise

    src, course = tmp_path / "src", tmp_path / "course"
    _released_notebook(src, course)
    learner = course / "05-reset.ipynb"
    learner.chmod(0o600)
    done = reset_exercise(learner, "05-double")
    backup = Path(done["backup"])
    assert stat.S_IMODE(learner.stat().st_mode) == 0o600
    assert stat.S_IMODE(backup.stat().st_mode) == 0o600 and stat.S_IMODE(backup.parent.stat().st_mode) == 0o700
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.rmtree(course / ".torchlens" / "backups")
    (course / ".torchlens" / "backups").symlink_to(elsewhere, target_is_directory=True)
    before = learner.read_text()
    with pytest.raises(ResetError, match="is a symbolic link"):
        reset_exercise(learner, "05-double")
    assert list(elsewhere.iterdir()) == [] and learner.read_text() == before


@pytest.mark.parametrize(
    ("body", "error"),
    [({"path": "05-reset.ipynb", "grade_id": "05-nothing"}, "no answer cell"),
     ({"path": "05-reset.ipynb"}, "grade_id"),
     ({"path": "01-runtime.ipynb", "grade_id": "01-a"}, "no released copy"),
     ({"path": "../outside.ipynb", "grade_id": "05-double"}, "inside the course folder"),
     ({"path": "05-reset.ipynb", "grade_id": "../../05-double"}, "letters, digits")],
    ids=["unknown-id", "no-id", "not-released", "outside", "id-with-a-path"])
def test_reset_refuses_with_a_reason(server: Server, body: dict, error: str) -> None:
    status, answer = server.get("/torchlens/api/reset", body=body)
    assert status == 400 and error in answer["error"], answer


def test_course_folder_comes_from_config_else_environment_else_root(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_COURSE, raising=False)
    monkeypatch.delenv(ENV_VALIDATE_TIMEOUT, raising=False)
    assert TorchlensCourse().course(tmp_path) == tmp_path.resolve()
    assert TorchlensCourse().timeout_limit() == 120
    monkeypatch.setenv(ENV_COURSE, str(tmp_path / "env"))
    monkeypatch.setenv(ENV_VALIDATE_TIMEOUT, "30")
    assert TorchlensCourse().course(tmp_path) == (tmp_path / "env").resolve()
    assert TorchlensCourse().timeout_limit() == 30
    configured = TorchlensCourse(course_dir=str(tmp_path / "cfg"), validate_timeout=9)
    assert configured.course(tmp_path) == (tmp_path / "cfg").resolve() and configured.timeout_limit() == 9


@pytest.mark.skipif(not Path("/proc/self/environ").exists() or not shutil.which("setsid"),
                    reason="reads processes from /proc (Linux), starts a session with setsid")
def test_a_validation_that_overruns_is_killed_with_its_kernel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The validator stops itself at its deadline; one that does not (hung) is killed, and so is its kernel,
    which runs in a session of its own (as jupyter_client starts kernels), out of the validator's group."""
    import asyncio

    from torchlens_widgets.course import server as course_server

    hung = tmp_path / "hung-validator"
    nap = f"{300 + secrets.randbelow(10**6) / 1000:.3f}"  # names this test's processes
    hung.write_text(f'#!/bin/bash\npid_file="${{@: -1}}"\nsetsid sleep {nap} &\necho $! > "$pid_file"\nsleep {nap}\n')
    hung.chmod(0o755)
    monkeypatch.setattr(course_server.sys, "executable", str(hung))
    monkeypatch.setattr(course_server, "GRACE_S", 1.0)
    nb = tmp_path / "01-x.ipynb"
    nbformat.write(nbformat.v4.new_notebook(), nb)
    t0 = time.monotonic()
    report = asyncio.run(course_server.run_validation(nb, timeout=1.0))
    assert report["stopped"] == "timeout" and "stopped" in report["error"] and time.monotonic() - t0 < 5
    leftover = [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit() and _alive(int(p.name))
                and nap.encode() in _cmdline(int(p.name))]
    assert leftover == []


def _cmdline(pid: int) -> list[bytes]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return []


def test_reset_of_an_unreadable_notebook_changes_nothing(tmp_path: Path) -> None:
    from torchlens_widgets.course.release import pristine_path
    from torchlens_widgets.course.reset import ResetError, reset_exercise

    src, course = tmp_path / "src", tmp_path / "course"
    _released_notebook(src, course)
    learner = course / "05-reset.ipynb"
    learner.write_text('{"cells": [ half a notebook')
    with pytest.raises(ResetError, match="cannot be read as a notebook"):
        reset_exercise(learner, "05-double")
    assert learner.read_text() == '{"cells": [ half a notebook' and pristine_path(learner).is_file()
    assert not (course / ".torchlens" / "backups").exists()


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="reads processes from /proc (Linux)")
def test_a_server_that_stops_mid_validation_takes_the_validation_and_its_kernel_with_it(tmp_path: Path) -> None:
    """A stand-in for the server: a process running `run_validation` on an endless notebook, stopped with SIGTERM
    while the kernel loops (and its daemon sleeps)."""
    from torchlens_widgets.course import sandbox

    if not sandbox._can_contain():
        pytest.skip("bubblewrap cannot make a PID namespace here")
    _loop_notebook(tmp_path / "04-loop.ipynb")
    mark = secrets.token_hex(8)
    code = ("import asyncio, pathlib; from torchlens_widgets.course.server import run_validation; "
            f"asyncio.run(run_validation(pathlib.Path({str(tmp_path / '04-loop.ipynb')!r}), timeout=120))")
    proc = subprocess.Popen([sys.executable, "-c", code], env=dict(os.environ, **{MARK: mark}), cwd=tmp_path)
    end = time.monotonic() + 60
    while not (tmp_path / ".kernel.pid").exists() and time.monotonic() < end:
        time.sleep(0.2)
    assert (tmp_path / ".kernel.pid").exists(), "the notebook never started"
    assert _validation_processes(mark)
    proc.terminate()
    proc.wait(timeout=10)
    end = time.monotonic() + 10
    while _validation_processes(mark) and time.monotonic() < end:
        time.sleep(0.2)
    assert _validation_processes(mark) == []
