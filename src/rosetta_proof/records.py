"""Measured results as JSON records: one line per run, appended, never rewritten.

A build writes into its own folder (``ROSETTA_RESULTS_DIR``; ``make book`` sets
it to ``_build/results``) and never touches a tracked file. Curated records,
for example from a GPU runner, are committed under ``results/`` at the
project's root. :func:`load_results` reads both into one table.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import subprocess
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from rosetta_utils.frameworks import check_framework
from rosetta_utils.run_profile import current_profile, is_test_build

REQUIRED_FIELDS = ("task", "framework", "versions", "device", "profile", "metrics", "date", "commit")


class CorruptRecordWarning(UserWarning):
    """A results line that is not a valid record; it was skipped."""


def project_root(start: Path | None = None) -> Path:
    """The folder holding ``_toc.yml`` at or above ``start`` (default: the working folder)."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / "_toc.yml").is_file():
            return folder
    return here


def build_results_dir() -> Path:
    """Where this run writes its records."""
    configured = os.environ.get("ROSETTA_RESULTS_DIR")
    if configured:
        return Path(configured)
    return project_root() / "_build" / "results"


def curated_results_dir() -> Path:
    """Committed records, e.g. from a GPU runner (``ROSETTA_CURATED_RESULTS_DIR`` overrides
    the project's ``results/``, for tests)."""
    configured = os.environ.get("ROSETTA_CURATED_RESULTS_DIR")
    return Path(configured) if configured else project_root() / "results"


def git_commit(folder: Path | None = None) -> str:
    """The checked-out commit, with ``+dirty`` if tracked files changed; ``unknown`` outside git."""
    cwd = folder or project_root()
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short=12", "HEAD"], cwd=cwd, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=cwd, capture_output=True, text=True, check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")


def record_result(
    task: str,
    framework: str,
    metrics: Mapping[str, Any],
    *,
    versions: Mapping[str, str],
    device: str,
    config: Mapping[str, Any] | None = None,
    folder: Path | None = None,
    verdicts: Mapping[str, Any] | None = None,
    held: bool | None = None,
) -> dict[str, Any]:
    """Append one record to ``<folder>/<task>.jsonl`` and return it.

    ``metrics`` holds the measured numbers; ``config`` what was measured
    (batch size, layout, data source, ...); ``verdicts`` the correctness verdicts
    the numbers were checked with, ``{check: {item: verdict}}``, and ``held`` whether
    they all passed (the device check gives both, from the page's comparisons). By
    default they are the checks this process gated so far
    (:func:`rosetta_proof.equivalence.gated_checks`: a page's comparison cells record
    after their ``require`` calls). A record whose verdicts did not hold, or that has
    none, is never shown as a result (:func:`standing`).
    """
    check_framework(framework)
    if not task or not task.replace("-", "").replace("_", "").isalnum():
        raise ValueError(f"task must be a plain name such as 'cifar10', got {task!r}")
    record = {
        "task": task,
        "framework": framework,
        "versions": dict(versions),
        "device": device,
        "profile": current_profile(),
        "metrics": dict(metrics),
        "config": dict(config or {}),
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "commit": git_commit(),
    }
    if verdicts is None:
        from .equivalence import gated_checks, verdicts_by_check

        checks = gated_checks()
        verdicts = verdicts_by_check(checks)
        if held is None:
            held = bool(checks) and all(check["passed"] for check in checks)
    record["verdicts"] = dict(verdicts)
    record["held"] = bool(held) if held is not None else False
    if is_test_build():  # its parts shared the machine: its times are not measurements
        record["test_build"] = True
    try:
        line = json.dumps(record, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError) as error:
        raise ValueError(
            f"result for {task}/{framework} cannot be recorded: metrics, config and verdicts must be "
            f"JSON numbers, strings, lists or objects, and numbers must be finite ({error})"
        ) from None
    target = folder or build_results_dir()
    target.mkdir(parents=True, exist_ok=True)
    with open(target / f"{task}.jsonl", "a", encoding="utf-8") as handle:
        handle.write(line + "\n")
    return record


def _check_record(record: Any) -> str | None:
    """Why ``record`` is not a valid record, or None if it is."""
    if not isinstance(record, dict):
        return f"expected a JSON object, got {type(record).__name__}"
    missing = [name for name in REQUIRED_FIELDS if name not in record]
    if missing:
        return f"missing field(s) {', '.join(missing)}"
    if not isinstance(record["metrics"], dict):
        return "'metrics' is not an object"
    try:
        dated = _dt.datetime.fromisoformat(str(record["date"]))
    except ValueError:
        return f"'date' {record['date']!r} is not an ISO date"
    if dated.tzinfo is None:
        dated = dated.replace(tzinfo=_dt.timezone.utc)
    if dated > _dt.datetime.now(_dt.timezone.utc) + _dt.timedelta(days=1):
        return f"dated in the future ({record['date']})"
    return None


@dataclass
class ResultsTable:
    """Records read from one or more folders, with the problems met on the way."""

    records: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def select(self, **criteria: Any) -> list[dict[str, Any]]:
        """The records whose top-level fields equal ``criteria`` (e.g. ``task="cifar10"``)."""
        return [r for r in self.records if all(r.get(k) == v for k, v in criteria.items())]

    def __len__(self) -> int:
        return len(self.records)


def load_results(folders: Iterable[Path] | None = None, task: str | None = None) -> ResultsTable:
    """Read every ``*.jsonl`` record of ``folders`` (default: this build's, then the curated).

    A line that is not a valid record is reported (a :class:`CorruptRecordWarning`
    naming file and line, also kept in ``problems``) and skipped; it never stops
    the caller. Each record gains a ``source`` field naming its file.
    """
    table = ResultsTable()
    chosen = list(folders) if folders is not None else [build_results_dir(), curated_results_dir()]
    for folder in chosen:
        pattern = f"{task}.jsonl" if task else "*.jsonl"
        for path in sorted(Path(folder).glob(pattern)):
            with open(path, encoding="utf-8", errors="replace") as handle:
                for number, line in enumerate(handle, start=1):
                    if not line.strip():
                        continue
                    try:
                        record = json.loads(line)
                        problem = _check_record(record)
                    except json.JSONDecodeError as error:
                        problem = f"not JSON ({error.msg})"
                    if problem:
                        message = f"{path}:{number}: skipped a corrupt results record: {problem}"
                        table.problems.append(message)
                        warnings.warn(message, CorruptRecordWarning, stacklevel=2)
                        continue
                    record["source"] = str(path)
                    record["source_line"] = number
                    table.records.append(record)
    return table


def standing(record: Mapping[str, Any]) -> str:
    """``""`` for a record whose verdicts held, which may be shown as a result; else why
    it may not, naming its file and line: no verdicts, a run that did not complete, or
    the verdicts that failed."""
    where = f" ({record.get('source', 'unsaved')}:{record.get('source_line', '?')})"
    if record.get("held") is True:
        return ""
    verdicts = record.get("verdicts")
    if not isinstance(verdicts, Mapping) or not verdicts:
        return "no verdicts" + where
    texts = [str(value) for value in verdicts.values() if isinstance(value, str)]
    incomplete = [text for text in texts if text.startswith("not run")]
    if incomplete:
        return "incomplete run: " + incomplete[0] + where
    failing = [text for text in texts if text.startswith("FAILED")]
    for check, items in verdicts.items():
        if isinstance(items, Mapping):
            failing += [f"{check}: {item}: {text}" for item, text in items.items()
                        if "DIFFERS" in str(text) or "FAILED" in str(text)]
    return "failed verdicts: " + ("; ".join(failing[:2]) or "not all held") + where
