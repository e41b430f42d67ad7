"""What the site says of the build that made it, as text.

Plain functions of what the execution recorded (each part's seconds, cache
use and environment, see :mod:`rosetta_book.build_cache`) and of what pages
declare in their front matter: the line under every title, where each
framework's part of a page ran, the rows of the execution table, a
comparison cell's caption. The Sphinx adapter puts them into the pages.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from rosetta_utils import FRAMEWORK_TITLES, FRAMEWORKS

Parts = Mapping[str, Mapping[str, Any]]  # part name -> what the build recorded of it


def front_matter_list(value: Any) -> list[str]:
    """A front-matter list, which Sphinx's docinfo may hold as its YAML text (``'["a", "b"]'``)."""
    if isinstance(value, str):
        import yaml

        value = yaml.safe_load(value) if value.strip().startswith("[") else [value]
    return [str(item) for item in value]


def banner_text(profile: str, stand_in_pages: list[str], devices: dict[str, list[str]],
                facts: Iterable[str] = (), test_build: bool = False) -> str:
    """One line: the profile (and whether this is the test build, whose parts shared the
    machine), the data, the facts pages declare of their build (front matter
    ``build_facts``, e.g. ResNet-50's weights), where each framework ran."""
    if stand_in_pages:
        data = (f"synthetic stand-ins, not the real data sets ({len(stand_in_pages)} "
                f"page{'s' if len(stand_in_pages) != 1 else ''}: no verified download was cached)")
    else:
        data = "the real data sets (verified downloads)"
    ran = "; ".join(f"{FRAMEWORK_TITLES[name]} on {', '.join(sorted(set(found)))}"
                    for name, found in devices.items()) or "no framework part executed"
    declared = "".join(f"; {fact}" for fact in facts)
    shared = (" (the test build: its parts ran side by side on a shared machine, so its times are "
              "not measurements)") if test_build else ""
    return f"This build: {profile} profile{shared}; data: {data}{declared}; ran: {ran}."


def devices_by_framework(pages: Mapping[str, Parts]) -> dict[str, list[str]]:
    """Every device each framework's parts ran on, over all pages, in the book's order."""
    devices: dict[str, list[str]] = {}
    for parts in pages.values():
        for name, part in parts.items():
            device = (part.get("environment") or {}).get("device")
            if name in FRAMEWORKS and device and not device.startswith("not checked"):
                devices.setdefault(name, []).append(device)
    return {name: devices[name] for name in FRAMEWORKS if name in devices}


def where_it_ran(part: Mapping[str, Any] | None, title: str) -> str:
    """The sentence beside a part's download: versions, threads, device, seconds."""
    if not part:
        return f" This build did not execute the {title} part."
    env = part.get("environment") or {}
    versions = ", ".join(f"{name} {version}" for name, version in env.get("versions", {}).items())
    cached = ", from the execution cache" if part.get("cached") else ""
    device = env.get("device", "an unknown device")
    details = f"{versions}; {env.get('threads', '?')} threads"
    if device.startswith("not checked"):  # the part made no array to read a device from
        return (f" This build ran it ({details}; it made no {title.split()[0].lower()} array, so no "
                f"device to report) in {part.get('seconds', 0):.0f} s{cached}.")
    return f" This build ran it on {device} ({details}) in {part.get('seconds', 0):.0f} s{cached}."


EXECUTION_HEADERS = ["page", "part", "seconds", "from the cache", "verdicts gated"]


def execution_rows(pages: Mapping[str, Parts]) -> list[list[str]]:
    """The execution table: seconds per page and part (and the verdicts its comparisons
    gated), and each page's total."""
    rows = []
    for page, parts in sorted(pages.items()):
        for name, part in parts.items():
            verdicts = part.get("verdicts")
            rows.append([page, name, f"{part.get('seconds', 0):.1f}", "yes" if part.get("cached") else "no",
                         "" if verdicts is None else str(verdicts)])
        if parts:
            total = sum(part.get("seconds", 0) for part in parts.values())
            rows.append([page, "all parts, their seconds added (parts may run side by side)",
                         f"{total:.1f}", "", ""])
    return rows


def gated_verdicts(pages: Mapping[str, Parts]) -> dict[str, int]:
    """Per page whose comparisons gate anything, how many verdicts they gated."""
    counts = {page: sum(part.get("verdicts") or 0 for part in parts.values()) for page, parts in pages.items()}
    return {page: count for page, count in sorted(counts.items()) if count}


def gated_line(pages: Mapping[str, Parts]) -> str:
    """``"N verdicts gated on M pages"``: what this build checked and would have stopped on."""
    counts = gated_verdicts(pages)
    return f"{sum(counts.values())} verdicts gated on {len(counts)} pages"


def comparison_caption(code: str) -> str:
    """A comparison cell's caption: its first line if that is a comment, else a general one."""
    first = code.strip().splitlines()[0] if code.strip() else ""
    if first.startswith("#"):
        return first.lstrip("#").strip()
    return "Comparison across the frameworks (reads what each part left; in no download)"
