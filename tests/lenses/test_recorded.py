"""Every shipped GPU recording loads, says where it was recorded, and is a GPU's (not a dry run)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from torchlens_widgets.lenses import recorded
from torchlens_widgets.lenses.recorded import RecordingMissing, recording, topics

EXPECTED = ("allocator", "async_exec", "cuda_operator", "fusion", "precision", "traces", "compile", "triton",
            "distributed")


def test_every_topic_of_the_recorder_is_shipped() -> None:
    assert set(topics()) == set(EXPECTED), "run tools/record_gpu.py on a GPU machine and commit its output"


@pytest.mark.parametrize("topic", EXPECTED)
def test_every_file_of_a_recording_loads_and_names_its_gpu(topic: str) -> None:
    rec = recording(topic)
    assert rec.provenance["dry_run"] is False and "+cu" in rec.provenance["torch"]
    assert rec.label.startswith("recorded on an NVIDIA ") and f"torch {rec.provenance['torch']}" in rec.label
    assert rec.names(), "a recording with no data"
    for name in rec.names():
        assert rec.load(name) is not None
    listed = {f.split(".")[0] for f in rec.provenance["files"]}
    assert listed == set(rec.names())


def test_the_whole_set_stays_small() -> None:
    total = sum(p.stat().st_size for p in recorded.ROOT.rglob("*") if p.is_file())
    assert total < 10 * 2**20, f"{total:,} bytes of recordings"


def test_a_missing_topic_or_file_says_how_to_record_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(RecordingMissing, match=r"python tools/record_gpu.py --only nothing"):
        recording("nothing")
    with pytest.raises(RecordingMissing, match="no recorded file 'nothing'.*--only allocator"):
        recording("allocator").load("nothing")
    (tmp_path / "dry").mkdir()
    (tmp_path / "dry" / "provenance.json").write_text(json.dumps({"dry_run": True}))
    monkeypatch.setattr(recorded, "ROOT", tmp_path)
    with pytest.raises(RecordingMissing, match="CPU dry run"):
        recording("dry")
