"""GPU recordings shipped with the package: what a real GPU did in each notebook's CUDA scenarios, for the
learners who have none. tools/record_gpu.py writes them, one folder per topic, each with its provenance.

    rec = recording("async_exec")          # raises RecordingMissing (with the command that records it) if absent
    rec.label                              # "recorded on an NVIDIA H100 80GB HBM3 with torch 2.11.0+cu130, ..."
    rec.load("timing")                     # the JSON data (or an allocator snapshot's dict)
"""

from __future__ import annotations

import gzip
import json
import pickle
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1] / "data" / "recorded"
RECORD_COMMAND = "python tools/record_gpu.py"


class RecordingMissing(LookupError):
    """No GPU recording of a topic (or of one of its files) is in this package."""


@dataclass(frozen=True)
class Recording:
    """One topic's recorded files, read on demand, and where they were recorded."""

    topic: str
    folder: Path
    provenance: dict[str, Any] = field(repr=False)

    @property
    def label(self) -> str:
        """One line naming the GPU, torch, CUDA and Triton versions and the date, for every replayed picture."""
        p = self.provenance
        parts = [f"recorded on an NVIDIA {p['gpu'].removeprefix('NVIDIA ')}" if p.get("gpu") else "recorded",
                 f"with torch {p.get('torch')}"]
        if p.get("cuda"):
            parts.append(f"CUDA {p['cuda']}")
        if p.get("triton"):
            parts.append(f"Triton {p['triton']}")
        when = str(p.get("date", ""))[:10]
        return ", ".join(parts) + (f" on {when}" if when else "")

    def names(self) -> list[str]:
        """The recorded data files, without their extensions."""
        return sorted(p.name.split(".")[0] for p in self.folder.iterdir() if p.name.endswith((".json.gz", ".pickle.gz")))

    def step(self, name: str) -> dict[str, Any]:
        """The recorder's log entry of a step (its time, its error if it failed, the facts it noted)."""
        for s in self.provenance.get("steps", []):
            if s.get("step") == name:
                return s
        raise RecordingMissing(f"{self.topic}: no step {name!r} was recorded; steps: "
                               f"{[s.get('step') for s in self.provenance.get('steps', [])]}")

    def path(self, name: str) -> Path:
        for suffix in (".json.gz", ".pickle.gz"):
            if (self.folder / f"{name}{suffix}").is_file():
                return self.folder / f"{name}{suffix}"
        raise RecordingMissing(f"{self.topic}: no recorded file {name!r} (recorded: {', '.join(self.names()) or 'none'}). "
                               f"Record it on a GPU machine with `{RECORD_COMMAND} --only {self.topic}`.")

    def load(self, name: str) -> Any:
        """The data of `name`: JSON as lists and dicts, a pickled allocator snapshot as torch wrote it."""
        path = self.path(name)
        if path.name.endswith(".json.gz"):
            with gzip.open(path, "rt", encoding="utf-8") as f:
                return json.load(f)
        with gzip.open(path, "rb") as f:
            return pickle.load(f)


def topics() -> list[str]:
    """The topics with a GPU recording in this package."""
    return sorted(p.parent.name for p in ROOT.glob("*/provenance.json")) if ROOT.is_dir() else []


def recording(topic: str) -> Recording:
    """The recording of `topic`; RecordingMissing says how to make it if this package has none."""
    folder = ROOT / topic
    prov_path = folder / "provenance.json"
    if not prov_path.is_file():
        raise RecordingMissing(f"no GPU recording of {topic!r} in this package (recorded: {', '.join(topics()) or 'none'}). "
                               f"It is made on a CUDA machine with `{RECORD_COMMAND} --only {topic}`.")
    prov = json.loads(prov_path.read_text())
    if prov.get("dry_run"):
        raise RecordingMissing(f"the recording of {topic!r} is a CPU dry run, not a GPU's: record it with "
                               f"`{RECORD_COMMAND} --only {topic}` on a CUDA machine")
    return Recording(topic, folder, prov)
