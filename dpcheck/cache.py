"""A result cache like ruff's: per-file results keyed by content, version and selection.

One JSON file per (dpcheck version, selected rules) under the cache folder maps each
checked path to the SHA-256 of its bytes, its dotted module name and its serialized
``FileResult``. A file's result never depends on other files (cross-file facts are
settled after loading, see ``dpcheck.index``), so a change to a base class in another
file is picked up without invalidating its subclasses' entries. Entries that fail to
load or validate are treated as misses, never trusted. JSON, not pickle: a cache
folder that someone else wrote cannot run code.

Beside it, a second, small file keeps the last settled run of the same selection (its
findings after the cross-file phase) with a digest of everything settling read: the
scanned files' names, real paths, modules, contents and per-file ignores, and the modules
outside them that the class index looked for (see ``engine.settled_from_cache``). A run
whose inputs are all unchanged reads that file only; the per-file results are loaded
only when something changed.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Sequence

from dpcheck import __version__
from dpcheck.analysis.file import FileResult, read_bytes
from dpcheck.analysis.names import module_name_for

_FORMAT = 27


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
    def __init__(self, file: Path, entries: dict | None = None) -> None:
        self.file = file
        # The per-file results, read from ``file`` when first needed: a run whose settled run
        # is still valid (``settled``) never reads them.
        self._entries = entries
        self.dirty = False
        self._digests: dict[str, str | None] = {}  # path -> SHA-256 of its bytes, read once per run

    @property
    def settled_file(self) -> Path:
        """Where the last settled run of this selection is kept (see ``settled``)."""
        return self.file.with_name("settled-" + self.file.name.removeprefix("results-"))

    @classmethod
    def open(cls, folder: Path, codes: Sequence[str]) -> "Cache":
        key = _digest(f"{__version__}|{_FORMAT}|{_code_fingerprint()}|{','.join(sorted(codes))}".encode())[:16]
        return cls(Path(folder) / f"results-{key}.json")

    @property
    def entries(self) -> dict:
        if self._entries is None:
            self._entries = {}
            data = self._read(self.file)
            if data is not None and isinstance(data.get("entries"), dict):
                self._entries = data["entries"]
        return self._entries

    @staticmethod
    def _read(file: Path, inputs: str | None = None) -> dict | None:
        """The body of one of this cache's files, if dpcheck of this version and format wrote it
        for these ``inputs`` (see ``settled``). The first line is a header read on its own, so a
        settled run kept for other inputs is never parsed."""
        try:
            with open(file, encoding="utf-8") as handle:
                header = json.loads(handle.readline())
                if not (isinstance(header, dict) and header.get("tool") == "dpcheck"
                        and header.get("version") == __version__ and header.get("format") == _FORMAT
                        and header.get("inputs") == inputs):
                    return None
                body = json.loads(handle.read())
        except (OSError, ValueError, UnicodeDecodeError):
            return None
        return body if isinstance(body, dict) else None

    def content_digest(self, path: Path | str) -> str | None:
        """SHA-256 of the file's bytes (None: it cannot be read), read once per run: the
        settled run's check, the per-file lookups and the writes share it."""
        key = str(path)
        if key not in self._digests:
            try:
                self._digests[key] = _digest(read_bytes(path))
            except OSError:
                self._digests[key] = None
        return self._digests[key]

    def get(self, path: Path, summary_only: bool = False) -> FileResult | None:
        """The cached result for ``path``; ``summary_only`` entries (class summaries of modules
        that were not scanned, no findings) are kept apart from full results."""
        entry = self.entries.get(_key(path, summary_only))
        if not isinstance(entry, dict):
            return None
        digest = self.content_digest(path)
        if digest is None:
            return None
        try:
            if entry["sha256"] != digest or entry["module"] != module_name_for(path) \
                    or entry["result"]["filename"] != str(path):
                return None
            return FileResult.from_dict(entry["result"])
        except (KeyError, TypeError, ValueError):
            return None

    def put(self, path: Path, result: FileResult, summary_only: bool = False) -> None:
        digest = self.content_digest(path)
        if digest is None:
            return
        self.entries[_key(path, summary_only)] = {"sha256": digest, "module": result.module,
                                                 "result": result.to_dict()}
        self.dirty = True

    def settled(self, inputs: str) -> dict | None:
        """The last settled run kept for this selection, if its inputs' digest is ``inputs``:
        ``{"findings", "suppressed", "probes"}`` as ``put_settled`` wrote it (the caller checks
        the probes and reads the findings; anything malformed is a miss)."""
        return self._read(self.settled_file, inputs)

    def put_settled(self, inputs: str, findings: list[dict], suppressed: list[dict], probes: dict) -> None:
        self._write(self.settled_file, {"findings": findings, "suppressed": suppressed, "probes": probes},
                    inputs=inputs)

    def save(self) -> None:
        if self.dirty:
            self._write(self.file, {"entries": self.entries})
            self.dirty = False

    def _write(self, file: Path, body: dict, **header: str) -> None:
        """A header line (tool, version, format and ``header``), then ``body``: JSON each, which
        escapes every newline inside it."""
        # Imported here: tempfile brings shutil, random and the compression modules (8 ms),
        # and a run whose every file was a cache hit writes nothing.
        import tempfile

        try:
            file.parent.mkdir(parents=True, exist_ok=True)
            gitignore = file.parent / ".gitignore"
            if not gitignore.exists():
                gitignore.write_text("# Automatically created by dpcheck.\n*\n")
            fd, tmp = tempfile.mkstemp(dir=file.parent, suffix=".tmp")
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(json.dumps({"tool": "dpcheck", "version": __version__, "format": _FORMAT, **header}))
                handle.write("\n")
                _write_json(handle, body, 2)
            os.replace(tmp, file)
        except OSError:
            pass  # a read-only checkout still gets its findings


def _write_json(handle, value, depth: int) -> None:
    """``json.dump(value, handle)``, with the C encoder: ``json.dump`` encodes in Python (three
    times slower on a large cache), and one ``json.dumps`` of the whole cache would hold all of
    its text at once. Dicts down to ``depth`` are written item by item."""
    if depth and isinstance(value, dict):
        handle.write("{")
        for i, (key, item) in enumerate(value.items()):
            handle.write(f"{',' if i else ''}{json.dumps(key)}:")
            _write_json(handle, item, depth - 1)
        handle.write("}")
    else:
        handle.write(json.dumps(value))
