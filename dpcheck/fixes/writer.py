"""Read a file for fixing and write it back without damaging anything but the edits.

Guarantees (each tested): the result is written only if it parses; the write is atomic
(a temporary file in the same folder, renamed over the original) and goes to a
symlink's target, never over the link; the encoding (coding cookie or BOM), line
endings, permissions and owner are kept; a read-only file is skipped with a warning,
as ruff does; a file that changed on disk since it was read is never overwritten; and
a file that cannot be written is reported for that file while the run goes on.
"""

from __future__ import annotations

import ast
import codecs
import io
import os
import stat
import tempfile
import tokenize
import warnings
from collections.abc import Callable
from pathlib import Path

from dpcheck.record import record


class FixWriteError(Exception):
    """The fixed text of one file could not be written (the reason is the message)."""


@record(frozen=True)
class SourceSnapshot:
    path: Path  # as given
    target: Path  # the real file (a symlink's target)
    data: bytes
    encoding: str  # as tokenize detects it: 'utf-8-sig' when the file starts with a BOM
    text: str


def read(path: Path) -> SourceSnapshot:
    """Decode like Python does (BOM or coding cookie, else UTF-8), keeping line endings."""
    target = Path(os.path.realpath(path))
    data = target.read_bytes()
    encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    return SourceSnapshot(path, target, data, encoding, data.decode(encoding))


def encode(snapshot: SourceSnapshot, text: str) -> bytes:
    """``text`` in the file's own encoding; a BOM stays exactly when the file had one."""
    if snapshot.encoding == "utf-8-sig" and not snapshot.data.startswith(codecs.BOM_UTF8):
        return text.encode("utf-8")
    return text.encode(snapshot.encoding)


def parses(text: str) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


def writable_reason(snapshot: SourceSnapshot) -> str | None:
    """Why the file must not be written, or None. A file without any write permission bit
    is read-only, as ruff sees it, even to a user (root) who could write it anyway."""
    try:
        mode = snapshot.target.stat().st_mode
    except OSError as exc:
        return f"cannot stat the file: {exc.strerror or exc}"
    if not mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH) or not os.access(snapshot.target, os.W_OK):
        return "the file is read-only; it was skipped"
    return None


def write(snapshot: SourceSnapshot, text: str, verify: Callable[[str], bool] = parses) -> None:
    """Replace the file's content with ``text``; raises FixWriteError with the reason.
    ``verify`` checks the new text first (a notebook's is JSON, not Python)."""
    if not verify(text):
        raise FixWriteError("the fixed code would not parse; the file was left unchanged")
    try:
        data = encode(snapshot, text)
    except UnicodeEncodeError as exc:
        raise FixWriteError(f"the fix cannot be written in the file's encoding {snapshot.encoding}: {exc}") from None
    target = snapshot.target
    try:
        status = target.stat()
        if target.read_bytes() != snapshot.data:
            raise FixWriteError("the file changed on disk since it was read; it was left unchanged")
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".dpcheck")
    except OSError as exc:
        raise FixWriteError(f"cannot write next to the file: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(tmp, status.st_mode & 0o7777)
        if hasattr(os, "chown") and (status.st_uid, status.st_gid) != (os.getuid(), os.getgid()):
            try:
                os.chown(tmp, status.st_uid, status.st_gid)
            except PermissionError:
                raise FixWriteError("cannot keep the file's owner; it was left unchanged") from None
        os.replace(tmp, target)
    except OSError as exc:
        _discard(tmp)
        raise FixWriteError(f"cannot write the file: {exc.strerror or exc}") from None
    except BaseException:
        _discard(tmp)
        raise


def write_if_writable(snapshot: SourceSnapshot, text: str, verify: Callable[[str], bool] = parses) -> str | None:
    """``write`` where ``writable_reason`` allows it: why the file was not written, or None."""
    reason = writable_reason(snapshot)
    if reason is None:
        try:
            write(snapshot, text, verify)
        except FixWriteError as exc:
            reason = str(exc)
    return reason


def _discard(tmp: str) -> None:
    try:
        os.unlink(tmp)
    except OSError:
        pass
