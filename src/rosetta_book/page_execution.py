"""Execute a page as the book builds it: each framework's part on its own, then the comparisons.

For every framework the page declares (and the build selects), the part's
download (:mod:`rosetta_book.downloads`) runs in a fresh Jupyter kernel in
the page's folder, with every other framework made unimportable
(:mod:`rosetta_book.one_framework`). After its last cell, the values the
page lists under ``tab_results`` are saved (:mod:`rosetta_proof.tab_results`).
Then the page's shared and comparison cells run in one more kernel, with no
framework importable, reading what the parts saved. Each cell so runs once,
and the outputs are merged back into the page's notebook for MyST-NB to render.

Each framework part is cached with jupyter-cache (the executed notebook, and
its saved results as an artefact), keyed by its code, so a change to one tab
re-runs only that framework and the comparisons.

``python -m rosetta_book.page_execution PAGE [--frameworks pytorch,jax]``
runs a page this way outside Sphinx and prints each cell's outputs.
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import contextlib
import copy
import hashlib
import json
import os
import sys
import tempfile
import threading
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from rosetta_utils import FRAMEWORK_TITLES, FRAMEWORKS
from .build_plan import executed_frameworks
from .decisive_calls import decisive_callees, write_decisive_calls
from .downloads import download_notebook_with_origins
from .environments import require_python
from .clock_watch import WATCH_VARIABLE, ClockOutsideItsWindow, check_clock_reads, read_clock_log, watch_argument
from .machine_slots import Abandoned, Slots, Turns, runs_alone, slot_count
from .one_framework import environment
from .page import Page
from .timed_cells import timed_cells
from rosetta_proof import epilogue
from rosetta_proof.tab_results import RESULTS_FOLDER_VARIABLE, read_tab_results, results_file
from rosetta_utils.run_profile import cuda_gpu_visible, current_profile, is_test_build

#: Seconds a single cell may run (the book's _config.yml sets the build's).
DEFAULT_TIMEOUT = 1800
_RESULTS_FILE_GLOB = "*.tab-results.npz"
#: Where a page's comparisons leave how many verdicts they gated (in its results folder).
GATED_FILE = "verdicts-gated.txt"
#: jupyter-cache's SQLite indexes are used by one thread at a time (parts and pages run
#: side by side).
CACHE_LOCK = threading.Lock()


class CacheEntryUnreadable(UserWarning):
    """A cache entry that could not be read: a miss, named in the warning."""


class PageExecutionError(RuntimeError):
    """A cell of a page part that failed; the message names page, line and part."""


@dataclass
class PartRun:
    """One executed part: its notebook with outputs, and the page cell of each of its cells."""

    name: str  # a framework, or "comparisons"
    notebook: Any
    origins: list[int | None]
    seconds: float
    cached: bool = False
    environment: dict[str, Any] = field(default_factory=dict)  # where a framework part ran
    verdicts: int | None = None  # comparisons: how many verdicts the page's gates checked
    alone_cells: int = 0  # how many of its cells ran alone (they time something)
    alone_seconds: float = 0.0  # how long it held the whole machine for them
    cpu_seconds: float | None = None  # CPU its kernel used (None: not known, or from the cache)

    def spent(self) -> str:
        """What the build log says it took: "64.0 s, 43.0 CPU-s, 1 cell alone for 34.5 s"."""
        cpu = f", {self.cpu_seconds:.1f} CPU-s" if self.cpu_seconds is not None else ""
        alone = (f", {self.alone_cells} cell{'s' * (self.alone_cells != 1)} alone for "
                 f"{self.alone_seconds:.1f} s" if self.alone_cells else "")
        return f"{self.seconds:.1f} s{cpu}{alone}"


@dataclass
class ExecutedPage:
    page: Page
    notebook: Any  # the page's notebook with every executed cell's outputs
    parts: list[PartRun] = field(default_factory=list)

    @property
    def seconds(self) -> float:
        return sum(part.seconds for part in self.parts)


def kernel_environment(only: str, temporary: Path, results_folder: str | Path | None = None) -> dict[str, str]:
    """The environment of a part's kernel: this process's, with ``only``'s guard installed
    and its temporary files in ``temporary`` (the caller removes it)."""
    env = environment(only, temporary=temporary)
    env.setdefault("ROSETTA_BOOK_BUILD", "1")
    env.setdefault("TQDM_DISABLE", "1")  # nobody watches a progress bar in a build
    if not cuda_gpu_visible():
        # PyPI's torch is a CUDA build: where a CUDA compiler is installed but no GPU (these
        # build machines), torch.compile logs "No CUDA runtime is found" into the page. That
        # is a fact of the machine, not of the page.
        env.setdefault("TORCH_LOGS", "-torch.utils.cpp_extension")
    if results_folder is not None:
        env[RESULTS_FOLDER_VARIABLE] = str(results_folder)
    return env


def _failure(page: Page, part: str, notebook: Any, origins: list[int | None], error: Exception) -> PageExecutionError:
    """The error for a failed part, naming the page line of the cell that raised."""
    where, section, detail = str(page.path), None, f"{type(error).__name__}: {error}"
    for position, cell in enumerate(notebook.cells):
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                if position >= len(origins):
                    where = f"{page.path} (after its last cell)"
                elif origins[position] is None:
                    where = f"{page.path} (cell {position + 1} of the {part} download, which the book adds)"
                else:
                    where, section = page.where(origins[position]), page.section_of(origins[position])
                traceback = "\n".join(output.get("traceback", []))
                detail = f"{output.get('ename')}: {output.get('evalue')}\n{_strip_ansi(traceback)}"
                break
        else:
            continue
        break
    in_section = f" in section {section!r}" if section else ""
    return PageExecutionError(f"{where}: the {part} failed{in_section}: {detail}")


def _strip_ansi(text: str) -> str:
    import re

    return re.sub(r"\x1b\[[0-9;]*m", "", text)


def _kernel_manager(python: str | None, sockets: Path) -> Any:
    """A manager for a fresh kernel of ``python`` (None: this process's own interpreter)."""
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import KernelManager

    # Local sockets rather than TCP ports: nothing listens on the network.
    where = {"transport": "ipc", "ip": str(sockets / "kernel")}
    if python is None or python == sys.executable:
        return KernelManager(kernel_name="python3", **where)
    specs = sockets / "kernels"
    (specs / "rosetta").mkdir(parents=True)
    (specs / "rosetta" / "kernel.json").write_text(json.dumps({
        "argv": [python, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": f"Python ({python})", "language": "python",
    }))
    return KernelManager(kernel_name="rosetta", kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(specs)]),
                         **where)


def run_notebook(notebook: Any, cwd: Path, env: dict[str, str], timeout: int,
                 native_log: Path | None = None, python: str | None = None,
                 turns: Turns | None = None, clock_log: Path | None = None) -> tuple[float, float | None]:
    """Execute ``notebook`` in place in a fresh kernel of ``python`` (default: this
    process's interpreter); returns the seconds it took and the CPU seconds its kernel
    and the processes it waited for used (:func:`kernel_cpu_seconds`).

    What native code writes to the process's own stdout and stderr (TensorFlow's
    C++ start-up lines, oneDNN's verbose mode) goes to ``native_log`` (or to this
    process's streams), not into the cells' outputs: a page shows what its
    Python code prints. With ``turns`` (:meth:`rosetta_book.machine_slots.Slots.kernel`),
    the kernel's start and each cell wait for their turn at the machine. With
    ``clock_log``, the kernel notes there which cells read a clock
    (:func:`rosetta_book.clock_watch.watch`).
    """
    from nbclient import NotebookClient

    class TakingTurns(NotebookClient):
        async def async_start_new_kernel(self, **kwargs: Any) -> None:
            if turns is not None:
                await asyncio.to_thread(turns.before, None)
            await super().async_start_new_kernel(**kwargs)

        async def async_execute_cell(self, cell: Any, cell_index: int, *args: Any, **kwargs: Any) -> Any:
            if turns is None or cell.cell_type != "code":
                return await super().async_execute_cell(cell, cell_index, *args, **kwargs)
            await asyncio.to_thread(turns.before, cell_index)
            try:
                return await super().async_execute_cell(cell, cell_index, *args, **kwargs)
            finally:
                turns.after()

    with contextlib.ExitStack() as stack:
        sockets = stack.enter_context(tempfile.TemporaryDirectory(prefix="rosetta-kernel-"))
        streams = {}
        if native_log is not None:
            native_log.parent.mkdir(parents=True, exist_ok=True)
            handle = stack.enter_context(open(native_log, "wb"))
            streams = {"stdout": handle, "stderr": handle}
        manager = _kernel_manager(python, Path(sockets))
        client = TakingTurns(notebook, km=manager, timeout=timeout, allow_errors=False, record_timing=False,
                             extra_arguments=["--IPKernelApp.capture_fd_output=False",
                                              *([watch_argument()] if clock_log else [])],
                             resources={"metadata": {"path": str(cwd)}})
        start, cpu = time.perf_counter(), None
        try:
            client.execute(env={**env, WATCH_VARIABLE: str(clock_log)} if clock_log else env, **streams)
            cpu = kernel_cpu_seconds(manager)  # the kernel is ours: still running here
        finally:
            if turns is not None:
                turns.done()
            if manager.has_kernel:
                manager.shutdown_kernel(now=True)
            # nbclient leaves its exit-time cleanup registered when the kernel's start fails
            # (a part abandoned while waiting for its turn): at exit it would wait forever
            atexit.unregister(client._cleanup_kernel)
        return time.perf_counter() - start, cpu


def kernel_cpu_seconds(manager: Any) -> float | None:
    """The CPU seconds (user and system) a live kernel has used, with those of the child
    processes it has waited for (workers, scripts it ran), from ``/proc``; None where
    that cannot be read (no ``/proc``, a kernel already gone)."""
    pid = getattr(getattr(manager, "provisioner", None), "pid", None)
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError, TypeError):
        return None
    # after the command's name: state is field 3, utime..cstime are fields 14 to 17
    return sum(int(value) for value in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def _epilogue_cell(request: dict[str, Any], folder: Path) -> Any:
    """The kernel's last cell: :mod:`rosetta_proof.epilogue`, on ``request`` (written into ``folder``)."""
    import nbformat

    return nbformat.v4.new_code_cell(epilogue.cell(epilogue.write_request(folder, request)))


def part_request(page: Page, framework: str, folder: str | Path) -> dict[str, Any]:
    """What a part's epilogue does (:mod:`rosetta_proof.epilogue`): save its tab results into
    ``folder``; the build's kernels and the chapter loader's processes alike."""
    return {"kind": "part", "page": str(page.path), "framework": framework,
            "names": list(page.tab_results_for(framework)), "callees": list(decisive_callees(page, framework)),
            "folder": str(folder)}


def _native_log(log_folder: Path | None, page: Page, part: str) -> Path | None:
    return None if log_folder is None else log_folder / f"{page.name}-{part}.log"


def take_from_cache(page: Page, framework: str, results_folder: Path, cache: Any) -> PartRun | None:
    """``framework``'s part as an earlier execution of the same code left it in ``cache``
    (its results written into ``results_folder``), or None if the cache has none."""
    download, origins = download_notebook_with_origins(page, framework)
    with CACHE_LOCK:
        return _take_from_cache(page, framework, results_folder, cache, download, origins)


def _take_from_cache(page: Page, framework: str, results_folder: Path, cache: Any, download: Any,
                     origins: list[int | None]) -> PartRun | None:
    try:
        record = cache.match_cache_notebook(download)
    except KeyError:
        return None
    try:
        artifacts = [(relative.name, handle.read()) for relative, handle in cache.get_cache_bundle(record.pk).artifacts]
        _, merged = cache.merge_match_into_notebook(download)  # the cache keeps code cells only
    except Exception as error:  # a truncated or unreadable entry: run the part again
        warnings.warn(f"{page.path}: the cached {framework} part (jupyter-cache entry {record.pk} in "
                      f"{cache.path}) cannot be read ({type(error).__name__}: {error}); running it again "
                      "and replacing the entry", CacheEntryUnreadable, stacklevel=2)
        with contextlib.suppress(Exception):
            cache.remove_cache(record.pk)
        return None
    for name, content in artifacts:
        _place_results(results_folder, name, content)
    return PartRun(framework, merged, origins, record.data.get("execution_seconds", 0.0), cached=True)


def _place_results(folder: Path, name: str, content: bytes) -> None:
    """Put a part's results file in the page's folder whole: written under another name
    and renamed, so that a part running beside it never reads half a file."""
    partial = folder / f"{name}.partial"
    partial.write_bytes(content)
    os.replace(partial, folder / name)


def framework_parts_cache(base: str | Path) -> Path:
    """Where a build whose caches live under ``base`` (``_build/.jupyter_cache``) keeps
    its framework parts, for this profile, framework selection and these helpers."""
    return Path(base) / execution_cache_name() / "framework-parts"


#: The compilers' own persistent caches, beside the framework parts' cache: JAX's
#: (``JAX_COMPILATION_CACHE_DIR``) and PyTorch's Inductor's (``TORCHINDUCTOR_CACHE_DIR``).
#: The parts whose times nobody reads (a page that times nothing, or any page in the test
#: build) store their compiled programs there, so that the tests, which run those parts'
#: code again in their own processes, load them instead of compiling them again (the layers
#: table's JAX part: 35 s of its 40 compile op by op). Timed pages go without them in any
#: other build: their first epochs and first calls include compiling, and a cache would
#: hide that.
JAX_CACHE_FOLDER = "jax-compilation"
TORCH_CACHE_FOLDER = "torchinductor"


def compilation_caches(parts_cache: str | Path) -> dict[str, str]:
    """The environment that points JAX and PyTorch's Inductor at the compilation caches
    beside ``parts_cache`` (the framework parts' cache folder, :func:`framework_parts_cache`),
    every JAX program kept (JAX keeps only those that took a second to compile, by default)."""
    base = Path(parts_cache).parent
    return {"JAX_COMPILATION_CACHE_DIR": str(base / JAX_CACHE_FOLDER),
            "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
            "TORCHINDUCTOR_CACHE_DIR": str(base / TORCH_CACHE_FOLDER)}


#: What a page's code names when it shows a compilation cache's setting (the autotuning
#: lesson's knob table): such a page keeps the framework's default, so that it shows the
#: reader's.
_CACHE_SETTINGS = ("jax_compilation_cache_dir",)


def keeps_compiled_programs(page: Page) -> bool:
    """Whether ``page``'s parts use the compilation caches (:func:`compilation_caches`):
    nobody reads their times (an untimed page, or the test build), and the page's code
    reads no cache setting."""
    if not (page.untimed or is_test_build()):
        return False
    code = "\n".join(cell.source for cell in page.notebook.cells if cell.cell_type == "code")
    return not any(name in code for name in _CACHE_SETTINGS)


#: For a part that shares the machine: OpenMP threads that sleep when they wait, instead of
#: spinning on a core another part needs (PyTorch's and MXNet's OpenMP). Two CIFAR-10
#: parts side by side took 41 CPU-seconds with it, 54 without (wall 22.6 s against 29.4 s).
SHARING_THREADS = ("OMP_WAIT_POLICY", "PASSIVE")


#: Where a parts cache keeps how long each part took when it last ran (``page#framework``:
#: seconds): the order in which waiting parts take a slot, the longest first.
SECONDS_FILE = "part-seconds.json"


def _seconds_seen(cache: Any | None) -> dict[str, float]:
    if cache is None:
        return {}
    try:
        return dict(json.loads((Path(cache.path) / SECONDS_FILE).read_text()))
    except (OSError, ValueError, TypeError):  # none yet, or unreadable: no history
        return {}


def _remember_seconds(cache: Any | None, key: str, seconds: float) -> None:
    if cache is None:
        return
    seen = _seconds_seen(cache)
    seen[key] = round(seconds, 2)
    path = Path(cache.path) / SECONDS_FILE
    partial = path.with_suffix(".partial")
    partial.write_text(json.dumps(seen, indent=0, sort_keys=True))
    partial.replace(path)  # whole or not at all: an interrupted build leaves the old file


def expected_seconds(page: Page, part: str, cache: Any | None) -> float:
    """How long ``page``'s ``part`` (a framework, or "comparisons") is expected to take:
    what it took when the cache last saw it run, else a guess from its code's length."""
    seen = _seconds_seen(cache).get(f"{page.path.name}#{part}")
    if seen is not None:
        return float(seen)
    indexes = page.comparison_part() if part == "comparisons" else page.framework_part(part)
    return sum(len(source) for _, source in page.code_cells(indexes)) / 1000


def execute_part(page: Page, framework: str, results_folder: Path, cache: Any | None,
                 timeout: int = DEFAULT_TIMEOUT, log_folder: Path | None = None,
                 slots: Slots | None = None, abandon: threading.Event | None = None) -> PartRun:
    """Execute (or take from ``cache``) ``framework``'s part; its results land in
    ``results_folder``. The execution waits for a slot of ``slots`` (all of them for a part
    that runs alone, :func:`rosetta_book.machine_slots.runs_alone`), unless ``abandon`` is
    set meanwhile; a part from the cache takes no slot."""
    from jupyter_cache.base import CacheBundleIn
    from jupyter_cache.cache.main import NbArtifacts

    download, origins = download_notebook_with_origins(page, framework)
    title = f"{FRAMEWORK_TITLES[framework]} part"
    if cache is not None:
        with CACHE_LOCK:
            taken = _take_from_cache(page, framework, results_folder, cache, download, origins)
        if taken is not None:
            return taken
    slots = slots or Slots(1)
    with tempfile.TemporaryDirectory(prefix=f"rosetta-{framework}-") as scratch:
        executed = copy.deepcopy(download)
        executed.cells.append(_epilogue_cell(part_request(page, framework, Path(scratch)), Path(scratch)))
        folder = Path(scratch) / "download"  # an empty folder: the page is not beside it
        folder.mkdir()
        env = kernel_environment(framework, Path(scratch) / "temporary")
        if cache is not None and keeps_compiled_programs(page):
            env.update(compilation_caches(cache.path))
        if not runs_alone(page.untimed):
            env.setdefault(*SHARING_THREADS)
        seconds, cpu, turns = _run_in_turns(
            page, title, executed, origins, folder, env, timeout, _native_log(log_folder, page, framework),
            require_python(framework), slots, expected_seconds(page, framework, cache), abandon,
            clocks_allowed=not page.untimed)
        executed.cells.pop()
        saved = sorted(Path(scratch).glob(_RESULTS_FILE_GLOB))
        for path in saved:
            _place_results(results_folder, path.name, path.read_bytes())
        if cache is not None:
            with CACHE_LOCK:
                cache.cache_notebook_bundle(
                    CacheBundleIn(executed, f"{page.path}#{framework}",
                                  artifacts=NbArtifacts(saved, in_folder=scratch),
                                  data={"execution_seconds": seconds}),
                    check_validity=False, overwrite=True,
                )
                _remember_seconds(cache, f"{page.path.name}#{framework}", seconds)
    return PartRun(framework, executed, origins, seconds, alone_cells=turns.alone_cells,
                   alone_seconds=turns.alone_seconds, cpu_seconds=cpu)


def _run_in_turns(page: Page, title: str, notebook: Any, origins: list[int | None], cwd: Path,
                  env: dict[str, str], timeout: int, native_log: Path | None, python: str | None, slots: Slots,
                  priority: float, abandon: threading.Event | None, clocks_allowed: bool) -> tuple[float, float | None, Turns]:
    """Run a part's ``notebook`` in a kernel of its own that takes its turns at the machine's
    ``slots``: on a timed page outside the test build (:func:`runs_alone`), each cell that
    times something (:func:`rosetta_book.timed_cells.timed_cells`) runs alone. The kernel
    watches its clocks, and a cell that read one the scan did not find (or any, where
    clocks are not ``clocks_allowed``) stops the part. Returns the seconds it took, the CPU
    seconds its kernel used (:func:`kernel_cpu_seconds`) and its turns (how many cells ran
    alone, and for how long)."""
    timed = timed_cells([cell.source if cell.cell_type == "code" else "" for cell in notebook.cells])
    alone = [bool(reasons) and runs_alone(page.untimed) for reasons in timed]

    def named(index: int) -> str:
        origin = origins[index] if index < len(origins) else None
        return page.where(origin) if origin is not None else f"{page.path} (cell {index + 1} of the {title})"

    with tempfile.TemporaryDirectory(prefix="rosetta-clocks-") as watched:
        clock_log = Path(watched) / "clocks.jsonl"
        with slots.kernel(alone, priority, abandon) as turns:
            try:
                seconds, cpu = run_notebook(notebook, cwd, env, timeout, native_log, python, turns, clock_log)
            except Abandoned:
                raise  # not this part's failure: another part's, which run_parts reports
            except Exception as error:
                raise _failure(page, title, notebook, origins, error) from None
        try:
            check_clock_reads(notebook, read_clock_log(clock_log), timed, clocks_allowed, named, title)
        except ClockOutsideItsWindow as error:
            raise PageExecutionError(str(error)) from None
    return seconds, cpu, turns


def run_comparisons(page: Page, results_folder: Path, timeout: int = DEFAULT_TIMEOUT,
                    log_folder: Path | None = None, slots: Slots | None = None,
                    cache: Any | None = None) -> PartRun:
    """Execute the page's shared and comparison cells, reading the parts' results (in a
    slot of ``slots``; ``cache``: the parts cache, which keeps how long they took)."""
    import nbformat

    indexes = page.comparison_part()
    write_decisive_calls(page, results_folder)
    notebook = nbformat.v4.new_notebook()
    notebook.metadata["kernelspec"] = dict(page.notebook.metadata.get("kernelspec", {"name": "python3"}))
    notebook.cells = [nbformat.v4.new_code_cell(page.notebook.cells[i].source) for i in indexes]
    origins: list[int | None] = list(indexes)
    counted = Path(results_folder) / GATED_FILE  # how many verdicts the page's gates checked
    notebook.cells.append(_epilogue_cell({"kind": "comparisons", "gated": str(counted)}, Path(results_folder)))
    seconds, cpu, _ = _run_in_turns(page, "comparison", notebook, origins, page.path.parent,
                               kernel_environment("none", Path(results_folder) / "temporary", results_folder), timeout,
                               _native_log(log_folder, page, "comparisons"), None, slots or Slots(1),
                               expected_seconds(page, "comparisons", cache), None, clocks_allowed=False)
    notebook.cells.pop()
    if cache is not None:
        with CACHE_LOCK:
            _remember_seconds(cache, f"{page.path.name}#comparisons", seconds)
    return PartRun("comparisons", notebook, origins, seconds, verdicts=int(counted.read_text()),
                   cpu_seconds=cpu)


def run_parts(run: Callable[[str], Any], frameworks: list[str], at_once: int) -> list[Any]:
    """``run`` for each framework, ``at_once`` at a time; the parts in ``frameworks``' order.
    The first part that fails stops the others from starting, and its error is raised (a
    part that only gave up waiting, :class:`rosetta_book.machine_slots.Abandoned`, is not
    the failure)."""
    if at_once <= 1 or len(frameworks) <= 1:
        return [run(framework) for framework in frameworks]
    from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait

    with ThreadPoolExecutor(max_workers=at_once, thread_name_prefix="rosetta-part") as pool:
        futures = [pool.submit(run, framework) for framework in frameworks]
        wait(futures, return_when=FIRST_EXCEPTION)
        if any(future.done() and future.exception() is not None for future in futures):
            for future in futures:
                future.cancel()
        wait(futures)
    errors = [future.exception() for future in futures if not future.cancelled() and future.exception()]
    if errors:
        raise next((error for error in errors if not isinstance(error, Abandoned)), errors[0])
    return [future.result() for future in futures]


def execute_page(page: Page, frameworks: Iterable[str], cache: Any | None = None,
                 timeout: int = DEFAULT_TIMEOUT, log: Callable[[str], None] = print,
                 log_folder: Path | None = None, slots: Slots | None = None) -> ExecutedPage:
    """Run every framework part of ``page`` that ``frameworks`` selects, then its comparisons.

    Returns the page's notebook with outputs: each framework cell's from its
    part, each comparison cell's from the comparison run, and each shared
    cell's from the comparison run (or, on a page without comparisons, from
    the first framework part that ran). Native output of each part goes to
    ``log_folder/<page>-<part>.log`` when a folder is given. The parts take the
    machine's ``slots`` (default: :func:`rosetta_book.machine_slots.slot_count` of
    them, for this page alone): side by side, or one at a time where they run alone
    (a timed page, :func:`rosetta_book.machine_slots.runs_alone`).
    """
    frameworks = [name for name in page.frameworks if name in set(frameworks)]
    slots = slots or Slots(slot_count())
    merged = copy.deepcopy(page.notebook)
    executed = ExecutedPage(page, merged)
    failed = threading.Event()  # set by a failing part: the others stop waiting for a slot
    with tempfile.TemporaryDirectory(prefix="rosetta-tab-results-") as folder:

        def run(framework: str) -> PartRun:
            try:
                part = execute_part(page, framework, Path(folder), cache, timeout, log_folder, slots, failed)
            except BaseException:
                failed.set()
                raise
            part.environment = dict(read_tab_results(results_file(folder, framework))["environment"])
            log(f"{page.name}: {framework} part {'from the cache' if part.cached else 'executed'} "
                f"({part.spent()})")
            return part

        executed.parts.extend(run_parts(run, frameworks, len(frameworks)))  # each waits for its slot
        if page.has_comparisons() or (page.comparison_part() and not frameworks):
            part = run_comparisons(page, Path(folder), timeout, log_folder, slots, cache)
            log(f"{page.name}: comparisons executed ({part.spent()})")
            executed.parts.append(part)
    filled: set[int] = set()
    for part in reversed(executed.parts):  # the comparison run first: its shared outputs win
        for cell, origin in zip(part.notebook.cells, part.origins):
            if origin is None or cell.cell_type != "code" or origin in filled:
                continue
            target = merged.cells[origin]
            target.outputs = cell.get("outputs", [])
            target.execution_count = cell.get("execution_count")
            filled.add(origin)
    return executed


def execution_modules(engine: Path | None = None) -> list[Path]:
    """This module and every module of the engine it imports, directly or through another
    (imports inside functions included; a package whole, as the kernel's guard
    ``one_framework`` is used whole): what decides what a part runs and how. Derived from
    the imports, so a module the execution starts to use is in the cache key at once; the
    Sphinx adapter, the loader, the benchmark and the device check are not imported here."""
    import ast

    from .python_source import parse

    engine = engine or Path(__file__).parent
    found: set[Path] = set()
    waiting = [engine / "page_execution.py"]
    while waiting:
        path = waiting.pop()
        if path in found:
            continue
        found.add(path)
        for node in ast.walk(parse(path.read_text(encoding="utf-8"), str(path))):
            if not isinstance(node, ast.ImportFrom):
                continue
            if node.level == 1:
                names = [node.module] if node.module else [alias.name for alias in node.names]
            elif node.level == 0 and (node.module or "").startswith(f"{engine.name}."):
                names = [node.module.split(".", 1)[1]]
            else:
                continue
            for name in names:
                first = name.split(".")[0]
                if (engine / first).is_dir():
                    waiting.extend(sorted((engine / first).rglob("*.py")))
                elif (engine / f"{first}.py").is_file():
                    waiting.append(engine / f"{first}.py")
    return sorted(found)


def helpers_fingerprint() -> str:
    """A digest of the source files of the reader's library ``rosetta_utils``, of the proof
    library ``rosetta_proof``, of the engine's :func:`execution_modules` and of the
    environments' constraints: the pages' outputs depend on them too."""
    import rosetta_proof
    import rosetta_utils

    from .environments import ROOT

    engine = Path(__file__).parent
    folders = {package.__name__: Path(package.__file__).parent for package in (rosetta_utils, rosetta_proof)}
    sources = {name: sorted(folder.rglob("*.py")) for name, folder in folders.items()}
    sources[engine.name] = execution_modules(engine)
    folders[engine.name] = engine
    digest = hashlib.sha256()
    for package, paths in sources.items():
        base = folders[package]
        for path in paths:
            digest.update(f"{package}/{path.relative_to(base).as_posix()}".encode())
            digest.update(path.read_bytes())
    for path in sorted((ROOT / "environments").glob("*.txt")):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def execution_cache_name() -> str:
    """The cache folder for this build, e.g. ``smoke-all-3f2a...``.

    jupyter-cache keys a page by its code alone, but what the code computes
    also depends on ``ROSETTA_PROFILE``, ``ROSETTA_FRAMEWORKS``,
    ``ROSETTA_OFFLINE`` (stand-ins or downloads), ``ROSETTA_TEST_BUILD`` (whose
    parts share the machine) and the shared helpers: each
    combination gets its own cache, so a smoke run is never served as a full
    one and a changed helper re-executes the pages.
    """
    selected = executed_frameworks()
    frameworks = "all" if selected == FRAMEWORKS else "-".join(selected)
    offline = "-offline" if os.environ.get("ROSETTA_OFFLINE") == "1" else ""
    test = "-test" if is_test_build() else ""  # its times are not measurements: never served to make book
    return f"{current_profile()}{offline}{test}-{frameworks}-{helpers_fingerprint()}"


def main(argv: list[str] | None = None) -> int:
    from rosetta_utils.frameworks import parse_framework_list

    parser = argparse.ArgumentParser(prog="python -m rosetta_book.page_execution",
                                     description="Execute a page as the book build does and print its outputs.")
    parser.add_argument("page", type=Path)
    parser.add_argument("--frameworks", help="comma-separated subset (default: every framework with cells on the page)")
    parser.add_argument("--timeout", type=int, default=DEFAULT_TIMEOUT, help="seconds per cell")
    args = parser.parse_args(argv)
    page = Page.read(args.page.resolve())
    frameworks = parse_framework_list(args.frameworks) if args.frameworks else page.tagged_frameworks()
    executed = execute_page(page, frameworks, timeout=args.timeout, log=lambda line: print(line, file=sys.stderr))
    for index, cell in enumerate(executed.notebook.cells):
        if cell.cell_type != "code" or not cell.get("outputs"):
            continue
        print(f"--- {page.where(index)}")
        for output in cell.outputs:
            if output.get("output_type") == "stream":
                print(output.get("text", ""), end="")
            elif "data" in output:
                print(output["data"].get("text/plain", "<" + ", ".join(output["data"]) + ">"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
