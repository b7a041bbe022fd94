"""A source file as the reports see it: text, lines, and column conversion.

Python's ``ast`` reports columns as UTF-8 byte offsets; editors, SARIF and ruff's
JSON count characters. The conversion only costs anything on non-ASCII lines.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

# `# noqa`, `# noqa: DP101`, `# noqa: DP101, DP102` (ruff's spelling; codes of
# other tools on the same comment are kept and ignored).
_NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Za-z]+[0-9]+(?:[,\s]+[A-Za-z]+[0-9]+)*))?", re.I)
# `# dpcheck: noqa` or `# dpcheck: noqa: DP101,DP102` on a line of its own.
_FILE_NOQA = re.compile(
    r"^\s*#\s*dpcheck\s*:\s*noqa(?::\s*(?P<codes>[A-Za-z]+[0-9]+(?:[,\s]+[A-Za-z]+[0-9]+)*))?\s*$",
    re.I | re.M,
)
ALL_CODES = "*"


def _split_codes(text: str | None) -> frozenset[str]:
    if not text:
        return frozenset({ALL_CODES})
    return frozenset(c.upper() for c in re.split(r"[,\s]+", text.strip()) if c)


@dataclass
class SourceFile:
    path: str  # as shown in reports
    text: str
    lines: list[str] = field(init=False)

    def __post_init__(self) -> None:
        self.lines = self.text.splitlines()

    def line(self, row: int) -> str:
        """The 1-based physical line ``row``, or '' past the end."""
        return self.lines[row - 1] if 0 < row <= len(self.lines) else ""

    def char_column(self, row: int, byte_col: int) -> int:
        """Convert an ``ast`` byte offset on line ``row`` to a 0-based character column."""
        line = self.line(row)
        if line.isascii():
            return byte_col
        return len(line.encode("utf-8")[:byte_col].decode("utf-8", errors="replace"))

    def span(self, node: ast.AST) -> tuple[int, int, int, int]:
        """(row, col, end_row, end_col), rows 1-based, columns 0-based characters."""
        row, end_row = node.lineno, getattr(node, "end_lineno", None) or node.lineno
        col = self.char_column(row, node.col_offset)
        end_col_b = getattr(node, "end_col_offset", None)
        end_col = self.char_column(end_row, end_col_b) if end_col_b is not None else col
        return row, col, end_row, end_col

    def noqa_codes(self, row: int) -> frozenset[str] | None:
        """Codes a `# noqa` comment on ``row`` suppresses (ALL_CODES for bare), or None."""
        line = self.line(row)
        if "#" not in line:
            return None
        match = _NOQA.search(line)
        return _split_codes(match.group("codes")) if match else None

    def file_noqa_codes(self) -> frozenset[str]:
        """Codes suppressed for the whole file by `# dpcheck: noqa[: codes]` lines."""
        if "dpcheck" not in self.text:
            return frozenset()
        found: set[str] = set()
        for match in _FILE_NOQA.finditer(self.text):
            found |= _split_codes(match.group("codes"))
        return frozenset(found)


def suppressed(code: str, codes: frozenset[str] | None) -> bool:
    return bool(codes) and (ALL_CODES in codes or code in codes)
