"""Run the selected rules over files: in parallel, through the cache, then settle the index.

Each file is analysed once, by ``dpcheck.analyze`` (in a worker process when there is
more than a handful of files). Results whose nn.Module status depends on another file
are settled here, once every file's class summary is in (``dpcheck.index``).
"""

from __future__ import annotations

import gc
import os
import sys
import weakref
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator, Sequence

from dpcheck.analysis.file import FileResult, analyze_path, analyze_source
from dpcheck.analysis.functional import PARALLEL_HELPER_CONDITION
from dpcheck.analysis.guards import UNPASSED_CONDITION
from dpcheck.analysis.index import ClassIndex, Pending
from dpcheck.analysis.model_class import FORWARD_FLAG_CONDITION, PARAMETER_PROPERTY_CONDITION
from dpcheck.analysis.names import module_name_for
from dpcheck.analysis.tree import prepare_walk
from dpcheck.constants import INTERNAL_ERROR, NOTEBOOK_SUFFIX
from dpcheck.findings import Finding, Severity
from dpcheck.record import field, record, replace
from dpcheck.registry import matches, rules_by_code
from dpcheck.rule import Rule

if TYPE_CHECKING:
    from concurrent.futures import ProcessPoolExecutor

# Below this many files a process pool costs more than it saves.
_PARALLEL_MIN_FILES = 16
# While discovery runs, files go to the pool in chunks of this many, in the order found.
_EARLY_CHUNK = 4


@record
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
            settled = replace(finding, requires=(), error_if=(), advice_if=())
            if finding.error_if and finding.severity != "error" and self.index is not None and self._holds(replace(
                    finding, requires=finding.error_if), kept):
                settled = replace(settled, severity="error")
            if finding.severity != "info" and (reason := self._advice_reason(finding, kept)):
                settled = replace(settled, severity="info", message=f"{finding.message}; advice only: {reason}")
            elif settled.severity == "error" and (reason := self._latent_reason(finding, kept)):
                settled = replace(settled, severity="warning", message=f"{finding.message}; latent: {reason}")
            (suppressed if finding.suppressed else kept).append(settled)
        return _one_per_position(kept), _one_per_position(suppressed)

    def _holds(self, finding: Finding, kept: list[Finding]) -> bool:
        """Whether a finding's cross-file condition holds; a failure to decide is a DP002 for its file."""
        try:
            return self.index.holds(finding)
        except Exception as exc:  # noqa: BLE001 - one finding's failure must not end the run
            self._failed(finding, kept, f"whether {finding.code} applies", exc)
            return False

    def _advice_reason(self, finding: Finding, kept: list[Finding]) -> str | None:
        """Why a finding is advice only, or None. "Real if this class were the one wrapped" is
        advice when the project shows what it wraps and this class is not part of it, or nothing
        uses the class, or the project trains its models and wraps none; a finding about a stock
        DataParallel method is, where the class is wrapped only in subclasses that define their
        own. A failure to decide keeps the finding's severity
        and is a DP002 for its file."""
        class_name = finding.subject.class_name
        if self.index is None or not (class_name or finding.advice_if):
            return None
        index = self.index
        try:
            # (A script rule's finding names no class: only its own conditions decide.)
            return class_name and (
                index.unused_dataparallel() or index.unwrapped(class_name) or index.offline(class_name)
                or index.unnamed(class_name) or index.unbuilt(finding.filename, class_name) or index.called_bare(class_name)
                or index.unreached(finding.filename, class_name)) \
                or next(filter(None, map(index.advice, finding.advice_if)), None)
        except Exception as exc:  # noqa: BLE001 - one finding's failure must not end the run
            self._failed(finding, kept, f"how severe {finding.code} is", exc)
            return None

    def _latent_reason(self, finding: Finding, kept: list[Finding]) -> str | None:
        """Why a class's finding is latent, or None: only wraps behind switches off by default run the
        class under DataParallel (ClassIndex.latent_wrap). A failure to decide keeps the finding's
        severity and is a DP002 for its file."""
        if self.index is None or not finding.subject.class_name:
            return None
        try:
            return self.index.latent_wrap(finding.subject.class_name)
        except Exception as exc:  # noqa: BLE001 - one finding's failure must not end the run
            self._failed(finding, kept, f"how severe {finding.code} is", exc)
            return None

    def _failed(self, finding: Finding, kept: list[Finding], question: str, exc: Exception) -> None:
        self.internal_error = True
        kept.append(replace(finding, code=INTERNAL_ERROR, severity="error", fix=None, requires=(),
                            error_if=(), advice_if=(), message=f"Internal error deciding {question}: "
                            f"{type(exc).__name__}: {exc}; please report it"))


def _one_per_position(findings: list[Finding]) -> list[Finding]:
    """One finding per code and position: of those a file reported for several classes (each with
    its own conditions, see analysis.file._run_rules) and that settled, the most severe, the first
    of equals, where the first of them stood."""
    where: dict[tuple, int] = {}
    out: list[Finding] = []
    for finding in findings:
        key = (finding.code, finding.row, finding.col, finding.end_row, finding.end_col)
        at = where.get(key)
        if at is None:
            where[key] = len(out)
            out.append(finding)
        elif Severity(finding.severity).rank > Severity(out[at].severity).rank:
            out[at] = finding
    return out


def _instantiate(codes: Sequence[str]) -> list[Rule]:
    table = rules_by_code()
    return [table[c]() for c in codes]


# A task: (path, name to report, the codes of the rules to run). In each worker, the rules of
# each selection of codes, made on first use. (Tasks carry their codes, not a selection's number:
# a run whose files stream in from discovery starts its pool before it knows every selection.)
Task = tuple[str, str, tuple[str, ...]]
_WORKER_RULES: dict[tuple[str, ...], list[Rule]] = {}


def _worker_init(parent: int, collecting: bool) -> None:
    """``collecting``: whether the cyclic collector runs in this worker (as it did in the parent
    before the parent paused it for the pool, see ``_analyze_in_pool``)."""
    die_with_parent(parent)
    _WORKER_RULES.clear()
    if collecting:
        gc.enable()


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


def _worker_analyze(tasks: list[Task]) -> list[FileResult]:
    out = []
    for path, display, codes in tasks:
        rules = _WORKER_RULES.get(codes)
        if rules is None:
            rules = _WORKER_RULES[codes] = _instantiate(codes)
        out.append(_analyze_one(Path(path), display, rules))
    return out


def _worker_summarize(request: tuple[str, str]) -> tuple[str, str, FileResult]:
    """(module, path, class summary) of a module that was not scanned: see ``ModuleSummaries``."""
    module, path = request
    return module, path, summarize_module(Path(path), module)


def summarize_module(path: Path, module: str) -> FileResult:
    """What the class index needs of a module it was not asked to check: no rules run."""
    return analyze_path(path, str(path), [], module)


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


def _pool(jobs: int, collecting: bool | None = None) -> ProcessPoolExecutor:
    """``collecting``: whether the workers' cyclic collector runs (default: as in this process now)."""
    # Imported here: a one-file run (pre-commit, an editor) never starts a pool, and these
    # modules are a tenth of its start-up time.
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    method = "fork" if sys.platform.startswith("linux") else None
    return ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context(method),
                               initializer=_worker_init,
                               initargs=(os.getpid(), gc.isenabled() if collecting is None else collecting))


def _analyze_in_pool(tasks: list[Task], jobs: int, summaries: ModuleSummaries | None = None,
                     incoming: Iterator[Task] | None = None) -> list[FileResult]:
    """Analyse ``tasks`` in worker processes. A worker that dies (a crash in C code, the
    out-of-memory killer) breaks the pool: the files it left unfinished are analysed again,
    each in a process of its own, so only the file that kills its process is lost.

    ``incoming``, if given, is the rest of the tasks, still being discovered: each is appended to
    ``tasks`` as it comes, and while it comes the pool is kept busy with them in the order found
    (a few chunks waiting at a time); the files left when discovery ends go largest first.

    ``summaries``, if given, is shown each result as it comes back (those of files analysed while
    discovery ran, once it has ended: it guesses from the whole list of scanned files) and may
    ask for modules outside the scanned files to be summarised in the same pool (see
    ``ModuleSummaries``)."""
    done_at: dict[int, FileResult] = {}  # place in ``tasks`` -> its result
    # The results coming back are kept to the end, and unpickling them makes no cyclic garbage: the
    # cyclic collector would only walk them again and again (about half of this process's CPU
    # while the pool runs). It is paused here, not in the workers.
    collecting = gc.isenabled()
    gc.disable()
    try:
        _run_pool(tasks, jobs, summaries, incoming, done_at, collecting)
    finally:
        if collecting:
            gc.enable()
    return [done_at[i] if i in done_at else _analyze_alone(task) for i, task in enumerate(tasks)]


def _run_pool(tasks: list[Task], jobs: int, summaries: ModuleSummaries | None, incoming: Iterator[Task] | None,
              done_at: dict[int, FileResult], collecting: bool) -> None:
    """``_analyze_in_pool``'s work, with the cyclic collector paused in this process
    (``collecting``: whether it ran before, and runs in the workers): ``done_at`` gets each
    result that came back, by its place in ``tasks``."""
    from concurrent.futures import FIRST_COMPLETED, wait

    # Only a few chunks wait in the pool's queue at a time, so a module summary asked for
    # while files run is computed next, not after every file.
    window = jobs * 2
    with _pool(jobs, collecting) as pool:
        running: dict = {}  # future -> (places in ``tasks``, or None for a module summary)
        unseen: list[FileResult] = []  # results not shown to ``summaries`` yet (discovery still ran)
        chunks: list[list[int]] = []

        def submit(function, argument, places) -> bool:
            try:
                running[pool.submit(function, argument)] = places
                return True
            except Exception:  # noqa: BLE001 - a broken pool takes no more work: it is finished below
                chunks.clear()
                return False

        def take(places, value) -> list[FileResult]:
            for place, result in zip(places, value):
                done_at[place] = result
            return value

        submitted = 0  # the tasks before this place are in the pool
        if incoming is not None:
            try:
                for task in incoming:
                    tasks.append(task)
                    if len(tasks) - submitted < _EARLY_CHUNK:
                        continue
                    for future in [f for f in running if f.done()]:
                        places = running.pop(future)
                        if future.exception() is None:  # else analysed again below, each file alone
                            unseen.extend(take(places, future.result()))
                    if len(running) < window:  # (else the files wait, and go largest first below)
                        places = list(range(submitted, submitted + _EARLY_CHUNK))
                        submitted += _EARLY_CHUNK
                        submit(_worker_analyze, [tasks[i] for i in places], places)
            except BaseException:
                pool.shutdown(wait=True, cancel_futures=True)
                raise
        chunk = max(1, min(32, len(tasks) // (jobs * 8) or 1))
        # Largest files first: a worker that draws a big file near the end would otherwise keep
        # the run waiting while the others idle. Results go back to their places in ``tasks``.
        order = sorted(range(submitted, len(tasks)), key=lambda i: -file_size(tasks[i][0]))
        chunks.extend(order[start:start + chunk] for start in range(0, len(order), chunk))
        chunks.reverse()  # popped from the end: largest first
        if unseen and summaries is not None:
            for request in summaries.analysed(unseen):
                submit(_worker_summarize, request, None)
        while chunks and sum(p is not None for p in running.values()) < window:
            places = chunks.pop()
            submit(_worker_analyze, [tasks[i] for i in places], places)
        while running:
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                places = running.pop(future)
                try:
                    value = future.result()
                except Exception:  # noqa: BLE001 - BrokenProcessPool or a result that failed to pickle
                    continue
                if places is None:
                    wanted = summaries.summarised(value) if summaries is not None else []
                else:
                    wanted = summaries.analysed(take(places, value)) if summaries is not None else []
                for request in wanted:
                    submit(_worker_summarize, request, None)
                while chunks and sum(p is not None for p in running.values()) < window:
                    places = chunks.pop()
                    submit(_worker_analyze, [tasks[i] for i in places], places)


def map_isolated(function: Callable, tasks: Sequence, jobs: int, lost: Callable, size: Callable | None = None) -> list:
    """``[function(task) for task in tasks]``, computed in worker processes (``function``
    and each task must pickle). A task whose worker dies, or whose call raises, is run
    again in a process of its own; if that fails too, ``lost(task)`` is its result: a
    crash costs only its own task. ``size(task)``: larger tasks start first."""
    results: list = [None] * len(tasks)
    done = [False] * len(tasks)
    order = sorted(range(len(tasks)), key=lambda i: -size(tasks[i])) if size else range(len(tasks))
    with _pool(jobs) as pool:
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
                with _pool(1) as pool:
                    results[i] = pool.submit(function, task).result()
            except Exception:  # noqa: BLE001
                results[i] = lost(task)
    return results


def file_size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def _analyze_alone(task: Task) -> FileResult:
    try:
        with _pool(1) as pool:
            return pool.submit(_worker_analyze, [task]).result()[0]
    except Exception as exc:  # noqa: BLE001
        return _crashed(task[1], f"Internal error: the process analysing this file died ({type(exc).__name__})")


def default_jobs() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


@record(frozen=True)
class Selection:
    """The rules one group of files runs (files under one configuration share one), and
    the cache their results go to (its key includes the codes)."""

    codes: tuple[str, ...]
    cache: object = None


def analyze_files(paths: Sequence[Path], codes: Sequence[str], jobs: int | None = None,
                  cache=None, summaries: ModuleSummaries | None = None) -> tuple[list[FileResult], int]:
    """Analyse every file with the same rules; see ``analyze_selected``."""
    return analyze_selected(paths, [0] * len(paths), [Selection(tuple(codes), cache)], jobs, summaries)


def analyze_selected(paths: Sequence[Path], choice: Sequence[int], selections: Sequence[Selection],
                     jobs: int | None = None, summaries: ModuleSummaries | None = None
                     ) -> tuple[list[FileResult], int]:
    """Analyse ``paths[i]`` with ``selections[choice[i]]`` (through its cache); returns the
    results in input order and the number of cache hits. One process pool serves every
    selection: a task carries the index of its selection. When a pool runs, it also makes
    the module summaries ``summaries`` guesses the class index will need."""
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
    tasks = [(str(paths[i]), str(paths[i]), tuple(selections[choice[i]].codes)) for i in todo]
    fresh = _analyze_tasks(tasks, jobs, summaries)
    for i, result in zip(todo, fresh):
        results[i] = result
        cache = selections[choice[i]].cache
        if cache is not None and not result.internal_error:
            try:
                cache.put(paths[i], result)
            except Exception:  # noqa: BLE001 - a result that cannot be cached is still reported
                pass
    return [r for r in results if r is not None], hits


def _analyze_tasks(tasks: list[Task], jobs: int | None, summaries: ModuleSummaries | None = None,
                   incoming: Iterator[Task] | None = None) -> list[FileResult]:
    """The results of ``tasks`` and then of ``incoming``'s (appended to ``tasks``), in that order:
    in a process pool when there are enough files and cores (see ``_analyze_in_pool``), else here."""
    jobs = jobs or default_jobs()
    if incoming is not None and jobs > 1:
        # Enough files for a pool? Discovery goes on in the pool's company once there are.
        tasks.extend(islice(incoming, max(0, _PARALLEL_MIN_FILES - len(tasks))))
        if len(tasks) < _PARALLEL_MIN_FILES:
            incoming = None
    if incoming is not None and jobs > 1:
        prepare_walk()  # pays back over many files (and a forked pool inherits it)
        return _analyze_in_pool(tasks, jobs, summaries, incoming)
    if incoming is not None:
        tasks.extend(incoming)
    if len(tasks) >= _PARALLEL_MIN_FILES:
        prepare_walk()
        if jobs > 1:
            return _analyze_in_pool(tasks, jobs, summaries)
    rules: dict[tuple[str, ...], list[Rule]] = {}
    fresh = []
    for path, display, codes in tasks:
        if codes not in rules:
            rules[codes] = _instantiate(codes)
        fresh.append(_analyze_one(Path(path), display, rules[codes]))
    return fresh


def analyze_discovered(discovered: Iterator[tuple[Path, Sequence[str]]], jobs: int | None = None,
                       summaries: ModuleSummaries | None = None, scanned: list[str] | None = None
                       ) -> tuple[list[Path], list[FileResult]]:
    """(the files, their results in the same order) of the (path, codes) pairs ``discovered``
    yields, analysed as they come, with no cache: the pool starts as soon as there are enough
    files for one, and its workers analyse files while the folders are still being walked.
    ``scanned``, if given, gets each file's path as it is found (``summaries``' list of them)."""
    files: list[Path] = []

    def tasks() -> Iterator[Task]:
        for path, codes in discovered:
            files.append(path)
            if scanned is not None:
                scanned.append(str(path))
            yield str(path), str(path), tuple(codes)

    return files, _analyze_tasks([], jobs, summaries, tasks())


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

    def file(self, path: str) -> str:
        """``os.path.realpath`` of a file's path, through its folder's."""
        if os.path.islink(path):
            return os.path.realpath(path)
        folder, name = os.path.split(os.path.abspath(path))
        return os.path.join(self(folder), name)


def package_root(result: FileResult, real_folder: _RealFolders) -> str | None:
    """The folder a file's dotted module name starts from (its real path), or None."""
    return _root_above(real_folder.file(result.filename), result.module)


def _root_above(path: str, module: str) -> str | None:
    """The folder the dotted ``module`` of the file at the real path ``path`` starts from, or None."""
    depth = module.count(".") + (1 if os.path.basename(path) == "__init__.py" else 0)
    root = path
    for _ in range(depth + 1):
        parent = os.path.dirname(root)
        if parent == root:  # above the file system's root: no package root
            return None
        root = parent
    return root


def module_file(roots: Sequence[Path | str], module: str) -> Path | None:
    """The file that defines the dotted ``module`` under the first of ``roots`` that has one."""
    parts = module.split(".")
    for root in roots:
        path = os.path.join(root, *parts)  # strings: the guesses of ModuleSummaries ask this often
        for candidate in (path + ".py", os.path.join(path, "__init__.py")):
            if os.path.isfile(candidate):
                return Path(candidate)
    return None


def module_loader(results: Sequence[FileResult], cache=None, summaries: ModuleSummaries | None = None,
                  probes: dict | None = None):
    """Find and summarise modules that were not scanned, from the scanned files' package roots
    (a summary the pool already made, in ``summaries``, is taken instead of made again).

    The roots are found on the first call only: most runs never need a module they did not scan.
    A module that is a scanned file under another dotted name (`onmt.Models` for `onmt/Models.py`
    scanned as `Models`: a folder without `__init__.py`) names the scanned file's classes: its
    summary only points at them, so that each class has one name in the index.

    ``probes``, if given, gets what each load found, for ``settled_from_cache`` to check again:
    module -> None (no file), or [its file, that file's real path, the SHA-256 of its bytes
    (None for a scanned file's twin, whose bytes the run's inputs already cover)]."""
    roots: list[Path] | None = None
    scanned: dict[str, FileResult] | None = None  # real path -> result, made on the first load

    def package_roots() -> list[Path]:
        found: dict[str, None] = {}  # in first-seen order
        real_folder = _RealFolders()
        done: set[tuple[str, int]] = set()
        for result in results:
            # Files of one folder at one depth share a root, unless a file is a link of its own.
            filename = result.filename
            if not os.path.islink(filename):
                key = (os.path.dirname(filename), result.module.count(".")
                       + (os.path.basename(filename) == "__init__.py"))
                if key in done:
                    continue
                done.add(key)
            root = package_root(result, real_folder)
            if root is not None:
                found.setdefault(root)
        return [Path(r) for r in found]

    real_folder = _RealFolders()

    def scanned_file(candidate: Path) -> FileResult | None:
        nonlocal scanned
        if scanned is None:
            scanned = {real_folder.file(result.filename): result for result in results}
        return scanned.get(real_folder.file(str(candidate)))

    def load(module: str) -> FileResult | None:
        nonlocal roots
        if roots is None:
            roots = package_roots()
        candidate = module_file(roots, module)
        if candidate is None:
            if probes is not None:
                probes[module] = None
            return None
        twin = scanned_file(candidate)
        if probes is not None:
            probes[module] = [str(candidate), real_folder.file(str(candidate)),
                              None if twin is not None or cache is None else cache.content_digest(candidate) or ""]
        if twin is not None:
            # (Named by the scanned file's path, as the index keys files: a scan through a symlinked
            # folder names them by the link, the candidate by the real folder.)
            prefix = len(twin.module) + 1
            return FileResult(twin.filename, module, aliases={
                **twin.aliases, **{c.qualname[prefix:]: c.qualname for c in twin.classes}})
        # Only the class summary is needed: no rules, and cached like any file.
        cached = cache.get(candidate, summary_only=True) if cache is not None else None
        if cached is not None:
            return cached
        result = summaries.take(module, str(candidate)) if summaries is not None else None
        if result is None:
            result = summarize_module(candidate, module)
        if cache is not None and not result.internal_error:
            cache.put(candidate, result, summary_only=True)
        return result

    return load


class ModuleSummaries:
    """Class summaries of modules outside the scanned files, made in the process pool while
    files are still being analysed. The class index asks for such modules once every file
    is in (a base class in `transformers.modeling_utils` when `models/` is scanned), and
    summarising them then, one after another, keeps a core idle at the end of the run.

    Which modules it will ask for is found by asking a ``ClassIndex`` of the results seen so far
    the questions settling will ask: those the findings' conditions pose (``Finding.requires``: is
    a class a module, a DataParallel subclass) and the lookups of the classes files wrap or build
    as layers. Where that index would load a module, the module is summarised in the pool instead
    and the question is asked again once its summary is in (``index.Pending``). A
    guess costs only pool time: ``module_loader`` takes a summary only for the module and file it
    resolves itself, and a module not guessed is summarised then, as before. Runs in the parent
    process while the workers are busy, so the file system is asked only for a guess."""

    def __init__(self, scanned: Sequence[str], cache=None) -> None:
        self._scanned = scanned  # the paths of the files being analysed
        self._scanned_real: set[str] | None = None  # their real paths, made on the first guess
        self._cache = cache
        self._real_folder = _RealFolders()
        self._results: list[FileResult] = []  # of the scanned files, whose roots module_loader searches
        self._roots: dict[str, None] = {}  # their package roots, first seen first
        self._rooted = 0  # how many of ``_results`` gave their root
        self._root_of: dict[tuple[str, int], str | None] = {}  # (folder, dots in module) -> root
        # The results and summaries seen so far. Its loader reaches this object through a weak
        # reference: a cycle between the two would outlive the run, since start-up's objects, this
        # one among them, are frozen out of the cyclic collector (see dpcheck.startup), and with it
        # every result this index holds, until the interpreter's own teardown.
        load = weakref.WeakMethod(self._load)
        self._index = ClassIndex((), lambda module: load()(module))
        self._asked: set[tuple[str, str]] = set()  # (question, name) asked of the index
        # Module being summarised -> the questions waiting for it.
        self._waiting: dict[str, list[tuple[Callable[[str], object], str]]] = {}
        self._ready: dict[str, tuple[str, FileResult]] = {}  # module -> (its file, its summary)
        self._asking: tuple | None = None  # (question, name, requests) being asked
        # Settling looks up every class the run's files build and call (``ClassIndex.passed``, for a
        # finding's ``unpassed:`` advice condition): once a finding carries one, so does the guess.
        self._asks_callers = False

    def analysed(self, results: Sequence[FileResult]) -> list[tuple[str, str]]:
        """Take scanned files' results; returns the (module, file) summaries to make now."""
        requests: list[tuple[str, str]] = []
        self._results.extend(results)
        for result in results:
            self._index.add(result)
        index = self._index
        for result in results:
            for finding in result.findings:
                for names in finding.requires:
                    for name in names:
                        kind, _, rest = name.partition(":")
                        if not rest or kind == "unknown" and ":" not in rest:
                            self._ask(index.is_module, name, requests)  # `Base`, `unknown:Base`
                        elif kind == "dp" and ":" not in rest:
                            self._ask(index.is_dataparallel, rest, requests)
                        elif f"{kind}:" == PARAMETER_PROPERTY_CONDITION:
                            self._ask(index.parameter_property, rest, requests)
                        elif f"{kind}:" == FORWARD_FLAG_CONDITION:
                            self._ask(index.forward_flag, rest, requests)
                        elif f"{kind}:" == PARALLEL_HELPER_CONDITION:
                            self._ask(index.parallel_helper, rest, requests)
                if not self._asks_callers and any(c.startswith(UNPASSED_CONDITION) for c in finding.advice_if):
                    self._asks_callers = True
                    for seen in self._results:  # (this result's own callees are asked below)
                        if seen is not result:
                            self._ask_callers(seen, requests)
            self._ask_layers(result, requests)
        return requests

    def _ask_layers(self, result: FileResult, requests: list[tuple[str, str]]) -> None:
        """Ask what settling looks up of every class a file (or a module summarised) wraps or builds
        as a layer (``gathered``, ``offline``): in transformers, the layers of `activations`,
        `pytorch_utils`, ...; and, once needed, of every class it builds and calls."""
        for name in (*result.wrapped, *result.submodules):
            self._ask(self._index.lookup, name, requests)
        if self._asks_callers:
            self._ask_callers(result, requests)

    def _ask_callers(self, result: FileResult, requests: list[tuple[str, str]]) -> None:
        for name in result.module_calls:
            self._ask(self._index.lookup, name, requests)

    def summarised(self, value: tuple[str, str, FileResult]) -> list[tuple[str, str]]:
        """Take a summary made in the pool; returns the further summaries it leads to."""
        module, path, result = value
        self._ready[module] = (path, result)
        self._index.add(result)
        requests: list[tuple[str, str]] = []
        for question, name in self._waiting.pop(module, ()):
            self._ask(question, name, requests, again=True)
        self._ask_layers(result, requests)  # (settling indexes a summary's layers and calls too)
        return requests

    def take(self, module: str, path: str) -> FileResult | None:
        """The summary of ``module`` made from the file ``path``, if the pool made that one."""
        ready = self._ready.get(module)
        return ready[1] if ready is not None and ready[0] == path else None

    def _ask(self, question: Callable[[str], object], name: str, requests: list[tuple[str, str]],
             again: bool = False) -> None:
        """Ask the index ``question(name)`` (once, unless ``again``: a summary it waited for is in);
        the modules the index would load to answer go to ``requests``."""
        key = (question.__name__, name)
        if key in self._asked and not again:
            return
        self._asked.add(key)
        self._asking = (question, name, requests)
        try:
            question(name)
        except Pending:
            pass  # asked again when the module's summary is in
        except Exception:  # noqa: BLE001 - a guess must never end the run: the index decides after the pool
            pass
        finally:
            self._asking = None

    def _load(self, module: str) -> FileResult | None:
        """The guessing index's ``load_module``: a cached summary, or none (no such file outside
        the scanned ones), or ``Pending`` while the pool summarises it."""
        question, name, requests = self._asking
        if module in self._waiting:
            self._waiting[module].append((question, name))
            raise Pending(module)
        path = self._file_of(module)
        if path is None:
            return None
        cached = self._cache.get(Path(path), summary_only=True) if self._cache is not None else None
        if cached is not None:  # module_loader will read it from the cache too
            return cached
        self._waiting[module] = [(question, name)]
        requests.append((module, path))
        raise Pending(module)

    def _file_of(self, module: str) -> str | None:
        """The file module_loader would summarise for ``module`` (with the roots seen so far),
        or None when there is none or it is one of the scanned files."""
        for result in self._results[self._rooted:]:
            # Files of one folder share a root: one package_root per folder and depth.
            key = (os.path.dirname(result.filename), result.module.count(".")
                   + (os.path.basename(result.filename) == "__init__.py"))
            if key not in self._root_of:
                self._root_of[key] = package_root(result, self._real_folder)
            root = self._root_of[key]
            if root is not None:
                self._roots.setdefault(root)
        self._rooted = len(self._results)
        found = module_file(list(self._roots), module)
        if found is None:
            return None
        if self._scanned_real is None:
            # Real folders only (a link to one scanned file is not seen: a wasted guess at worst).
            real_folders: dict[str, str] = {}
            self._scanned_real = set()
            for path in self._scanned:
                folder, file_name = os.path.split(path)
                if folder not in real_folders:
                    real_folders[folder] = self._real_folder(os.path.abspath(folder))
                self._scanned_real.add(os.path.join(real_folders[folder], file_name))
        return None if str(found) in self._scanned_real else str(found)


def settle(results: Sequence[FileResult], per_file_ignores=None, cache=None,
           summaries: ModuleSummaries | None = None, probes: dict | None = None) -> RunResult:
    """Keep the findings whose cross-file conditions hold; apply per-file ignores. ``probes``:
    see ``module_loader``. The cyclic collector is paused meanwhile: the run's results are all
    alive, and each collection it would start walks them again (a fifth of settling's CPU on
    transformers `models/`); settling makes no cyclic garbage of its own."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _settle(results, per_file_ignores, cache, summaries, probes)
    finally:
        if collecting:
            gc.enable()


def _settle(results: Sequence[FileResult], per_file_ignores, cache, summaries: ModuleSummaries | None,
            probes: dict | None) -> RunResult:
    index = ClassIndex(results, module_loader(results, cache, summaries, probes))
    run = RunResult(files=len(results), index=index, per_file_ignores=per_file_ignores)
    for result in results:
        run.internal_error |= result.internal_error
        kept, suppressed = run.settle_file(result.filename, result.findings)
        run.findings.extend(kept)
        run.suppressed.extend(suppressed)
    run.findings.sort(key=lambda f: (f.filename, f.cell or 0, f.row, f.col, f.code))
    return run


@record
class RunInputs:
    """What settling a run reads of its scanned files, as one digest (see ``run_inputs``), and
    what checking a kept run's probes again needs: each file's real path and module."""

    digest: str
    reals: list[str]
    modules: list[str]


def run_inputs(paths: Sequence[Path], per_file_ignores: Callable[[str], list[str]], cache) -> RunInputs | None:
    """The inputs of settling ``paths`` (None when a file cannot be read): each file's name as
    reported, real path, dotted module, bytes (``cache.content_digest``) and per-file ignores,
    in order. Same inputs and the same answers to the module loader's probes (``_probes_hold``)
    give the same settled run: each file's result is a function of its name, module and bytes
    (the selection and dpcheck's code are in the cache's key), and the package roots and twins
    the loader finds are a function of the real paths and modules."""
    import hashlib

    inputs = hashlib.sha256()
    real_folder = _RealFolders()
    reals: list[str] = []
    modules: list[str] = []
    for path in paths:
        name = str(path)
        digest = cache.content_digest(path)
        if digest is None:
            return None
        real, module = real_folder.file(name), module_name_for(path)
        reals.append(real)
        modules.append(module)
        inputs.update("\0".join((name, real, module, digest, *per_file_ignores(name), "\n"))
                      .encode("utf-8", "surrogatepass"))
    return RunInputs(inputs.hexdigest(), reals, modules)


def settled_from_cache(inputs: RunInputs, paths: Sequence[Path], per_file_ignores, cache) -> RunResult | None:
    """The run kept by ``keep_settled`` for the same inputs, if every module the class index
    looked for outside the scanned files is found where it was, with the same bytes; else None.
    Such a run has no class index (``--fix`` and ``--add-noqa``, which re-check files against
    it, do not use the cache)."""
    kept = cache.settled(inputs.digest)
    if kept is None:
        return None
    try:
        if not _probes_hold(kept["probes"], inputs, cache):
            return None
        findings = [Finding.from_dict(f) for f in kept["findings"]]
        suppressed = [Finding.from_dict(f) for f in kept["suppressed"]]
    except (KeyError, TypeError, ValueError, AttributeError):
        return None
    return RunResult(findings, suppressed, files=len(paths), cache_hits=len(paths),
                     per_file_ignores=per_file_ignores)


def keep_settled(run: RunResult, inputs: RunInputs, probes: dict, cache) -> None:
    """Keep a settled run for ``settled_from_cache``; a run with an internal error is not kept
    (its files are analysed again next time, like their uncached results)."""
    if run.internal_error:
        return
    cache.put_settled(inputs.digest, [f.to_dict() for f in run.findings], [f.to_dict() for f in run.suppressed],
                      probes)


def _probes_hold(probes: dict, inputs: RunInputs, cache) -> bool:
    """Would ``module_loader`` find what it found when the run was kept: the same file (with the
    same real path and bytes) for each module, or still none?"""
    if not isinstance(probes, dict):
        return False
    if not probes:
        return True
    roots: dict[str, None] = {}  # first seen first, as module_loader orders them
    root_of: dict[tuple[str, int], str | None] = {}
    for real, module in zip(inputs.reals, inputs.modules):
        # Files of one folder at one depth share a root.
        key = (os.path.dirname(real), module.count(".") + (os.path.basename(real) == "__init__.py"))
        if key not in root_of:
            root_of[key] = _root_above(real, module)
        if root_of[key] is not None:
            roots.setdefault(root_of[key])
    found_in = list(roots)
    real_folder = _RealFolders()
    for module, seen in probes.items():
        candidate = module_file(found_in, module)
        if seen is None or candidate is None:
            if seen is not candidate:
                return False
            continue
        path, real, digest = seen
        if str(candidate) != path or real_folder.file(path) != real \
                or digest is not None and cache.content_digest(candidate) != digest:
            return False
    return True


def check_stdin(text: str, display: str, codes: Sequence[str]) -> FileResult:
    """Check ``text`` as the file ``display`` (stdin, or a file's fixed text)."""
    module = module_name_for(Path(display)) if display != "-" else "stdin"
    if display.endswith(NOTEBOOK_SUFFIX):
        from dpcheck.analysis.notebook import analyze_notebook_text  # only runs that meet a notebook pay its import

        return analyze_notebook_text(text, display, _instantiate(codes), module)
    return analyze_source(text, display, _instantiate(codes), module,
                          is_package=Path(display).name == "__init__.py")
