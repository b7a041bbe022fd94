"""Find the Python files to check: walk directories, honour .gitignore and excludes.

Exclude patterns follow ruff: a pattern without a slash matches any path component
(`build`, `*.pyi`); one with a slash is a glob relative to the project root
(`tests/data/**`). Paths named on the command line are checked even when excluded,
unless ``force_exclude`` is set (pre-commit passes files explicitly).
"""

from __future__ import annotations

from functools import cached_property

import fnmatch
import os
import re
import stat
import sys
from pathlib import Path
from typing import Callable, Iterator

from dpcheck.record import record

DEFAULT_EXCLUDE = (".git", ".hg", ".svn", ".venv", "venv", ".env", "env", "build", "dist",
                   "__pycache__", "node_modules", ".mypy_cache", ".pytest_cache", ".ruff_cache",
                   ".tox", ".nox", ".eggs", "site-packages", ".dpcheck_cache", "__pypackages__")
PYTHON_SUFFIXES = (".py", ".pyi", ".ipynb")  # notebooks are checked cell by cell


def _glob_to_regex(pattern: str) -> str:
    """A gitignore-style glob (`*`, `?`, `[...]`, `**`) as a regex over '/'-separated paths."""
    out, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("/**", i) and i + 3 == len(pattern):
            out.append("/.*")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif c == "*":
            out.append("[^/]*")
            i += 1
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[":
            end = pattern.find("]", i + 1)
            if end == -1:
                out.append(re.escape(c))
                i += 1
            else:
                body = pattern[i + 1:end].replace("\\", "\\\\")
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append(f"[{body}]")
                i = end + 1
        elif c == "\\" and i + 1 < len(pattern):
            out.append(re.escape(pattern[i + 1]))
            i += 2
        else:
            out.append(re.escape(c))
            i += 1
    return "".join(out)


@record(frozen=True)
class IgnoreRule:
    """One pattern line of a .gitignore file, compiled."""

    regex: re.Pattern
    negated: bool
    dir_only: bool
    anchored: bool


class GitIgnore:
    """The rules of one .gitignore file, matched against paths relative to its folder."""

    def __init__(self, base: Path, lines: list[str]) -> None:
        self.base = base
        self.rules: list[IgnoreRule] = []
        for raw in lines:
            line = raw.rstrip("\n")
            if not line.strip() or line.startswith("#"):
                continue
            line = line.rstrip() if not line.endswith("\\ ") else line
            negated = line.startswith("!")
            if negated:
                line = line[1:]
            if line.startswith("\\"):
                line = line[1:]
            dir_only = line.endswith("/")
            line = line.rstrip("/")
            anchored = "/" in line
            line = line.lstrip("/")
            if not line:
                continue
            self.rules.append(IgnoreRule(re.compile(_glob_to_regex(line) + r"\Z"), negated,
                                         dir_only, anchored))

    @classmethod
    def load(cls, folder: Path) -> "GitIgnore | None":
        path = folder / ".gitignore"
        try:
            return cls(folder, path.read_text(encoding="utf-8", errors="replace").splitlines())
        except OSError:
            return None

    @cached_property
    def resolved_base(self) -> str:
        return os.path.realpath(self.base)

    @cached_property
    def _base_prefix(self) -> str:
        base = self.resolved_base
        return base if base.endswith("/") else base + "/"

    def relative(self, real: str) -> str | None:
        """``real`` (a real path) relative to this file's folder, or None outside it."""
        return _relative_text(real, self.resolved_base, self._base_prefix)

    def verdict(self, rel: str, is_dir: bool) -> bool | None:
        """True ignored, False re-included, None no rule matched."""
        result = None
        name = rel.rsplit("/", 1)[-1]
        for rule in self.rules:
            if rule.dir_only and not is_dir:
                continue
            subject = rel if rule.anchored else name
            if rule.regex.match(subject):
                result = not rule.negated
        return result


class Excluder:
    def __init__(self, root: Path, patterns: list[str]) -> None:
        self.root = root
        root_text = str(root)
        self._root_text = root_text
        self._root_prefix = root_text if root_text.endswith("/") else root_text + "/"
        self.name_patterns = [p.rstrip("/") for p in patterns if "/" not in p.rstrip("/")]
        self._path_globs = [p for p in patterns if "/" in p.rstrip("/")]

    # Compiled when first matched: a run that only checks the files it was given never is.
    @cached_property
    def _name_regex(self) -> re.Pattern | None:
        """One regex for every name pattern: the same matches as fnmatchcase over each of
        them, in one call per walked entry."""
        return re.compile("|".join(fnmatch.translate(p) for p in self.name_patterns)) if self.name_patterns else None

    @cached_property
    def path_patterns(self) -> list[re.Pattern]:
        # A pattern names the path itself, not what lies under it: a folder it names is never
        # entered by a walk from above, and a folder named on the command line below it is
        # walked like any other (ruff does the same; --force-exclude checks the folders above).
        return [re.compile(_glob_to_regex(p.strip("/").removeprefix("./")) + r"\Z") for p in self._path_globs]

    def excluded(self, path: Path, real: Path | None = None) -> bool:
        """``real``: the real path of ``path`` when the caller knows it already (a folder walk
        joins names onto its folder's real path: no realpath, a system call per component)."""
        return self.excluded_text(path.name, str(path), None if real is None else str(real))

    def excluded_text(self, name: str, path: str, real: str | None = None) -> bool:
        """``excluded`` over plain strings (the walk's hot path): ``path`` as ``str(Path)``
        writes it, ``name`` its last component, ``real`` its real path if known."""
        if self._name_regex is not None and self._name_regex.match(name):
            return True
        if not self.path_patterns:
            return False
        rel = _relative_text(real if real is not None else os.path.realpath(path),
                             self._root_text, self._root_prefix)
        if rel is None:
            rel = path
        return any(p.match(rel) for p in self.path_patterns)

    def excluded_anywhere(self, path: Path) -> bool:
        """For explicit paths under --force-exclude: is it or any parent folder excluded?"""
        if self.excluded(path):
            return True
        resolved = _real(path)
        for parent in resolved.parents:
            if parent == self.root or self.root not in parent.parents:
                break
            if self.excluded(parent):
                return True
        return False


def _relative_text(real: str, base: str, base_prefix: str) -> str | None:
    """``Path(real).relative_to(base).as_posix()`` for normalised absolute paths (as
    realpath returns them), or None where ``real`` is not inside ``base``."""
    if real.startswith(base_prefix):
        return real[len(base_prefix):] or "."
    if real == base:
        return "."
    return None


def warn_on_stderr(message: str) -> None:
    sys.stderr.write(f"warning: {message}\n")


def _real(path: Path) -> Path:
    """The real path; unlike ``Path.resolve`` (Python 3.11), never raises on a symlink loop."""
    return Path(os.path.realpath(path))


def _is_regular_file(path: Path) -> bool:
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def discover(paths: list[Path], root: Path, exclude: list[str], force_exclude: bool = False,
             respect_gitignore: bool = True,
             excluder_for: Callable[[Path], Excluder] | None = None,
             warn: Callable[[str], None] = warn_on_stderr) -> Iterator[Path]:
    """Yield the files to check, each once, in a stable order.

    ``excluder_for(folder)``, when given, decides the excludes for the entries of each
    folder (the closest configuration file's, see ``dpcheck.config.Resolver``); else
    ``exclude`` relative to ``root`` applies everywhere. What cannot be walked (an
    unreadable folder, a symlink loop, a FIFO or device named on the command line) is
    passed to ``warn`` and skipped: it never stops the walk, and nothing but a regular
    file is opened."""
    fixed = Excluder(_real(root), exclude)
    seen: set[str] = set()  # real paths, as strings
    visited: set[str] = set()
    for path in paths:
        excluder = excluder_for(path.parent) if excluder_for else fixed
        if path.is_dir():
            if force_exclude and excluder.excluded_anywhere(path):
                continue
            stack = _gitignores_above(path) if respect_gitignore else []
            yield from _walk(path, excluder, stack, respect_gitignore, seen, visited, warn, excluder_for)
        else:
            if force_exclude and (excluder.excluded_anywhere(path) or (
                    respect_gitignore and _ignored_by_parents(path))):
                continue
            if not _is_regular_file(path):
                warn(f"{path}: not a regular file (a FIFO, device or broken link); skipped")
                continue
            key = os.path.realpath(path)
            if key not in seen:
                seen.add(key)
                yield path


def _gitignores_above(folder: Path) -> list[GitIgnore]:
    """.gitignore files of the folders above ``folder``, inside its git repository only."""
    cur = _real(folder)
    if (cur / ".git").exists():
        return []
    chain: list[Path] = []
    for parent in cur.parents:
        chain.append(parent)
        if (parent / ".git").exists():
            break
    else:
        return []  # not in a repository: like git, honour only the .gitignore files we walk into
    return [g for g in (GitIgnore.load(f) for f in reversed(chain)) if g]


def _ignored_by_parents(path: Path) -> bool:
    resolved = _real(path)
    stack = _gitignores_above(resolved.parent) + [g for g in [GitIgnore.load(resolved.parent)] if g]
    return _is_ignored(str(resolved), False, stack)


def _is_ignored(real: str, is_dir: bool, stack: list[GitIgnore]) -> bool:
    """``real``: the entry's real path."""
    result = False
    for ignore in stack:
        rel = ignore.relative(real)
        if rel is None:
            continue
        verdict = ignore.verdict(rel, is_dir)
        if verdict is not None:
            result = verdict
    return result


@record
class _Folder:
    """A folder being walked: its sorted entries still to visit, and the excludes and
    .gitignore rules in force there. Paths are strings: ``path`` as ``str(Path)`` writes
    the folder ('' for the working folder), ``resolved`` its real path."""

    path: str
    resolved: str
    excluder: Excluder
    stack: list[GitIgnore]
    entries: Iterator[os.DirEntry]


def _join(folder: str, name: str) -> str:
    """``str(Path(folder) / name)`` for a folder written as ``str(Path)`` writes it."""
    if folder == ".":
        return name
    return folder + name if folder.endswith("/") else f"{folder}/{name}"


def _walk(top: Path, excluder: Excluder, stack: list[GitIgnore], respect_gitignore: bool,
          seen: set[str], visited: set[str], warn: Callable[[str], None],
          excluder_for: Callable[[Path | str], Excluder] | None = None) -> Iterator[Path]:
    """Depth first in name order, with an explicit stack (no recursion limit on deep trees).
    Each real folder is entered once: a symlink loop (`sub/loop -> ..`) ends there. Paths
    are kept as strings (a Path per entry costs more than the rest of the walk); only the
    files yielded become Paths."""

    def enter(folder: str, resolved: str, excluder: Excluder, stack: list[GitIgnore]) -> _Folder | None:
        if resolved in visited:
            return None
        visited.add(resolved)
        if excluder_for is not None:
            excluder = excluder_for(folder)
        if respect_gitignore:
            own = GitIgnore.load(Path(folder))
            if own:
                stack = [*stack, own]
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError as exc:
            warn(f"{folder}: cannot read folder: {exc.strerror or exc}; skipped")
            return None
        return _Folder(folder, resolved, excluder, stack, iter(entries))

    # Resolve each folder once; entries inside it are resolved by joining their names.
    top_text = str(top)
    first = enter(top_text, os.path.realpath(top_text), excluder, stack)
    frames = [first] if first else []
    while frames:
        frame = frames[-1]
        entry = next(frame.entries, None)
        if entry is None:
            frames.pop()
            continue
        name = entry.name
        path = _join(frame.path, name)
        try:
            is_dir = entry.is_dir()
            is_link = entry.is_symlink()
        except OSError:  # a symlink loop (`a -> b -> a`): neither a folder nor a file
            continue
        real = _join(frame.resolved, name)  # the entry's real path, unless it is a link
        if frame.excluder.excluded_text(name, path, None if is_link else real):
            continue
        if respect_gitignore and frame.stack and _is_ignored(real, is_dir, frame.stack):
            continue
        if is_dir:
            inner = enter(path, os.path.realpath(path) if is_link else real, frame.excluder, frame.stack)
            if inner:
                frames.append(inner)
        elif name.endswith(PYTHON_SUFFIXES) and _is_file(entry):
            if real not in seen:
                seen.add(real)
                yield Path(path)


def _is_file(entry: os.DirEntry) -> bool:
    """A regular file (after links): never a FIFO, socket or device, which could block a read."""
    try:
        return entry.is_file()
    except OSError:
        return False
