"""Run the selected rules over files: in parallel, through the cache, then settle the index.

Each file is analysed once, by ``dpcheck.analyze`` (in a worker process when there is
more than a handful of files). Results whose nn.Module status depends on another file
are settled here, once every file's class summary is in (``dpcheck.index``).
"""

from __future__ import annotations

import multiprocessing
import os
import sys
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Sequence

from dpcheck.analysis.file import FileResult, analyze_path, analyze_source
from dpcheck.analysis.index import ClassIndex
from dpcheck.analysis.names import module_name_for
from dpcheck.analysis.notebook import analyze_notebook_text, is_notebook
from dpcheck.constants import INTERNAL_ERROR
from dpcheck.findings import Finding
from dpcheck.registry import matches, rules_by_code
from dpcheck.rule import Rule

# Below this many files a process pool costs more than it saves.
_PARALLEL_MIN_FILES = 16


@dataclass
class RunResult:
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
            if finding.requires and (self.index is None or not self.index.holds(finding)):
                continue
            if finding.code != INTERNAL_ERROR and any(matches(s, finding.code) for s in ignored):
                continue
            (suppressed if finding.suppressed else kept).append(replace(finding, requires=()))
        return kept, suppressed


def _instantiate(codes: Sequence[str]) -> list[Rule]:
    table = rules_by_code()
    return [table[c]() for c in codes]


# In each worker: the selections of this run (code tuples) and their rules, made on first use.
_WORKER_SELECTIONS: tuple[tuple[str, ...], ...] = ()
_WORKER_RULES: dict[int, list[Rule]] = {}


def _worker_init(selections: tuple[tuple[str, ...], ...]) -> None:
    global _WORKER_SELECTIONS
    _WORKER_SELECTIONS = selections
    _WORKER_RULES.clear()


def _worker_analyze(task: tuple[str, str, int]) -> FileResult:
    path, display, selection = task
    rules = _WORKER_RULES.get(selection)
    if rules is None:
        rules = _WORKER_RULES[selection] = _instantiate(_WORKER_SELECTIONS[selection])
    return analyze_path(Path(path), display, rules)


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
        cached = cache.get(path) if cache is not None else None
        if cached is not None:
            results[i] = cached
            hits += 1
        else:
            todo.append(i)
    jobs = jobs or default_jobs()
    tasks = [(str(paths[i]), str(paths[i]), choice[i]) for i in todo]
    if jobs > 1 and len(tasks) >= _PARALLEL_MIN_FILES:
        method = "fork" if sys.platform.startswith("linux") else None
        with ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context(method),
                                 initializer=_worker_init,
                                 initargs=(tuple(s.codes for s in selections),)) as pool:
            chunk = max(1, min(32, len(tasks) // (jobs * 8) or 1))
            fresh = list(pool.map(_worker_analyze, tasks, chunksize=chunk))
    else:
        rules: dict[int, list[Rule]] = {}
        fresh = []
        for path, display, selection in tasks:
            if selection not in rules:
                rules[selection] = _instantiate(selections[selection].codes)
            fresh.append(analyze_path(Path(path), display, rules[selection]))
    for i, result in zip(todo, fresh):
        results[i] = result
        cache = selections[choice[i]].cache
        if cache is not None and not result.internal_error:
            cache.put(paths[i], result)
    return [r for r in results if r is not None], hits


def module_loader(results: Sequence[FileResult], cache=None):
    """Find and summarise modules that were not scanned, from the scanned files' package roots."""
    roots: list[Path] = []
    for result in results:
        path = Path(result.filename)
        depth = result.module.count(".") + (1 if path.name == "__init__.py" else 0)
        root = path.resolve().parents[depth] if depth < len(path.resolve().parents) else None
        if root is not None and root not in roots:
            roots.append(root)

    def load(module: str) -> FileResult | None:
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
    if is_notebook(display):
        return analyze_notebook_text(text, display, _instantiate(codes), module)
    return analyze_source(text, display, _instantiate(codes), module,
                          is_package=Path(display).name == "__init__.py")
