"""The build's page cache: a page's merged outputs, reused while its code is unchanged.

MyST-NB renders a page from jupyter-cache, where :func:`outputs_for` puts the
page's merged outputs: taken from the cache when an earlier build executed
the same code under the same conditions, else executed part by part
(:func:`rosetta_book.page_execution.execute_page`, whose framework parts have
a cache of their own) and stored. Each profile, framework selection and set of
helpers has its own cache folder (:func:`cache_folder`); older folders of the
same profile and selection are removed, since nothing can use them again.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

from .machine_slots import Slots, slot_count
from .page import Page
from .page_execution import CACHE_LOCK, execute_page, execution_cache_name


@dataclass(frozen=True)
class PageOutputs:
    """What the build line and the execution table need of one page's execution:
    per part, its seconds, whether it came from the cache, and where it ran."""

    parts: dict[str, dict[str, Any]]
    rests_on_stand_ins: bool


def cache_folder(base: str | Path) -> Path:
    """This build's cache folder under ``base`` (named by :func:`execution_cache_name`);
    removes the folders of the same profile and frameworks made with other helpers."""
    base = Path(base)
    name = execution_cache_name()
    stem = name.rsplit("-", 1)[0]
    for stale in base.glob(f"{stem}-*"):
        if stale.name != name and stale.name.rsplit("-", 1)[0] == stem:
            shutil.rmtree(stale, ignore_errors=True)
    return base / name


def rests_on_stand_ins(notebook: Any) -> bool:
    """Whether a page's outputs show that it ran on a synthetic stand-in (whose source
    line, which every data page prints, starts with STAND_IN_MARK)."""
    from rosetta_utils.data.standins import STAND_IN_MARK

    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            text = output.get("text", "") or "".join(str(v) for v in output.get("data", {}).values())
            if STAND_IN_MARK in str(text):
                return True
    return False


def outputs_for(page: Page, frameworks: list[str], folder: str | Path, force: bool, timeout: int,
                log: Callable[[str], None], log_folder: Path | None = None,
                slots: Slots | None = None) -> PageOutputs:
    """Make sure jupyter-cache in ``folder`` holds ``page``'s merged outputs: reuse them
    unless ``force``, else execute ``frameworks``' parts and the comparisons (in the
    machine's ``slots``) and store them. An entry that cannot be read is a miss: logged,
    removed and replaced."""
    from jupyter_cache import get_cache
    from jupyter_cache.base import CacheBundleIn

    folder = Path(folder)
    with CACHE_LOCK:
        cache = get_cache(folder)
        found = None if force else _cached_outputs(page, cache, folder, log)
    if found is not None:
        return found
    parts_cache = None if force else get_cache(folder / "framework-parts")
    executed = execute_page(page, frameworks, parts_cache, timeout=timeout, log=log, log_folder=log_folder,
                            slots=slots)
    parts = {part.name: {"seconds": round(part.seconds, 2), "cached": part.cached,
                         "cpu_seconds": None if part.cpu_seconds is None else round(part.cpu_seconds, 2),
                         "environment": part.environment,
                         **({"verdicts": part.verdicts} if part.verdicts is not None else {})}
             for part in executed.parts}
    with CACHE_LOCK:
        cache.cache_notebook_bundle(
            CacheBundleIn(executed.notebook, str(page.path),
                          data={"execution_seconds": executed.seconds, "rosetta_parts": parts}),
            check_validity=False, overwrite=True,
        )
    return PageOutputs(parts, rests_on_stand_ins(executed.notebook))


def _cached_outputs(page: Page, cache: Any, folder: Path, log: Callable[[str], None]) -> PageOutputs | None:
    """What an earlier build with the same code, profile and helpers left of ``page``, or None."""
    try:
        record = cache.match_cache_notebook(page.notebook)
    except KeyError:
        return None
    try:
        cached = cache.get_cache_bundle(record.pk).nb
    except Exception as error:  # a truncated or unreadable entry: run the page again
        log(f"WARNING: {page.path}: its cached outputs (jupyter-cache entry {record.pk} in "
            f"{folder}) cannot be read ({type(error).__name__}: {error}); executing it again "
            "and replacing the entry")
        cache.remove_cache(record.pk)
        return None
    parts = {name: {**facts, "from_page_cache": True} for name, facts in record.data.get("rosetta_parts", {}).items()}
    return PageOutputs(parts, rests_on_stand_ins(cached))


def outputs_for_pages(pages: Iterable[tuple[Page, list[str]]], folder: str | Path, force: bool, timeout: int,
                      log: Callable[[str], None], log_folder: Path | None = None,
                      slots: Slots | None = None) -> dict[Path, PageOutputs | Exception]:
    """:func:`outputs_for` for several pages at once (each ``(page, frameworks)``), their
    parts sharing the machine's ``slots`` (default: :func:`rosetta_book.machine_slots.slot_count`):
    ``{page path: its outputs, or the error that stopped it}``. A page that fails stops
    none of the others."""
    from concurrent.futures import ThreadPoolExecutor

    pages = list(pages)
    if not pages:
        return {}
    slots = slots or Slots(slot_count())
    with ThreadPoolExecutor(max_workers=len(pages), thread_name_prefix="rosetta-page") as pool:
        futures = {page.path: pool.submit(outputs_for, page, frameworks, folder, force, timeout, log, log_folder,
                                          slots) for page, frameworks in pages}
    return {path: future.exception() or future.result() for path, future in futures.items()}
