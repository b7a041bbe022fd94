"""A source file as the reports see it: lines, columns and comments as Python's parser sees them.

Rows: ``ast`` counts only ``\\n``, ``\\r\\n`` and ``\\r`` as line ends, so the line table
splits on exactly those (``str.splitlines`` also splits on form feeds, U+2028 and other
separators that may sit inside a string or comment, which would shift every later row).

Columns: ``ast`` reports UTF-8 byte offsets; editors, SARIF and ruff's JSON count
characters. The conversion only costs anything on non-ASCII lines.

Comments: ``# noqa`` counts only in a real comment, found with ``tokenize`` (a ``# noqa``
inside a string literal is text). Tokenizing costs about as much as parsing, so it runs
only when a file has a finding and mentions "noqa" at all.
"""

from __future__ import annotations

import ast
import re
from functools import cache, cached_property

from dpcheck.record import record

# `# noqa`, `# noqa: CODE`, `# noqa: CODE, CODE` (ruff's spelling; codes of
# other tools on the same comment are kept and ignored).
_NOQA = r"#\s*noqa(?::\s*(?P<codes>[A-Za-z]+[0-9]+(?:[,\s]+[A-Za-z]+[0-9]+)*))?"
# `# dpcheck: noqa` or `# dpcheck: noqa: CODE,CODE` as a comment on a line of its own.
_FILE_NOQA = r"^#\s*dpcheck\s*:\s*noqa(?::\s*(?P<codes>[A-Za-z]+[0-9]+(?:[,\s]+[A-Za-z]+[0-9]+)*))?\s*$"


@cache
def _noqa_patterns() -> tuple[re.Pattern, re.Pattern]:
    """(line noqa, file noqa), compiled when a file first has a comment that mentions noqa
    (compiling both costs more than a one-file run's analysis of a small file)."""
    return re.compile(_NOQA, re.IGNORECASE), re.compile(_FILE_NOQA, re.IGNORECASE)


ALL_CODES = "*"
# The only line ends Python's tokenizer knows.
_LINE_END = re.compile(r"\r\n|\r|\n")


def _split_codes(text: str | None) -> frozenset[str]:
    if not text:
        return frozenset({ALL_CODES})
    return frozenset(c.upper() for c in re.split(r"[,\s]+", text.strip()) if c)


def split_lines(text: str, keepends: bool = False) -> list[str]:
    """``text`` split into physical lines the way the parser numbers them (``\\n``,
    ``\\r\\n``, ``\\r``); like ``str.splitlines``, a final line end adds no empty line."""
    if not keepends and "\r" not in text:
        lines = text.split("\n")
    else:
        lines, start = [], 0
        for match in _LINE_END.finditer(text):
            lines.append(text[start:match.end() if keepends else match.start()])
            start = match.end()
        lines.append(text[start:])
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def _comments(lines: list[str]) -> dict[int, list[tuple[int, str]]]:
    """Comment tokens by 1-based row: [(0-based character column, text)]."""
    import tokenize  # here: only a file that mentions noqa is tokenized

    feed = iter([line + "\n" for line in lines])
    found: dict[int, list[tuple[int, str]]] = {}
    try:
        for token in tokenize.generate_tokens(lambda: next(feed, "")):
            if token.type == tokenize.COMMENT:
                found.setdefault(token.start[0], []).append((token.start[1], token.string))
    except (tokenize.TokenError, SyntaxError):
        pass  # the comments before the error still count; the file parsed, so this is rare
    return found


@record
class SourceFile:
    """A file's text as reported: its display path and its physical lines."""

    path: str  # as shown in reports
    text: str

    @cached_property
    def lines(self) -> list[str]:
        """The physical lines, split on first use: most files of a library report nothing."""
        return split_lines(self.text)

    def line(self, row: int) -> str:
        """The 1-based physical line ``row``, or '' past the end."""
        return self.lines[row - 1] if 0 < row <= len(self.lines) else ""

    def char_column(self, row: int, byte_col: int) -> int:
        """Convert an ``ast`` byte offset on line ``row`` to a 0-based character column."""
        line = self.line(row)
        if line.isascii():
            return byte_col
        return len(line.encode("utf-8")[:byte_col].decode("utf-8", errors="replace"))

    def position(self, offset: int) -> tuple[int, int]:
        """(1-based row, 0-based character column) of character ``offset`` into the text."""
        row, start = 1, 0
        for match in _LINE_END.finditer(self.text, 0, offset):
            row, start = row + 1, match.end()
        return row, offset - start

    def span(self, node: ast.AST) -> tuple[int, int, int, int]:
        """(row, col, end_row, end_col), rows 1-based, columns 0-based characters."""
        row, end_row = node.lineno, getattr(node, "end_lineno", None) or node.lineno
        col = self.char_column(row, node.col_offset)
        end_col_b = getattr(node, "end_col_offset", None)
        end_col = self.char_column(end_row, end_col_b) if end_col_b is not None else col
        return row, col, end_row, end_col

    @cached_property
    def lowered_text(self) -> str:
        """The text in lower case, for the case-blind directive tests (a copy of the text: made once)."""
        return self.text.lower()

    @cached_property
    def comments(self) -> dict[int, list[tuple[int, str]]]:
        """Real comments (not text in strings) by row; tokenizes on first use."""
        if "noqa" not in self.lowered_text:
            return {}  # the only comments anything here reads are noqa directives
        return _comments(self.lines)

    def noqa_codes(self, row: int) -> frozenset[str] | None:
        """Codes a `# noqa` comment on ``row`` suppresses (ALL_CODES for bare), or None."""
        if "#" not in self.line(row):
            return None
        found: set[str] = set()
        matched = False
        for _, comment in self.comments.get(row, ()):
            match = _noqa_patterns()[0].search(comment)
            if match:
                matched = True
                found |= _split_codes(match.group("codes"))
        return frozenset(found) if matched else None

    @cached_property
    def file_noqa(self) -> frozenset[str]:
        """Codes suppressed for the whole file by `# dpcheck: noqa[: codes]` comment lines."""
        if "dpcheck" not in self.lowered_text:
            return frozenset()
        found: set[str] = set()
        for row, comments in self.comments.items():
            for col, comment in comments:
                if self.line(row)[:col].strip():
                    continue  # after code: a line comment, not a file directive
                match = _noqa_patterns()[1].match(comment.rstrip())
                if match:
                    found |= _split_codes(match.group("codes"))
        return frozenset(found)


def suppressed(code: str, codes: frozenset[str] | None) -> bool:
    return bool(codes) and (ALL_CODES in codes or code in codes)
