"""A result cache like ruff's: per-file results keyed by content, version and selection.

One JSON file per (dpcheck version, selected rules) under the cache folder maps each
checked path to the SHA-256 of its bytes, its dotted module name and its serialized
``FileResult``. A file's result never depends on other files (cross-file facts are
settled after loading, see ``dpcheck.index``), so a change to a base class in another
file is picked up without invalidating its subclasses' entries. Entries that fail to
load or validate are treated as misses, never trusted. JSON, not pickle: a cache
folder that someone else wrote cannot run code.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Sequence

from dpcheck import __version__
from dpcheck.analysis.file import FileResult
from dpcheck.analysis.names import module_name_for

_FORMAT = 6


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _code_fingerprint(packages=None) -> str:
    """Size and mtime of dpcheck's own modules, subpackages included (`dpcheck/analysis/`
    holds most of the facts rules read): an edited module in a development install must not
    be served results its previous version computed.

    Only package folders (with an `__init__.py`) are walked: in a source checkout dpcheck's
    ``__path__`` also holds the checkout's root (so that `dpcheck.rules` is found in ../rules),
    and walking that would stat every file of the checkout, its virtual environment and
    benchmark corpora included (most of a cached run's time on a development install)."""
    if packages is None:
        import dpcheck
        import dpcheck.rules

        packages = (dpcheck, dpcheck.rules)
    parts = []
    for package in packages:
        pending = [folder for folder in package.__path__ if os.path.isfile(os.path.join(folder, "__init__.py"))]
        while pending:
            folder = pending.pop()
            for entry in sorted(os.scandir(folder), key=lambda e: e.name):
                if entry.name.endswith(".py"):
                    stat = entry.stat()
                    parts.append(f"{entry.path}:{stat.st_size}:{stat.st_mtime_ns}")
                elif entry.name != "__pycache__" and entry.is_dir() \
                        and os.path.isfile(os.path.join(entry.path, "__init__.py")):
                    pending.append(entry.path)
    return _digest("|".join(parts).encode())[:16]


def _key(path: Path, summary_only: bool) -> str:
    return ("summary:" if summary_only else "") + os.path.abspath(path)


class Cache:
    def __init__(self, file: Path, entries: dict) -> None:
        self.file = file
        self.entries = entries
        self.dirty = False

    @classmethod
    def open(cls, folder: Path, codes: Sequence[str]) -> "Cache":
        key = _digest(f"{__version__}|{_FORMAT}|{_code_fingerprint()}|{','.join(sorted(codes))}".encode())[:16]
        file = Path(folder) / f"results-{key}.json"
        entries: dict = {}
        try:
            data = json.loads(file.read_text(encoding="utf-8"))
            if isinstance(data, dict) and data.get("tool") == "dpcheck" \
                    and data.get("version") == __version__ and data.get("format") == _FORMAT \
                    and isinstance(data.get("entries"), dict):
                entries = data["entries"]
        except (OSError, ValueError, UnicodeDecodeError):
            entries = {}
        return cls(file, entries)

    def get(self, path: Path, summary_only: bool = False) -> FileResult | None:
        """The cached result for ``path``; ``summary_only`` entries (class summaries of modules
        that were not scanned, no findings) are kept apart from full results."""
        entry = self.entries.get(_key(path, summary_only))
        if not isinstance(entry, dict):
            return None
        try:
            data = path.read_bytes()
        except OSError:
            return None
        try:
            if entry["sha256"] != _digest(data) or entry["module"] != module_name_for(path) \
                    or entry["result"]["filename"] != str(path):
                return None
            return FileResult.from_dict(entry["result"])
        except (KeyError, TypeError, ValueError):
            return None

    def put(self, path: Path, result: FileResult, summary_only: bool = False) -> None:
        try:
            data = path.read_bytes()
        except OSError:
            return
        self.entries[_key(path, summary_only)] = {"sha256": _digest(data), "module": result.module,
                                             "result": result.to_dict()}
        self.dirty = True

    def save(self) -> None:
        if not self.dirty:
            return
        # Imported here: tempfile brings shutil, random and the compression modules (8 ms),
        # and a run whose every file was a cache hit writes nothing.
        import tempfile

        try:
            self.file.parent.mkdir(parents=True, exist_ok=True)
            gitignore = self.file.parent / ".gitignore"
            if not gitignore.exists():
                gitignore.write_text("# Automatically created by dpcheck.\n*\n")
            fd, tmp = tempfile.mkstemp(dir=self.file.parent, suffix=".tmp")
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump({"tool": "dpcheck", "version": __version__, "format": _FORMAT,
                           "entries": self.entries}, handle)
            os.replace(tmp, self.file)
        except OSError:
            pass  # a read-only checkout still gets its findings
