"""Run the selected rules over files: in parallel, through the cache, then settle the index.

Each file is analysed once, by ``dpcheck.analyze`` (in a worker process when there is
more than a handful of files). Results whose nn.Module status depends on another file
are settled here, once every file's class summary is in (``dpcheck.index``).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

from dpcheck.analysis.file import FileResult, analyze_path, analyze_source
from dpcheck.analysis.index import ClassIndex
from dpcheck.analysis.names import module_name_for
from dpcheck.constants import INTERNAL_ERROR, NOTEBOOK_SUFFIX
from dpcheck.findings import Finding
from dpcheck.registry import matches, rules_by_code
from dpcheck.rule import Rule

if TYPE_CHECKING:
    from concurrent.futures import ProcessPoolExecutor

# Below this many files a process pool costs more than it saves.
_PARALLEL_MIN_FILES = 16


@dataclass
class RunResult:
    """The findings of a whole run, with what settling them across files needs."""

    findings: list[Finding] = field(default_factory=list)
    suppressed: list[Finding] = field(default_factory=list)  # by noqa: kept for --confirm only
    files: int = 0
    internal_error: bool = False
    cache_hits: int = 0
    index: ClassIndex | None = None
    per_file_ignores: Callable[[str], list[str]] | None = None

    def settle_file(self, filename: str, findings: Sequence[Finding]) -> tuple[list[Finding], list[Finding]]:
        """(reported, noqa-suppressed) findings of one file: cross-file conditions settled
        against the run's class index, per-file ignores applied. Also used to re-check a
        file's text after fixes."""
        ignored = self.per_file_ignores(filename) if self.per_file_ignores else []
        kept: list[Finding] = []
        suppressed: list[Finding] = []
        for finding in findings:
            if finding.requires and (self.index is None or not self._holds(finding, kept)):
                continue
            if finding.code != INTERNAL_ERROR and any(matches(s, finding.code) for s in ignored):
                continue
            settled = replace(finding, requires=())
            class_name = finding.subject.class_name
            if class_name and finding.severity != "info" and self.index is not None \
                    and (reason := self.index.unwrapped(class_name) or self.index.offline(class_name)):
                # "Real if this class were the one wrapped" is advice when the project shows
                # what it wraps and this class is not part of it, or nothing uses the class.
                settled = replace(settled, severity="info", message=f"{finding.message}; advice only: {reason}")
            (suppressed if finding.suppressed else kept).append(settled)
        return kept, suppressed

    def _holds(self, finding: Finding, kept: list[Finding]) -> bool:
        """Whether a finding's cross-file condition holds; a failure to decide is a DP002 for its file."""
        try:
            return self.index.holds(finding)
        except Exception as exc:  # noqa: BLE001 - one finding's failure must not end the run
            self.internal_error = True
            kept.append(replace(finding, code=INTERNAL_ERROR, severity="error", fix=None, requires=(),
                                message=f"Internal error deciding whether {finding.code} applies: "
                                        f"{type(exc).__name__}: {exc}; please report it"))
            return False


def _instantiate(codes: Sequence[str]) -> list[Rule]:
    table = rules_by_code()
    return [table[c]() for c in codes]


# In each worker: the selections of this run (code tuples) and their rules, made on first use.
_WORKER_SELECTIONS: tuple[tuple[str, ...], ...] = ()
_WORKER_RULES: dict[int, list[Rule]] = {}


def _worker_init(selections: tuple[tuple[str, ...], ...], parent: int) -> None:
    global _WORKER_SELECTIONS
    die_with_parent(parent)
    _WORKER_SELECTIONS = selections
    _WORKER_RULES.clear()


def die_with_parent(parent: int) -> None:
    """Make this worker process end when dpcheck (``parent``) ends, however it ends: a
    parent killed by SIGKILL or SIGTERM cannot shut its pool down, and its workers would
    otherwise wait on their task queue forever."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes
            import signal

            pr_set_pdeathsig = 1
            if ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, int(signal.SIGKILL)) != 0:
                raise OSError(ctypes.get_errno(), "prctl failed")
        except (OSError, AttributeError):
            _watch_parent(parent)
    else:  # pragma: no cover - not Linux
        _watch_parent(parent)
    if os.getppid() != parent:  # the parent died before the signal was armed
        os._exit(1)


def _watch_parent(parent: int) -> None:
    import threading
    import time

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, name="dpcheck-parent-watch", daemon=True).start()


def _worker_analyze(tasks: list[tuple[str, str, int]]) -> list[FileResult]:
    out = []
    for path, display, selection in tasks:
        rules = _WORKER_RULES.get(selection)
        if rules is None:
            rules = _WORKER_RULES[selection] = _instantiate(_WORKER_SELECTIONS[selection])
        out.append(_analyze_one(Path(path), display, rules))
    return out


def _analyze_one(path: Path, display: str, rules: Sequence[Rule]) -> FileResult:
    """``analyze_path`` never raises by design; this is the last line for anything it missed."""
    try:
        return analyze_path(path, display, rules)
    except Exception as exc:  # noqa: BLE001 - one file's failure must not end the run
        return _crashed(display, f"Internal error while analysing the file: {type(exc).__name__}: {exc}")


def _crashed(display: str, message: str) -> FileResult:
    result = FileResult(display, Path(display).stem, internal_error=True)
    result.findings.append(Finding(INTERNAL_ERROR, f"{message}; please report it", "error", display,
                                   1, 1, 1, 1, ""))
    return result


def _pool(jobs: int, selections: tuple[tuple[str, ...], ...]) -> ProcessPoolExecutor:
    # Imported here: a one-file run (pre-commit, an editor) never starts a pool, and these
    # modules are a tenth of its start-up time.
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    method = "fork" if sys.platform.startswith("linux") else None
    return ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context(method),
                               initializer=_worker_init, initargs=(selections, os.getpid()))


def _analyze_in_pool(tasks: list[tuple[str, str, int]], selections: tuple[tuple[str, ...], ...],
                     jobs: int) -> list[FileResult]:
    """Analyse ``tasks`` in worker processes. A worker that dies (a crash in C code, the
    out-of-memory killer) breaks the pool: the files it left unfinished are analysed again,
    each in a process of its own, so only the file that kills its process is lost."""
    results: list[FileResult | None] = [None] * len(tasks)
    chunk = max(1, min(32, len(tasks) // (jobs * 8) or 1))
    # Largest files first: a worker that draws a big file near the end would otherwise keep
    # the run waiting while the others idle. Results go back to their places in ``tasks``.
    order = sorted(range(len(tasks)), key=lambda i: -file_size(tasks[i][0]))
    with _pool(jobs, selections) as pool:
        futures = {pool.submit(_worker_analyze, [tasks[i] for i in order[start:start + chunk]]):
                   order[start:start + chunk] for start in range(0, len(order), chunk)}
        for future, places in futures.items():
            try:
                for place, result in zip(places, future.result()):
                    results[place] = result
            except Exception:  # noqa: BLE001 - BrokenProcessPool or a result that failed to pickle
                pass
    for i, task in enumerate(tasks):
        if results[i] is None:
            results[i] = _analyze_alone(task, selections)
    return results  # type: ignore[return-value]


def map_isolated(function: Callable, tasks: Sequence, jobs: int, lost: Callable, size: Callable | None = None) -> list:
    """``[function(task) for task in tasks]``, computed in worker processes (``function``
    and each task must pickle). A task whose worker dies, or whose call raises, is run
    again in a process of its own; if that fails too, ``lost(task)`` is its result: a
    crash costs only its own task. ``size(task)``: larger tasks start first."""
    results: list = [None] * len(tasks)
    done = [False] * len(tasks)
    order = sorted(range(len(tasks)), key=lambda i: -size(tasks[i])) if size else range(len(tasks))
    with _pool(jobs, ()) as pool:
        futures = {i: pool.submit(function, tasks[i]) for i in order}
        for i, future in futures.items():
            try:
                results[i] = future.result()
                done[i] = True
            except Exception:  # noqa: BLE001 - BrokenProcessPool, or the call's own failure: retried alone
                pass
    for i, task in enumerate(tasks):
        if not done[i]:
            try:
                with _pool(1, ()) as pool:
                    results[i] = pool.submit(function, task).result()
            except Exception:  # noqa: BLE001
                results[i] = lost(task)
    return results


def file_size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def _analyze_alone(task: tuple[str, str, int], selections: tuple[tuple[str, ...], ...]) -> FileResult:
    try:
        with _pool(1, selections) as pool:
            return pool.submit(_worker_analyze, [task]).result()[0]
    except Exception as exc:  # noqa: BLE001
        return _crashed(task[1], f"Internal error: the process analysing this file died ({type(exc).__name__})")


def default_jobs() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


@dataclass(frozen=True)
class Selection:
    """The rules one group of files runs (files under one configuration share one), and
    the cache their results go to (its key includes the codes)."""

    codes: tuple[str, ...]
    cache: object = None


def analyze_files(paths: Sequence[Path], codes: Sequence[str], jobs: int | None = None,
                  cache=None) -> tuple[list[FileResult], int]:
    """Analyse every file with the same rules; see ``analyze_selected``."""
    return analyze_selected(paths, [0] * len(paths), [Selection(tuple(codes), cache)], jobs)


def analyze_selected(paths: Sequence[Path], choice: Sequence[int], selections: Sequence[Selection],
                     jobs: int | None = None) -> tuple[list[FileResult], int]:
    """Analyse ``paths[i]`` with ``selections[choice[i]]`` (through its cache); returns the
    results in input order and the number of cache hits. One process pool serves every
    selection: a task carries the index of its selection."""
    results: list[FileResult | None] = [None] * len(paths)
    todo: list[int] = []
    hits = 0
    for i, path in enumerate(paths):
        cache = selections[choice[i]].cache
        try:
            cached = cache.get(path) if cache is not None else None
        except Exception:  # noqa: BLE001 - a cache entry that cannot be read is a miss
            cached = None
        if cached is not None:
            results[i] = cached
            hits += 1
        else:
            todo.append(i)
    jobs = jobs or default_jobs()
    tasks = [(str(paths[i]), str(paths[i]), choice[i]) for i in todo]
    if jobs > 1 and len(tasks) >= _PARALLEL_MIN_FILES:
        fresh = _analyze_in_pool(tasks, tuple(s.codes for s in selections), jobs)
    else:
        rules: dict[int, list[Rule]] = {}
        fresh = []
        for path, display, selection in tasks:
            if selection not in rules:
                rules[selection] = _instantiate(selections[selection].codes)
            fresh.append(_analyze_one(Path(path), display, rules[selection]))
    for i, result in zip(todo, fresh):
        results[i] = result
        cache = selections[choice[i]].cache
        if cache is not None and not result.internal_error:
            try:
                cache.put(paths[i], result)
            except Exception:  # noqa: BLE001 - a result that cannot be cached is still reported
                pass
    return [r for r in results if r is not None], hits


class _RealFolders:
    """``os.path.realpath`` of absolute, normalised folder paths, remembered per folder: a
    folder's real path is its parent's joined with its name unless it is a link itself, so
    each folder costs one lstat instead of one per component."""

    def __init__(self) -> None:
        self._known: dict[str, str] = {}

    def __call__(self, folder: str) -> str:
        known = self._known.get(folder)
        if known is not None:
            return known
        parent, name = os.path.split(folder)
        if not name or parent == folder or os.path.islink(folder):  # the file system's root, or a link
            real = os.path.realpath(folder)
        else:
            real = os.path.join(self(parent), name)
        self._known[folder] = real
        return real


def module_loader(results: Sequence[FileResult], cache=None):
    """Find and summarise modules that were not scanned, from the scanned files' package roots.

    The roots are found on the first call only: most runs never need a module they did not scan."""
    roots: list[Path] | None = None

    def package_roots() -> list[Path]:
        found: dict[str, None] = {}  # in first-seen order
        real_folder = _RealFolders()
        for result in results:
            if os.path.islink(result.filename):
                path = os.path.realpath(result.filename)
            else:
                folder, name = os.path.split(os.path.abspath(result.filename))
                path = os.path.join(real_folder(folder), name)
            depth = result.module.count(".") + (1 if os.path.basename(path) == "__init__.py" else 0)
            root = path
            for _ in range(depth + 1):
                parent = os.path.dirname(root)
                if parent == root:  # above the file system's root: no package root
                    root = None
                    break
                root = parent
            if root is not None:
                found.setdefault(root)
        return [Path(r) for r in found]

    def load(module: str) -> FileResult | None:
        nonlocal roots
        if roots is None:
            roots = package_roots()
        parts = module.split(".")
        for root in roots:
            for candidate in (root.joinpath(*parts).with_suffix(".py"), root.joinpath(*parts, "__init__.py")):
                if candidate.is_file():
                    # Only the class summary is needed: no rules, and cached like any file.
                    cached = cache.get(candidate, summary_only=True) if cache is not None else None
                    if cached is not None:
                        return cached
                    result = analyze_path(candidate, str(candidate), [], module)
                    if cache is not None and not result.internal_error:
                        cache.put(candidate, result, summary_only=True)
                    return result
        return None

    return load


def settle(results: Sequence[FileResult], per_file_ignores=None, cache=None) -> RunResult:
    """Keep the findings whose cross-file conditions hold; apply per-file ignores."""
    index = ClassIndex(results, module_loader(results, cache))
    run = RunResult(files=len(results), index=index, per_file_ignores=per_file_ignores)
    for result in results:
        run.internal_error |= result.internal_error
        kept, suppressed = run.settle_file(result.filename, result.findings)
        run.findings.extend(kept)
        run.suppressed.extend(suppressed)
    run.findings.sort(key=lambda f: (f.filename, f.cell or 0, f.row, f.col, f.code))
    return run


def check_stdin(text: str, display: str, codes: Sequence[str]) -> FileResult:
    """Check ``text`` as the file ``display`` (stdin, or a file's fixed text)."""
    module = module_name_for(Path(display)) if display != "-" else "stdin"
    if display.endswith(NOTEBOOK_SUFFIX):
        from dpcheck.analysis.notebook import analyze_notebook_text  # only runs that meet a notebook pay its import

        return analyze_notebook_text(text, display, _instantiate(codes), module)
    return analyze_source(text, display, _instantiate(codes), module,
                          is_package=Path(display).name == "__init__.py")
