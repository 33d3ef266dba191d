"""The local progress store: durable, concurrent-safe, and never fatal to a learner's notebook."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import stat
import sys
import warnings
from datetime import datetime
from pathlib import Path

import pytest

from torchlens_widgets.course import progress
from torchlens_widgets.course.progress import ProgressStore, default_path


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Never touch the real home directory; forget warn-once state between tests."""
    monkeypatch.setenv("TORCHLENS_PROGRESS", str(tmp_path / "default" / "progress.json"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setattr(progress, "_warned", set())


def test_record_and_read(tmp_path: Path) -> None:
    store = ProgressStore(tmp_path / "p.json")
    store.record_pass("02-strides", 2, 2, notebook="02")
    store.record_pass("02-views", 1, 3, notebook="02", scope="visible")
    store.record_pass("loose", 1, 1)

    passed = ProgressStore(tmp_path / "p.json").passed()  # a fresh store reads it back from disk
    assert set(passed) == {"02-strides", "02-views", "loose"}
    entry = passed["02-strides"]
    assert set(entry) == {"points", "max_points", "notebook", "first_passed", "last_passed", "scope"}
    assert entry["scope"] == "full" and passed["02-views"]["scope"] == "visible"
    assert (entry["points"], entry["max_points"], entry["notebook"]) == (2, 2, "02")
    assert datetime.fromisoformat(entry["first_passed"]).utcoffset().total_seconds() == 0  # ISO, UTC

    data = json.loads((tmp_path / "p.json").read_text())
    assert data["version"] == 1 and set(data["checks"]) == set(passed)

    assert store.summary() == {
        "02": {"earned": 3.0, "possible": 5.0, "count": 2},
        "(no notebook)": {"earned": 1.0, "possible": 1.0, "count": 1},
    }


def test_points_keep_max_and_first_passed_is_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = ProgressStore(tmp_path / "p.json")
    monkeypatch.setattr(progress, "_now", lambda: "2024-01-01T00:00:00+00:00")
    store.record_pass("a", 3, 3, notebook="01")
    monkeypatch.setattr(progress, "_now", lambda: "2024-06-01T00:00:00+00:00")
    store.record_pass("a", 1, 3)  # a lower score later (and no notebook) never lowers what was earned
    entry = store.passed()["a"]
    assert entry["points"] == 3
    assert entry["notebook"] == "01"
    assert entry["first_passed"] == "2024-01-01T00:00:00+00:00"
    assert entry["last_passed"] == "2024-06-01T00:00:00+00:00"


def test_pass_then_fail_keeps_the_pass(tmp_path: Path) -> None:
    # Only passes are recorded: a failing attempt simply calls nothing, and the file is untouched.
    path = tmp_path / "p.json"
    ProgressStore(path).record_pass("x", 1, 1)
    before = path.read_bytes()
    ProgressStore(path).passed()
    ProgressStore(path).record_pass("y", 1, 1)
    assert set(ProgressStore(path).passed()) == {"x", "y"}
    assert json.loads(before)["checks"]["x"] == json.loads(path.read_bytes())["checks"]["x"]


def test_passed_returns_a_copy(tmp_path: Path) -> None:
    store = ProgressStore(tmp_path / "p.json")
    store.record_pass("x", 1, 1)
    store.passed()["x"]["points"] = 0
    assert store.passed()["x"]["points"] == 1


@pytest.mark.parametrize(
    "content",
    [
        b"{not json",
        b"\xff\xfe\x00garbage",
        b"[1, 2, 3]",
        b'{"version": 1, "checks": []}',
        b'{"version": "1", "checks": {}}',
        b'{"checks": {}}',
        b"",
    ],
    ids=["bad-json", "binary", "list", "checks-not-dict", "version-str", "no-version", "empty"],
)
def test_corrupt_file_is_moved_aside(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "p.json"
    path.write_bytes(content)
    store = ProgressStore(path)
    with pytest.warns(RuntimeWarning, match=r"moved it to .*p\.json\.corrupt-") as record:
        store.record_pass("fresh", 1, 1)
    asides = list(tmp_path.glob("p.json.corrupt-*"))
    assert len(asides) == 1
    assert asides[0].read_bytes() == content  # the learner's old file is kept, not destroyed
    assert str(asides[0]) in str(record[0].message)
    assert set(store.passed()) == {"fresh"}
    assert json.loads(path.read_text())["version"] == 1


def test_corrupt_on_read_also_recovers(tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    path.write_text("{oops")
    with pytest.warns(RuntimeWarning, match="starting fresh"):
        assert ProgressStore(path).passed() == {}
    assert not path.exists() and len(list(tmp_path.glob("p.json.corrupt-*"))) == 1
    ProgressStore(path).record_pass("a", 1, 1)
    assert set(ProgressStore(path).passed()) == {"a"}


def test_malformed_entries_are_dropped_valid_ones_kept(tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    good = {"points": 1, "max_points": 1, "notebook": None, "first_passed": "t", "last_passed": "t"}
    path.write_text(json.dumps({"version": 1, "checks": {"good": good, "bad": {"points": "lots"}}}))
    with pytest.warns(RuntimeWarning, match="kept 1 valid entry"):
        assert set(ProgressStore(path).passed()) == {"good"}
    aside = next(tmp_path.glob("p.json.corrupt-*"))
    assert "bad" in json.loads(aside.read_text())["checks"]


def test_newer_format_version_is_left_untouched(tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"version": 99, "checks": {"future": {}}}))
    before = path.read_bytes()
    store = ProgressStore(path)
    with pytest.warns(RuntimeWarning, match="newer torchlens-widgets"):
        store.record_pass("a", 1, 1)
    assert path.read_bytes() == before
    assert set(store.passed()) == {"a"}  # still reported for this session


def _writer(path: str, worker: int, n: int, barrier) -> None:
    barrier.wait()  # start together, to contend for the lock
    store = ProgressStore(Path(path))
    for i in range(n):
        store.record_pass(f"w{worker}-{i}", 1, 1, notebook=f"nb{worker}")


@pytest.mark.skipif(sys.platform == "win32", reason="fcntl locking is POSIX only")
def test_concurrent_writers_lose_nothing(tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    ctx = mp.get_context("fork" if "fork" in mp.get_all_start_methods() else "spawn")
    barrier = ctx.Barrier(4)
    procs = [ctx.Process(target=_writer, args=(str(path), w, 25, barrier)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
        assert p.exitcode == 0
    passed = ProgressStore(path).passed()
    assert set(passed) == {f"w{w}-{i}" for w in range(4) for i in range(25)}
    assert ProgressStore(path).summary() == {
        f"nb{w}": {"earned": 25.0, "possible": 25.0, "count": 25} for w in range(4)
    }
    assert not list(tmp_path.glob("*.tmp")) and not list(tmp_path.glob("*.corrupt-*"))


def test_unwritable_location_warns_once_and_never_raises(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where a directory should be")
    store = ProgressStore(blocker / "sub" / "progress.json")  # works even as root, unlike chmod
    with pytest.warns(RuntimeWarning, match="TORCHLENS_PROGRESS") as record:
        store.record_pass("a", 1, 1)
    assert len([w for w in record if "cannot save" in str(w.message)]) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the second failure is silent: warn once, not once per check
        store.record_pass("b", 2, 2)
        ProgressStore(blocker / "sub" / "progress.json").record_pass("c", 1, 1)
    # kept for this session, as the warning says, across store instances (each check makes a new one)
    assert set(store.passed()) == {"a", "b", "c"}
    assert set(ProgressStore(blocker / "sub" / "progress.json").passed()) == {"a", "b", "c"}


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root ignores permissions")
def test_read_only_directory(tmp_path: Path) -> None:
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        with pytest.warns(RuntimeWarning, match="TORCHLENS_PROGRESS"):
            ProgressStore(ro / "progress.json").record_pass("a", 1, 1)
    finally:
        ro.chmod(0o755)


def test_permission_denied_on_write_is_a_warning(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Simulates a read-only location in a way that also works as root."""
    path = tmp_path / "p.json"
    ProgressStore(path).record_pass("old", 1, 1)
    before = path.read_bytes()

    def denied(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    store = ProgressStore(path)
    with monkeypatch.context() as m:
        m.setattr(progress.tempfile, "mkstemp", denied)
        with pytest.warns(RuntimeWarning, match=r"cannot save progress .*PermissionError.*Set the TORCHLENS_PROGRESS"):
            store.record_pass("new", 1, 1)
        assert path.read_bytes() == before
        assert set(store.passed()) == {"old", "new"}
    # writable again: the session's unsaved pass is saved along with the next one
    store.record_pass("later", 1, 1)
    assert set(ProgressStore(path).passed()) == {"old", "new", "later"}


def test_bad_arguments_warn_instead_of_raising(tmp_path: Path) -> None:
    store = ProgressStore(tmp_path / "p.json")
    with pytest.warns(RuntimeWarning, match="not recorded"):
        store.record_pass("", 1, 1)
    with pytest.warns(RuntimeWarning, match="not recorded"):
        store.record_pass("x", float("nan"), 1)
    assert store.passed() == {}


def test_environment_variables(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "custom" / "mine.json"
    monkeypatch.setenv("TORCHLENS_PROGRESS", str(target))
    assert default_path() == target
    ProgressStore().record_pass("a", 1, 1)
    assert target.exists() and "a" in json.loads(target.read_text())["checks"]

    monkeypatch.delenv("TORCHLENS_PROGRESS")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert default_path() == tmp_path / "xdg" / "torchlens-widgets" / "progress.json"
    monkeypatch.delenv("XDG_DATA_HOME")
    assert default_path() == Path.home() / ".local" / "share" / "torchlens-widgets" / "progress.json"
    assert str(tmp_path) in str(default_path())  # HOME is monkeypatched by the fixture


def test_reset(tmp_path: Path) -> None:
    store = ProgressStore(tmp_path / "p.json")
    for gid in "abc":
        store.record_pass(gid, 1, 1)
    assert store.reset("b") == 1
    assert store.reset("b") == 0
    assert set(store.passed()) == {"a", "c"}
    assert store.reset() == 2
    assert store.passed() == {}
    assert ProgressStore(tmp_path / "missing.json").reset() == 0
    assert not (tmp_path / "missing.json").exists()


def test_atomic_write_leaves_no_temp_files(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "er" / "p.json"  # parent directories are created
    store = ProgressStore(path)
    for i in range(5):
        store.record_pass(f"g{i}", 1, 1)
    assert sorted(p.name for p in path.parent.iterdir()) == ["p.json", "p.json.lock"]


def test_scope_full_is_never_downgraded_by_a_visible_only_pass(tmp_path: Path) -> None:
    store = ProgressStore(tmp_path / "p.json")
    store.record_pass("05-x", 2, 2, scope="visible")
    assert store.passed()["05-x"]["scope"] == "visible"
    store.record_pass("05-x", 2, 2, scope="full")
    store.record_pass("05-x", 2, 2, scope="visible")
    assert store.passed()["05-x"]["scope"] == "full"
    with pytest.warns(RuntimeWarning, match="scope"):
        store.record_pass("05-y", 1, 1, scope="all")
    assert "05-y" not in store.passed()


def test_dotted_ids_from_earlier_versions_are_read_as_nbgrader_ids(tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    entry = {"points": 2, "max_points": 2, "notebook": "02", "first_passed": "2026-01-01T00:00:00+00:00",
             "last_passed": "2026-01-02T00:00:00+00:00"}
    path.write_text(json.dumps({"version": 1, "checks": {"02.strides": entry, "plain": entry}}))
    passed = ProgressStore(path).passed()
    assert set(passed) == {"02-strides", "plain"}
    assert passed["02-strides"]["scope"] == "full"


def test_dev_null_switches_recording_off_and_is_never_replaced(tmp_path: Path) -> None:
    before = os.stat(os.devnull)
    store = ProgressStore(os.devnull)
    assert store.kind == "off"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # silent: /dev/null is the natural way to switch tracking off
        store.record_pass("a", 1, 1)
        assert store.passed() == {}
        assert store.reset() == 0
    after = os.stat(os.devnull)
    assert stat.S_ISCHR(after.st_mode) and (after.st_ino, after.st_rdev) == (before.st_ino, before.st_rdev)
    assert not os.path.exists(os.devnull + ".lock")
    assert not [p for p in os.listdir(os.path.dirname(os.devnull)) if p.startswith("null.corrupt")]


@pytest.mark.parametrize("make", ["fifo", "directory"])
def test_other_non_regular_paths_are_left_alone(tmp_path: Path, make: str) -> None:
    path = tmp_path / "progress.json"
    if make == "fifo":
        os.mkfifo(path)
    else:
        path.mkdir()
    store = ProgressStore(path)
    assert store.kind == "other"
    with pytest.warns(RuntimeWarning, match="not a regular file.*kept for this session"):
        store.record_pass("a", 1, 1)
    assert set(ProgressStore(path).passed()) == {"a"}
    assert (stat.S_ISFIFO if make == "fifo" else stat.S_ISDIR)(os.stat(path).st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["progress.json"]


def test_a_symlink_is_written_through_not_replaced(tmp_path: Path) -> None:
    real = tmp_path / "real.json"
    link = tmp_path / "link.json"
    link.symlink_to(real)
    ProgressStore(link).record_pass("a", 1, 1)
    assert link.is_symlink() and "a" in json.loads(real.read_text())["checks"]


@pytest.mark.parametrize(
    "text",
    ["[" * 100_000 + "]" * 100_000,
     '{"version": 1, "checks": {"x": {"points": 1' + "0" * 400 + ', "max_points": 1, "notebook": null, '
     '"first_passed": "t", "last_passed": "t"}}}'],
    ids=["deep-nesting", "400-digit-points"],
)
def test_pathological_files_are_moved_aside_not_crashing(tmp_path: Path, text: str, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "p.json"
    path.write_text(text)
    with pytest.warns(RuntimeWarning, match="unreadable"):
        assert ProgressStore(path).passed() == {}
    assert [p.name for p in tmp_path.iterdir() if ".corrupt-" in p.name]
    from torchlens_widgets.course.cli import main

    path.write_text(text)
    with pytest.warns(RuntimeWarning):
        assert main(["progress", "--store", str(path), "--course", str(tmp_path)]) == 0


def test_progress_reset_of_a_folder_fails_with_advice(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from torchlens_widgets.course.cli import main as cli

    assert cli(["progress", "--store", str(tmp_path), "--reset"]) == 2
    assert "is not a progress file" in capsys.readouterr().err
