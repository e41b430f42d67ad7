"""The results page's rows: each task and framework's latest records, labelled.

:func:`results_rows` reads records (:func:`rosetta_proof.records.load_results`)
and keeps, per task, framework, device, profile and source (this build's or
curated), the newest one, with its headline numbers: a time (seconds per
epoch, or per 1,000 images), a rate (images, reviews or sequences per second)
and the test accuracy where the task has one. A record from another profile
than this build's, or from another commit, is labelled so.

:func:`gpu_lesson_rows` lays out a GPU lesson's records (``lesson-autotuning``,
``lesson-precision``, ``lesson-layouts``, ``lesson-fused-rnn``, appended by the
device check) for a lessons page: GPU records only, the newest per framework,
device and configuration, labelled the same way.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from rosetta_utils import FRAMEWORKS
from .tasks import TASK_REGISTRY
from .records import standing

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
    standing: str = ""  # why it is no result (rosetta_proof.records.standing), "" if it is
    data: str = "-"  # the data its numbers rest on (a stand-in says so)
    weights: str = "-"  # the weights they rest on (stand-in, pretrained, trained here)

    def cells(self) -> list[Any]:
        """The row of :data:`HEADERS`: what was measured, where, on what, and from which run."""
        where = f"{self.device}; {self.profile} profile; {self.source}"
        run = f"{self.date[:10]}, commit {self.commit}"
        data = f"data: {self.data}; weights: {self.weights}"
        if self.standing:  # its numbers are not shown: its verdicts did not hold
            return [self.task, self.framework, where, "-", data, f"{run}: not a result: {self.standing}"]
        measured = [f"{self.time[1]:.3g} ({self.time[0].replace('_', ' ')})" if self.time else "",
                    f"{self.rate[1]:,.1f} ({self.rate[0].replace('_', ' ')})" if self.rate else "",
                    f"test accuracy {self.accuracy:.4f}" if self.accuracy is not None else ""]
        return [self.task, self.framework, where, "; ".join(m for m in measured if m) or "-", data,
                f"{run}: {self.label or 'current'}"]


HEADERS = ["task", "framework", "where: device, profile, source", "measured: time, rate, test accuracy",
           "data and weights", "run: date, commit, label"]


def _first(metrics: dict[str, Any], names: Iterable[str]) -> tuple[str, float] | None:
    for name in names:
        value = metrics.get(name)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return name, float(value)
    return None


def _base_commit(commit: str) -> str:
    return str(commit).split("+", 1)[0]


def label_of(record: dict[str, Any], profile: str, commit: str) -> str:
    """Why a record is not this build's measurement: the test build's (its times are not
    measurements), another profile, another commit."""
    reasons = ["test build: shared machine, not a measurement"] if record.get("test_build") else []
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
            label_of(record, profile, commit), standing(record), *_sources(record)))
    return rows


def _sources(record: dict[str, Any]) -> tuple[str, str]:
    """The data and the weights a record's numbers rest on, as its config names them."""
    config = record.get("config") if isinstance(record.get("config"), dict) else {}
    return str(config.get("data") or "-"), str(config.get("weights") or "-")


#: The first cell of the one row a GPU lesson table has before any GPU measured it.
NOT_MEASURED_ON_A_GPU = "not measured on a GPU yet"


def recorded_on_a_gpu(device: Any) -> bool:
    """Whether a record's ``device`` names a GPU: not ``"cpu"`` (a dry run on a CPU), and
    not a part that made no array ("not checked ...")."""
    text = str(device or "").strip().lower()
    return bool(text) and not text.startswith(("cpu", "not checked"))


def _versions_cell(versions: Any) -> str:
    if isinstance(versions, dict):
        return ", ".join(f"{name} {version}" for name, version in versions.items()) or "-"
    return str(versions) if versions else "-"


def _cell(values: Any, name: str) -> Any:
    """``values[name]``, or ``"-"`` when the record has no such key."""
    if isinstance(values, dict) and name in values and values[name] is not None:
        return values[name]
    return "-"


def gpu_lesson_rows(task: str, config: Iterable[str], metrics: Iterable[str],
                    folders: Iterable[Path] | None = None) -> tuple[list[str], list[list[Any]]]:
    """A GPU lesson's table: ``(headers, rows)`` for :func:`rosetta_proof.tables.show_table`.

    Reads the records of ``task`` (e.g. ``"lesson-autotuning"``) from this build's and the
    curated folders (:func:`rosetta_proof.records.load_results`; ``folders`` overrides them,
    for tests), keeps those measured on a GPU (a dry run's ``"cpu"`` records never show),
    and the newest per framework, device and config. The headers are ``framework``,
    ``device``, the ``config`` keys, the ``metrics``, ``versions``, ``date`` and ``label``
    (:func:`label_of`: another profile, an older commit; else ``"current"``). A key a record
    lacks shows ``"-"``; corrupt lines are skipped with the loader's warning. Without any
    GPU record there is one row, ``"not measured on a GPU yet"`` followed by ``"-"``.
    """
    from rosetta_utils.run_profile import current_profile
    from .records import git_commit, load_results

    config, metrics = list(config), list(metrics)
    headers = ["framework", "device", *config, *metrics, "versions", "date", "label"]
    table = load_results(folders, task=task)
    newest: dict[tuple[str, str, str], dict[str, Any]] = {}
    for record in table.records:
        if record.get("task") != task or not recorded_on_a_gpu(record.get("device")):
            continue
        settings = record.get("config") if isinstance(record.get("config"), dict) else {}
        key = (str(record["framework"]), str(record["device"]),
               json.dumps(settings, sort_keys=True, default=str))
        if key not in newest or str(record["date"]) > str(newest[key]["date"]):
            newest[key] = record
    if not newest:
        return headers, [[NOT_MEASURED_ON_A_GPU] + ["-"] * (len(headers) - 1)]
    profile, commit = current_profile(), git_commit()
    order = {name: index for index, name in enumerate(FRAMEWORKS)}
    rows = []
    for (framework, device, _), record in sorted(
            newest.items(), key=lambda item: order.get(item[0][0], len(order))):  # stable: file order within
        why_not = standing(record)  # a record whose verdicts did not hold shows no numbers
        rows.append([framework, device,
                     *(_cell(record.get("config"), name) for name in config),
                     *("-" if why_not else _cell(record["metrics"], name) for name in metrics),
                     _versions_cell(record.get("versions")), str(record["date"])[:10],
                     f"not a result: {why_not}" if why_not else label_of(record, profile, commit) or "current"])
    return headers, rows


def results_only(headers: Iterable[str], rows: Iterable[list[Any]]) -> list[list[Any]]:
    """The rows of :func:`gpu_lesson_rows` whose numbers are results: neither the "not
    measured" row nor a record whose verdicts did not hold (shown, but not a result)."""
    label = list(headers).index("label")
    return [row for row in rows
            if row[0] != NOT_MEASURED_ON_A_GPU and not str(row[label]).startswith("not a result")]


#: The unit of each task's rate, as the results overview names it (the task registry's).
RATE_UNITS = {name: task.unit for name, task in TASK_REGISTRY.items()}


def _rate_cell(row: ResultRow | None) -> str:
    """A rate, then where it was measured: device, profile, date ("80.0 (cpu, smoke,
    2026-11-30)"); for a record whose verdicts did not hold, no rate but why; "-" for none."""
    if row is not None and row.standing:
        return f"not a result ({row.device}, {row.date[:10]}: {row.standing})"
    if row is None or row.rate is None:
        return "-"
    where = f"{row.device}, {row.profile}, {row.date[:10]}"
    if row.label:
        where += f" ({row.label})"
    return f"{row.rate[1]:,.1f} ({where})"


def rate_of(cell: str) -> float:
    """The rate a :func:`task_overview` cell shows, as a number; 0 where it shows none
    ("-", or a record whose verdicts did not hold)."""
    first = str(cell).split(" ")[0].replace(",", "")
    return float(first) if first[:1].isdigit() else 0.0


def task_overview(task: str, rows: Iterable[ResultRow], published: Any = None) -> tuple[list[str], list[list[Any]]]:
    """One task's overview table: per framework (the book's order), the reference's K80 and
    P100 rates (``published``: its :class:`~rosetta_proof.reference.PublishedTimes`, or
    ``None`` where it published none), this build's newest rate, and the newest curated
    record measured on a GPU, each rate with its device, profile and date in its own cell
    (five columns: the table fits the text column). ``rows`` are :func:`results_rows`'s;
    a framework with nothing anywhere shows ``"-"``."""
    unit = RATE_UNITS.get(task, "items/s")
    headers = ["framework", f"K80, 2018 ({unit})", f"P100, 2018 ({unit})", f"this build ({unit})",
               f"GPU record ({unit})"]
    build: dict[str, ResultRow] = {}
    gpu: dict[str, ResultRow] = {}
    for row in rows:
        if row.task != task or (row.rate is None and not row.standing):
            continue
        if row.source == "this build":
            chosen = build
        elif row.source == "curated" and recorded_on_a_gpu(row.device):
            chosen = gpu
        else:
            continue
        if row.framework not in chosen or row.date > chosen[row.framework].date:
            chosen[row.framework] = row
    table = []
    for framework in FRAMEWORKS:
        k80, p100 = published.items_per_second(framework) if published is not None else (None, None)
        table.append([framework, f"{k80:,.1f}" if k80 else "-", f"{p100:,.1f}" if p100 else "-",
                      _rate_cell(build.get(framework)), _rate_cell(gpu.get(framework))])
    return headers, table


#: Where benchmark reports live: ``bench-<task>.json``, written by
#: ``python -m rosetta_book.bench <task>`` (into this build's results folder by default).
BENCH_PATTERN = "bench-*.json"
BENCH_HEADERS = ["task", "framework", "configurations: the page's; the fastest found", "page / fastest (target)",
                 "share of peak: the page's; the fastest's", "measured"]

class CorruptBenchReportWarning(UserWarning):
    """A benchmark report that cannot be read: skipped, the file left as it was."""


def load_bench_reports(folders: Iterable[Path]) -> list[dict[str, Any]]:
    """The newest readable benchmark report per task among ``folders`` (each report's
    ``_file`` says where it came from). A file that is not a report is skipped with a
    :class:`CorruptBenchReportWarning` naming it."""
    import warnings

    newest: dict[str, dict[str, Any]] = {}
    for folder in folders:
        for path in sorted(Path(folder).glob(BENCH_PATTERN)) if Path(folder).is_dir() else []:
            try:
                report = json.loads(path.read_text())
                task, started, frameworks = report["task"], str(report["started"]), report["frameworks"]
                if not isinstance(frameworks, dict):
                    raise TypeError("'frameworks' is not a mapping")
            except (OSError, ValueError, KeyError, TypeError) as error:
                warnings.warn(f"{path}: not a benchmark report ({type(error).__name__}: {error}); skipped",
                              CorruptBenchReportWarning, stacklevel=2)
                continue
            if task not in newest or started > str(newest[task]["started"]):
                newest[task] = {**report, "_file": str(path)}
    return [newest[task] for task in sorted(newest)]


def _share(result: dict[str, Any], configuration: dict[str, Any]) -> str:
    """A configuration's share of the peak; no verdict where something measured above the
    peak, which is then no upper bound (the report's ``above_peak``)."""
    if result.get("above_peak"):
        return f"no verdict ({', '.join(result['above_peak'])} above the peak)"
    return f"{configuration['fraction_of_peak']:.1%}"


def _bench_parts(report: dict[str, Any]) -> list[dict[str, str]]:
    """Per framework of a report: its configurations, their ratio against the target, both
    shares of the peak, and where and when it was measured, each as a table shows it."""
    load = report.get("load_average", {}).get("before") or ["?"]
    where = (f"{str(report['started'])[:16]}, {report.get('profile', '?')} profile, load {load[0]}, "
             f"{report.get('rounds', '?')} rounds")
    parts = []
    for framework, result in report["frameworks"].items():
        page = result["configurations"][result["page_configuration"]]
        fastest = result["configurations"][result["fastest_configuration"]]
        spread = ("" if result["page_configuration"] == result["fastest_configuration"]
                  or "fastest_clear_of_page" not in result
                  else ", beyond the spread" if result["fastest_clear_of_page"] else ", inside the spread")
        parts.append({"task": report["task"], "framework": framework, "page": result["page_configuration"],
                      "fastest": result["fastest_configuration"], "ratio": f"{result['ratio']:.2f}{spread}",
                      "target": f"{report['target_ratio']:.2f} ({'met' if result['meets_target'] else 'MISSED'})",
                      "page share": _share(result, page), "fastest share": _share(result, fastest),
                      "where": where})
    return parts


def bench_rows(reports: Iterable[dict[str, Any]]) -> list[list[Any]]:
    """The Results page's rows: per task and framework of each report, the page's
    configuration and the fastest the benchmark found, their ratio against the report's
    target, both shares of the peak, and where and when it was measured (profile, the
    machine's load average before), in six columns that fit the text column."""
    return [[part["task"], part["framework"], f"{part['page']}; {part['fastest']}",
             f"{part['ratio']} (target {part['target']})",
             part["page share"] if part["page share"] == part["fastest share"]
             else f"{part['page share']}; {part['fastest share']}", part["where"]]
            for report in reports for part in _bench_parts(report)]


#: The columns of a task page's benchmark table (:func:`task_bench_table`).
TASK_BENCH_HEADERS = ["framework", "page's configuration", "fastest found", "page / fastest", "target",
                      "page: share of peak", "fastest: share of peak", "why the page stops there"]


def describe_bench_report(report: dict[str, Any], curated: Path) -> str:
    """Where, when and how a report was measured, for the line above its table, and whether
    it is a curated one (read from ``curated``, the committed results) or this build's."""
    machine = report.get("machine") or {}
    where = (f"{machine.get('cpu', 'an unnamed CPU')}, {machine.get('cores', '?')} cores"
             if machine else "a machine the report does not name")
    load = (report.get("load_average") or {}).get("before") or ["?"]
    from_curated = Path(report.get("_file", "")).parent.resolve() == Path(curated).resolve()
    source = "a curated report, committed under results/" if from_curated else "this build's report"
    order = (f", frameworks timed one after another ({report['in_turn_why']})" if report.get("in_turn")
             else ", every configuration taking turns")
    results = list(report.get("frameworks", {}).values())
    data = "; ".join(sorted({str(result.get("data", "not recorded")) for result in results})) or "not recorded"
    weights = "; ".join(sorted({str(result.get("weights", "not recorded")) for result in results})) or "not recorded"
    return (f"benchmark run of {str(report['started'])[:16]} on {where}, {report.get('profile', '?')} profile, "
            f"{report.get('rounds', '?')} rounds{order}, load average {load[0]} before it ({source}); "
            f"data: {data}; weights: {weights}")


def _same_result(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """A framework's configurations that compute the page's result (the benchmark's search)."""
    return {name: numbers for name, numbers in result["configurations"].items()
            if name not in result.get("other_results", [])}


#: The benchmark's name for the page's configuration timed again in a process of its own.
SECOND_PROCESS = "the page's configuration, second process"


def why_page_stops(result: dict[str, Any], target_ratio: float) -> str:
    """Why a framework's page configuration misses the page / fastest target
    (``target_ratio``): when the fastest runs in a process of its own and is no further
    from the page than the page's configuration in a second process (:data:`SECOND_PROCESS`)
    is, that the difference is the processes', not a setting's; when the page is within the
    target among the configurations on the task's batch size, and only another batch size
    is faster, that; else the reason the benchmark's task records (its ``limit``). "-"
    where it meets the target, "not established" where no reason is known."""
    if result["meets_target"]:
        return "-"
    same = _same_result(result)
    page = same[result["page_configuration"]]
    fastest = result["fastest_configuration"]
    second = same.get(SECOND_PROCESS)
    if second is not None and same[fastest].get("env"):
        spread = (max(page["seconds_per_item"], second["seconds_per_item"])
                  / min(page["seconds_per_item"], second["seconds_per_item"]))
        if result["ratio"] <= spread:
            return (f"two processes running the page's configuration differ by {spread:.2f}x, as much as the "
                    f"page and the fastest ({fastest}, in a process of its own) do: a process's difference, "
                    "not a setting's")
    at_batch = {name: numbers for name, numbers in same.items() if numbers["items"] == page["items"]}
    best = min(at_batch, key=lambda name: at_batch[name]["seconds_per_item"])
    ratio = page["seconds_per_item"] / at_batch[best]["seconds_per_item"]
    if ratio <= target_ratio:
        return (f"faster only on another batch size ({fastest}: {same[fastest]['items']} a call); the page "
                f"keeps the task's batch of {page['items']}, at which it is {ratio:.2f}x the fastest "
                f"({best})")
    return result.get("limit") or "not established"


#: The columns of :func:`missed_targets`.
MISSED_TARGETS_HEADERS = ["task", "framework", "target", "page", "tried: the best", "why it stops there"]


def why_below_peak(report: dict[str, Any], framework: str, target: dict[str, Any]) -> str:
    """Why a page's configuration stays below its share-of-peak target, from what the
    report measured: the framework's own fastest matrix product, and the best of the
    configurations the search tried."""
    owners = report.get("matmul_frameworks", {})  # which framework's process timed each product
    rates = {path: rate for path, rate in report.get("matmul_flops", {}).items() if owners.get(path) == framework}
    if not rates:
        return "the report has no matrix product of this framework to compare with"
    path = max(rates, key=rates.get)
    own = rates[path] / report["peak_flops"]
    if own < target["target"] and target["share"] <= own:
        return (f"its own fastest float32 matrix product ({path}) reaches {own:.1%} of the peak, below "
                f"the target itself; the page runs at {target['share'] / own:.0%} of that product's rate")
    convolutions = report["frameworks"].get(framework, {}).get("convolutions_alone") or {}
    if "fraction_of_peak" in convolutions:
        return _why_convolutions(convolutions, target)
    if own < target["target"]:
        return (f"its own matrix product ({path}) reaches {own:.1%} of the peak, less than the network "
                "itself, whose convolutions do not go through it; what holds them below the target is not "
                "measured here")
    return (f"its own matrix product ({path}) reaches {own:.1%} of the peak, so the product does not stop "
            "it; what does (the layers between the products, the convolutions' own kernels) is not "
            "measured here")


def _why_convolutions(convolutions: dict[str, Any], target: dict[str, Any]) -> str:
    """Why, from the page's convolutions timed alone (the benchmark's probe): no cause shown
    when one call each is slower than the page's whole network; else their kernels, when
    they alone stay below the target; else the layers between them."""
    rate, time_share = convolutions["fraction_of_peak"], convolutions["share_of_page_time"]
    alone = (f"its {convolutions['count']} convolutions, timed alone on the page's batch (one call each), "
             f"reach {rate:.1%} of the peak")
    if time_share >= 1:  # one call each is slower than the page's whole network: it shows no cause
        return (f"{alone}, yet alone they took {time_share:.0%} of the page's time: the page runs them faster "
                f"together, so one call each does not show what holds it at {target['share']:.1%}")
    rest = f"the layers between them take the other {1 - time_share:.0%} of the page's time"
    if rate < target["target"]:
        return f"{alone}, below the target: its convolution kernels hold it there ({rest})"
    return (f"{alone}, above the target, but {rest} (batch norm, activations, additions, pooling), which "
            f"holds the page at {target['share']:.1%}")


def missed_targets(reports: Iterable[dict[str, Any]]) -> list[list[Any]]:
    """One row per target a page's configuration misses in each benchmark report (page /
    fastest, and ResNet-50's shares of the peak): the target, the page's measure, the best
    the benchmark's search reached among the configurations that compute the page's
    result, and why the page stops there, from what the report measured (or the reason
    its task records)."""
    rows = []
    for report in reports:
        for framework, result in report["frameworks"].items():
            same = _same_result(result)
            tried = f"{len(same)} configurations"
            if not result["meets_target"]:
                fastest = result["fastest_configuration"]
                rows.append([report["task"], framework, f"page / fastest <= {report['target_ratio']:.2f}",
                             f"{result['ratio']:.2f}", f"{tried}: {fastest}",
                             why_page_stops(result, report["target_ratio"])])
            target = report.get("peak_targets", {}).get(framework)
            if target and target["meets"] is False:
                best = max(same, key=lambda name: same[name]["fraction_of_peak"])
                rows.append([report["task"], framework, f"{target['target']:.0%} of peak",
                             f"{target['share']:.1%}", f"{tried}: {best}, {same[best]['fraction_of_peak']:.1%}",
                             why_below_peak(report, framework, target)])
    return rows


def task_bench_table(task: str, build: Path, curated: Path) -> tuple[str, list[str], list[list[Any]]]:
    """For a task page's Timing section: a line saying which benchmark report the table
    comes from, and the table (one row per framework: the page's configuration, the
    fastest found, their ratio against the target, both shares of the peak): the newest
    report among this build's results (``build``) and the curated ones (``curated``).
    Without a report for ``task``, the line says so and how to make one, and the table is
    empty."""
    reports = [report for report in load_bench_reports([build, curated]) if report["task"] == task]
    if not reports:
        return (f"No benchmark report for {task} in this build's results or in results/: "
                f"`python -m rosetta_book.bench {task}` (or `make bench`) writes one, which the "
                "next build shows here.", TASK_BENCH_HEADERS, [])
    (report,) = reports
    rows = [[part["framework"], part["page"], part["fastest"], part["ratio"], part["target"], part["page share"],
             part["fastest share"], why_page_stops(report["frameworks"][part["framework"]], report["target_ratio"])]
            for part in _bench_parts(report)]
    return describe_bench_report(report, curated), TASK_BENCH_HEADERS, rows


#: The columns of :func:`bench_moves`.
BENCH_MOVES_HEADERS = ["task", "framework", "page's configuration", "helped most", "page / it",
                       "hurt most", "it / page"]


def bench_moves(reports: Iterable[dict[str, Any]]) -> list[list[Any]]:
    """Which setting moved each framework most in each benchmark report: the one that ran
    fastest against the page's configuration (the page's time divided by its; "-" when
    none beat the page) and the one that ran slowest (its time divided by the page's),
    per item and among the settings that compute the page's result."""
    rows = []
    for report in reports:
        for framework, result in report["frameworks"].items():
            page = result["page_configuration"]
            same = {name: numbers for name, numbers in result["configurations"].items()
                    if name != page and name not in result.get("other_results", [])}
            if not same:
                continue
            per_item = result["configurations"][page]["seconds_per_item"]
            best = min(same, key=lambda name: same[name]["seconds_per_item"])
            worst = max(same, key=lambda name: same[name]["seconds_per_item"])
            gain = per_item / same[best]["seconds_per_item"]
            rows.append([report["task"], framework, page, best if gain > 1 else "-",
                         f"{gain:.2f}" if gain > 1 else "-", worst,
                         f"{same[worst]['seconds_per_item'] / per_item:.2f}"])
    return rows
