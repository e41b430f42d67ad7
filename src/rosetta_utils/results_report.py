"""The results page's rows: each task and framework's latest records, labelled.

:func:`results_rows` reads records (:func:`rosetta_utils.results.load_results`)
and keeps, per task, framework, device, profile and source (this build's or
curated), the newest one, with its headline numbers: a time (seconds per
epoch, or per 1,000 images), a rate (images, reviews or sequences per second)
and the test accuracy where the task has one. A record from another profile
than this build's, or from another commit, is labelled so.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

#: Metric names, in order of preference, for each column of the results table.
TIME_METRICS = ("seconds_per_epoch", "seconds_per_1000_images", "part_seconds")
RATE_METRICS = ("images_per_second", "sequences_per_second", "reviews_per_second")
ACCURACY_METRICS = ("test_accuracy",)


@dataclass(frozen=True)
class ResultRow:
    task: str
    framework: str
    device: str
    profile: str
    source: str  # "this build" or "curated"
    time: tuple[str, float] | None
    rate: tuple[str, float] | None
    accuracy: float | None
    date: str
    commit: str
    label: str  # "" when the record is from this build's profile and commit

    def cells(self) -> list[Any]:
        time = f"{self.time[1]:.3g} ({self.time[0].replace('_', ' ')})" if self.time else "-"
        rate = f"{self.rate[1]:,.1f} ({self.rate[0].replace('_', ' ')})" if self.rate else "-"
        accuracy = f"{self.accuracy:.4f}" if self.accuracy is not None else "-"
        return [self.task, self.framework, self.device, self.profile, self.source, time, rate,
                accuracy, self.date[:10], self.commit, self.label or "current"]


HEADERS = ["task", "framework", "device", "profile", "source", "time", "rate", "test accuracy",
           "date", "commit", "label"]


def _first(metrics: dict[str, Any], names: Iterable[str]) -> tuple[str, float] | None:
    for name in names:
        value = metrics.get(name)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return name, float(value)
    return None


def _base_commit(commit: str) -> str:
    return str(commit).split("+", 1)[0]


def label_of(record: dict[str, Any], profile: str, commit: str) -> str:
    """Why a record is not this build's: another profile, another commit (or both)."""
    reasons = []
    if record.get("profile") != profile:
        reasons.append(f"{record.get('profile')} profile")
    if _base_commit(record.get("commit", "")) != _base_commit(commit):
        reasons.append(f"older commit {_base_commit(record.get('commit', ''))}")
    return ", ".join(reasons)


def results_rows(records: Iterable[dict[str, Any]], profile: str, commit: str,
                 curated_folder: Path | None = None) -> list[ResultRow]:
    """The newest record per task, framework, device, profile and source, as rows."""
    newest: dict[tuple, dict[str, Any]] = {}
    for record in records:
        source = "curated" if curated_folder is not None and Path(record.get("source", "")).parent == curated_folder \
            else "this build"
        key = (record["task"], record["framework"], record["device"], record["profile"], source)
        if key not in newest or str(record["date"]) > str(newest[key]["date"]):
            newest[key] = {**record, "_source": source}
    rows = []
    for (task, framework, device, record_profile, source), record in sorted(newest.items()):
        accuracy = _first(record["metrics"], ACCURACY_METRICS)
        rows.append(ResultRow(
            task, framework, device, record_profile, source,
            _first(record["metrics"], TIME_METRICS), _first(record["metrics"], RATE_METRICS),
            accuracy[1] if accuracy else None, str(record["date"]), _base_commit(record["commit"]),
            label_of(record, profile, commit)))
    return rows
