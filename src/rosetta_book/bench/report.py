"""The benchmark's report: each configuration's speed, page / fastest, shares of the peak.

:func:`summarize` turns a run's raw seconds (:func:`rosetta_book.bench.run.run_task`)
into the report that the command prints (:func:`format_report`) and writes as
JSON (``--json``). The peak is the fastest float32 matrix product of the same run, across numpy and
every framework's paths, each timed in the same rounds as the configurations
(medians on both sides, so that a machine's load weighs on both alike; a run
that times the frameworks in turn times the products in every turn).
"""

from __future__ import annotations

import statistics
from typing import Any, Mapping

from rosetta_proof.record_tables import why_below_peak, why_page_stops
from rosetta_utils.timing import Timing, faster

from .tasks import resolve_task

#: Target: the page's configuration within this factor of its framework's fastest.
TARGET_RATIO = 1.10
#: ResNet-50's targets, shares of the peak at the page's batch.
RESNET50_TARGET = 0.75  # PyTorch, TensorFlow and JAX
RESNET50_LEADER_TARGET = 0.85  # the fastest framework
RESNET50_TARGETED = ("pytorch", "tensorflow", "jax")
REPORT_VERSION = 2


def _per_item(measured: Mapping[str, Any]) -> list[float]:
    """A configuration's timed calls as seconds per item (alternatives may time other batches)."""
    return [seconds / measured["items"] for seconds in measured["seconds"]]


def summarize(raw: Mapping[str, Any], profile: str) -> dict[str, Any]:
    """The report of one run (``raw``: what :func:`~rosetta_book.bench.run.run_task` returns)."""
    task = resolve_task(raw["task"])
    work = 2 * raw["matmul_size"] ** 3

    def product_rates(matmul_seconds: Mapping[str, list[float]]) -> dict[str, float]:
        return {path: work / statistics.median(values) for path, values in matmul_seconds.items() if values}

    rates = product_rates(raw["matmul_seconds"])
    peak_path = max(rates, key=rates.get)
    peak = rates[peak_path]
    counts = {framework: result["flops_per_item"] for framework, result in raw["frameworks"].items()}
    if len(set(counts.values())) > 1:
        raise ValueError(f"the {task.name} page's parts declare different model sizes: FLOP per item {counts}")
    per_item_flops = next(iter(counts.values()), 0) * (3 if task.training else 1)
    report: dict[str, Any] = {
        "version": REPORT_VERSION, "task": task.name, "page": task.page, "profile": profile,
        "training": task.training, "rounds": raw["rounds"], "warmup": raw["warmup"], "steps": raw["steps"],
        "started": raw["started"], "wall_seconds": raw["wall_seconds"], "load_average": raw["load_average"],
        "machine": raw.get("machine", {}),
        "peak_flops": peak, "peak_path": peak_path, "matmul_flops": rates,
        "matmul_frameworks": raw["matmul_frameworks"], "model_flops_per_item": per_item_flops,
        "target_ratio": TARGET_RATIO, "frameworks": {},
        # frameworks timed one after another: the turns, and why (the task's reason, or asked for)
        "in_turn": raw.get("in_turn"),
        "in_turn_why": (task.in_turn or "asked for with --in-turn") if raw.get("in_turn") else None,
    }
    for framework, result in raw["frameworks"].items():
        alternatives = task.alternatives[framework]
        # a framework timed in a turn of its own divides by the products timed in that turn
        own_rates = product_rates(result["matmul_seconds"]) if result.get("matmul_seconds") else rates
        own_path = max(own_rates, key=own_rates.get)
        own_peak = own_rates[own_path]
        configurations: dict[str, Any] = {}
        failed = {name: measured["failed"] for name, measured in result["alternatives"].items()
                  if "failed" in measured}
        for name, measured in result["alternatives"].items():
            if name in failed:
                continue
            per_call = statistics.median(measured["seconds"])
            lower, upper = Timing(tuple(measured["seconds"])).quartiles
            per_item = per_call / measured["items"]
            configurations[name] = {
                "median_seconds": per_call, "quartile_seconds": [lower, upper], "items": measured["items"],
                "seconds_per_item": per_item, "flops_per_second": per_item_flops / per_item,
                "fraction_of_peak": per_item_flops / per_item / own_peak,
                # the share at the slow and the fast end of the spread (upper, lower quartile of time)
                "fraction_of_peak_spread": [per_item_flops * measured["items"] / upper / own_peak,
                                            per_item_flops * measured["items"] / lower / own_peak],
                "options": _plain(alternatives[name].options),
                "env": measured["env"], "why": alternatives[name].why, "first_result": measured["first_result"],
                "build_seconds": measured["build_seconds"], "repeats": len(measured["seconds"]),
            }
        pages = [name for name, measured in result["alternatives"].items() if measured["defaults"]
                 and not measured["env"]]
        if pages and pages[0] in failed:
            raise ValueError(f"{task.page} ({framework}): the page's own configuration cannot run here: "
                             f"{failed[pages[0]]}")
        if not pages:
            raise ValueError(f"{task.page} ({framework}): the page's configuration (the builder's defaults) is "
                             f"not among the configurations timed ({', '.join(configurations)})")
        page = pages[0]
        for name, numbers in configurations.items():
            numbers["result_difference"] = _difference(numbers["first_result"], configurations[page]["first_result"])
        if configurations[page]["first_result"] is None:
            raise ValueError(f"{task.page} ({framework}): the page's configuration returned no result to "
                             "compare the others with (a loss, or an array of features)")
        if task.same_result is None:
            raise ValueError(f"task {task.name!r} states no bound on its configurations' results "
                             "(Task.same_result): its fastest could compute something else")
        tolerance = task.same_result
        other_results = sorted(name for name, numbers in configurations.items()
                               if numbers["result_difference"] is None
                               or numbers["result_difference"] > tolerance)
        # the fastest that computes what the page computes (another result is reported, not a target)
        fastest = min((name for name in configurations if name not in other_results),
                      key=lambda name: configurations[name]["seconds_per_item"])
        for name, numbers in configurations.items():
            numbers["relative_to_fastest"] = numbers["seconds_per_item"] / configurations[fastest]["seconds_per_item"]
            numbers["relative_to_page"] = numbers["seconds_per_item"] / configurations[page]["seconds_per_item"]
        ratio = configurations[page]["relative_to_fastest"]
        report["frameworks"][framework] = {
            "page_configuration": page, "fastest_configuration": fastest, "ratio": ratio,
            "meets_target": ratio <= TARGET_RATIO, "configurations": configurations,
            "fastest_clear_of_page": faster(_per_item(result["alternatives"][fastest]),
                                            _per_item(result["alternatives"][page])) == "first",
            "not_timed": {name: alternative.dropped for name, alternative in alternatives.items()
                          if alternative.dropped},
            "failed": failed,
            "other_results": other_results, "limit": task.limits.get(framework), "data": result["data"],
            "weights": result.get("weights", "not recorded"),
            "peak_flops": own_peak, "peak_path": own_path,
            "peak_timed": "in this framework's own turn" if result.get("matmul_seconds") else "in the same rounds",
        }
        above = [name for name, numbers in configurations.items() if numbers["flops_per_second"] > own_peak]
        if "convolutions" in result:
            convolutions = convolutions_alone_summary(result["convolutions"], configurations[page], per_item_flops,
                                                      own_peak)
            report["frameworks"][framework]["convolutions_alone"] = convolutions
            if convolutions.get("flops_per_second", 0.0) > own_peak:
                above.append("its convolutions alone")
        # a peak something measured above is no upper bound: no share of it is a verdict
        report["frameworks"][framework]["above_peak"] = above
    if report["frameworks"]:
        leader = min(report["frameworks"], key=lambda fw: _best(report, fw)["seconds_per_item"])
        report["fastest_framework"] = {
            "framework": leader, "configuration": report["frameworks"][leader]["fastest_configuration"],
            "fraction_of_peak": _best(report, leader)["fraction_of_peak"],
            "page_fraction_of_peak": _page(report, leader)["fraction_of_peak"],
        }
        if task.name == "resnet50":
            report["peak_targets"] = peak_targets(
                {fw: {"share": _page(report, fw)["fraction_of_peak"],
                      "spread": _page(report, fw)["fraction_of_peak_spread"],
                      "above_peak": report["frameworks"][fw]["above_peak"]} for fw in report["frameworks"]},
                leader)
    return report


def convolutions_alone_summary(measured: Mapping[str, Any], page: Mapping[str, Any], per_item_flops: float,
                       peak: float) -> dict[str, Any]:
    """The page's convolutions timed alone (``measured``: what the page's process reported)
    beside the page's configuration (``page``, its numbers in the report): their rate as a
    share of the peak, their share of the model's arithmetic and their time as a share of
    the page's on the same batch."""
    if "not_measured" in measured:
        return {"not_measured": measured["not_measured"]}
    if not measured["seconds"]:
        raise ValueError("the page's convolutions were built but never timed")
    median = statistics.median(measured["seconds"])
    rate = measured["flops"] / median
    page_seconds = page["seconds_per_item"] * measured["items"]
    return {
        "count": measured["count"], "items": measured["items"], "median_seconds": median,
        "quartile_seconds": list(Timing(tuple(measured["seconds"])).quartiles),
        "flops_per_second": rate, "fraction_of_peak": rate / peak,
        "share_of_model_flops": measured["flops"] / (per_item_flops * measured["items"]),
        "share_of_page_time": median / page_seconds,
    }


def _plain(options: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value if isinstance(value, (bool, int, float, str, type(None))) else repr(value)
            for key, value in options.items()}


def _difference(value: float | None, reference: float | None) -> float | None:
    if value is None or reference is None:
        return None
    return abs(value - reference) / max(abs(reference), 1e-12)


def _best(report: Mapping[str, Any], framework: str) -> Mapping[str, Any]:
    result = report["frameworks"][framework]
    return result["configurations"][result["fastest_configuration"]]


def _page(report: Mapping[str, Any], framework: str) -> Mapping[str, Any]:
    result = report["frameworks"][framework]
    return result["configurations"][result["page_configuration"]]


def peak_targets(page_shares: Mapping[str, Mapping[str, Any]], leader: str) -> dict[str, dict[str, Any]]:
    """ResNet-50's targets, given each framework's share of the peak at the page's
    configuration (``{"share": median, "spread": [slow end, fast end], "above_peak":
    [what measured above the peak]}``): the fastest framework 85%, PyTorch, TensorFlow
    and JAX 75% (MXNet, when it is not the fastest, and Chainer have none). A target is
    met (``meets`` True) only when the share at the slow end of the spread reaches it,
    missed (False) only when the share at the fast end falls short; between, and where
    something measured above the peak (which is then no upper bound), there is no
    verdict (None) and ``why`` says so."""
    targets = {}
    for framework, shares in page_shares.items():
        target = RESNET50_LEADER_TARGET if framework == leader else (
            RESNET50_TARGET if framework in RESNET50_TARGETED else None)
        slow, fast = shares["spread"]
        entry = {"share": shares["share"], "slow": slow, "fast": fast, "target": target, "meets": None, "why": ""}
        if target is None:
            entry["why"] = "no target"
        elif shares.get("above_peak"):
            entry["why"] = (f"no verdict: {', '.join(shares['above_peak'])} measured above the peak, which is "
                            "then no upper bound")
        elif slow >= target:
            entry["meets"] = True
        elif fast < target:
            entry["meets"] = False
        else:
            entry["why"] = f"inside the noise: {slow:.1%} to {fast:.1%} around {target:.0%}"
        targets[framework] = entry
    return targets


def format_report(report: Mapping[str, Any]) -> str:
    """The report as the command prints it."""
    load = report["load_average"]
    lines = [
        f"{report['task']}, {report['profile']} profile: {report['rounds']} rounds after {report['warmup']} "
        f"warm-up call(s), {report['steps']} step(s) per timed call; "
        + (f"frameworks one after another ({report['in_turn_why']}), each framework's configurations "
           "taking turns" if report.get("in_turn") else "configurations take turns")
        + f" (started {report['started']}, {report['wall_seconds']:.0f} s)",
        f"load average (1, 5, 15 min) before {load['before']}, after {load['after']}",
        f"peak: {report['peak_flops'] / 1e9:.1f} GFLOP/s ({report['peak_path']}), the fastest float32 "
        "matrix product, median of the same rounds: "
        + ", ".join(f"{name} {rate / 1e9:.1f}" for name, rate in report["matmul_flops"].items()),
    ]
    for framework, result in report["frameworks"].items():
        if result.get("peak_timed") == "in this framework's own turn":
            lines.append(f"{framework}: shares of the peak timed in its own turn, "
                         f"{result['peak_flops'] / 1e9:.1f} GFLOP/s ({result['peak_path']})")
        if result.get("above_peak"):
            lines.append(f"{framework}: {', '.join(result['above_peak'])} measured above its peak, which is then "
                         "no upper bound: its shares of the peak are no verdict")
    width = max([28] + [len(name) + 2 for result in report["frameworks"].values()
                        for name in [*result["configurations"], *result["not_timed"], *result.get("failed", {})]])
    unit = "ms/step" if report["training"] else "ms/call"
    lines.append(f"{'framework':<11} {'configuration':<{width}} {unit:>9} {'IQR':>7} {'GFLOP/s':>8} "
                 f"{'of peak':>8} {'/fastest':>8}  what it tries")
    for framework, result in report["frameworks"].items():
        ordered = sorted(result["configurations"].items(), key=lambda item: item[1]["seconds_per_item"])
        for name, numbers in ordered:
            marker = " *" if name == result["page_configuration"] else ""
            steps = numbers["items"] / (report["steps"] if report["training"] else 1)
            scale = 1e3 * steps / numbers["items"]  # per step (training) or per call
            lower, upper = numbers["quartile_seconds"]
            note = numbers["why"]
            if name in result["other_results"]:
                differs = (f"first result differs by {numbers['result_difference']:.1e}"
                           if numbers["result_difference"] is not None else "no result to compare")
                note = f"OTHER RESULT ({differs}); {note}"
            lines.append(
                f"{framework:<11} {name + marker:<{width}} {numbers['median_seconds'] * scale:>9.1f} "
                f"{(upper - lower) * scale:>7.1f} {numbers['flops_per_second'] / 1e9:>8.1f} "
                f"{numbers['fraction_of_peak']:>8.1%} {numbers['relative_to_fastest']:>8.2f}  {note}")
        for name, reason in result["not_timed"].items():
            lines.append(f"{framework:<11} {name:<{width}} {'not timed':>9}  {reason}")
        for name, message in result.get("failed", {}).items():
            lines.append(f"{framework:<11} {name:<{width}} {'FAILED':>9}  cannot run on this machine: {message}")
        convolutions = result.get("convolutions_alone")
        if convolutions and "not_measured" in convolutions:
            lines.append(f"{framework:<11} the page's convolutions alone: not measured ("
                         f"{convolutions['not_measured']})")
        elif convolutions:
            lower, upper = convolutions["quartile_seconds"]
            lines.append(
                f"{framework:<11} the page's {convolutions['count']} convolutions alone, one call each on the "
                f"page's batch: {convolutions['median_seconds'] * 1e3:.1f} ms (IQR {(upper - lower) * 1e3:.1f}), "
                f"{convolutions['flops_per_second'] / 1e9:.1f} GFLOP/s, {convolutions['fraction_of_peak']:.1%} "
                f"of peak, in {convolutions['share_of_page_time']:.0%} of the page's time (their FLOP: "
                f"{convolutions['share_of_model_flops']:.1%} of the model's count)")
    lines.append(f"* the page's configuration; target: within {report['target_ratio']:.2f}x of its framework's "
                 "fastest")
    for framework, result in report["frameworks"].items():
        verdict = "meets" if result["meets_target"] else "MISSES"
        line = (f"{framework}: page / fastest = {result['ratio']:.2f} ({verdict} the target; page: "
                f"{result['page_configuration']}; fastest: {result['fastest_configuration']})")
        if result["page_configuration"] != result["fastest_configuration"]:
            line += ("; the fastest is clear of the page's spread (IQRs apart)" if result["fastest_clear_of_page"]
                     else "; the difference lies inside the spread (the IQRs overlap)")
        if not result["meets_target"]:
            line += f"; why: {why_page_stops(result, report['target_ratio'])}"
        lines.append(line)
    leader = report.get("fastest_framework")
    if leader:
        lines.append(f"fastest framework: {leader['framework']} ({leader['configuration']}), "
                     f"{leader['fraction_of_peak']:.1%} of peak")
    for framework, target in report.get("peak_targets", {}).items():
        verdict = (target["why"] or "no target" if target["meets"] is None
                   else f"{'meets' if target['meets'] else 'MISSES'} {target['target']:.0%}")
        spread = f" ({target['slow']:.1%} to {target['fast']:.1%} over the spread)" if "slow" in target else ""
        line = (f"{framework}: the page's configuration at the page's batch reaches {target['share']:.1%} "
                f"of peak{spread} ({verdict})")
        if target["meets"] is False:
            line += f"; why: {why_below_peak(report, framework, target)}"
        lines.append(line)
    return "\n".join(lines)
