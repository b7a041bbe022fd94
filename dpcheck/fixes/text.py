"""Text edits on source as the parser sees it.

Python ends a line only at ``\\n``, ``\\r\\n`` or ``\\r``: a form feed or a U+2028 inside a
string is not a line end for ``ast`` (``str.splitlines`` disagrees), so rows here are
counted the parser's way, or an edit lands on the wrong line.
"""

from __future__ import annotations

import bisect
import difflib
import re
from typing import Sequence

from dpcheck.findings import Edit

LINE_END = re.compile(r"\r\n|\r|\n")


def line_starts(text: str) -> list[int]:
    """Offset of the first character of each line (1-based row r starts at index r-1)."""
    return [0] + [m.end() for m in LINE_END.finditer(text)]


def offset(starts: list[int], row: int, col: int) -> int:
    return starts[row - 1] + col


def position(starts: list[int], index: int) -> tuple[int, int]:
    """(1-based row, 0-based character column) of a character offset."""
    row = bisect.bisect_right(starts, index)
    return row, index - starts[row - 1]


def apply(text: str, groups: Sequence[Sequence[Edit]]) -> tuple[str, list[int]]:
    """Apply each group of edits (one fix) whose span overlaps no earlier chosen group.

    Returns the new text and the indexes of the groups applied; overlapping fixes wait
    for the next pass, as in ruff.
    """
    starts = line_starts(text)
    spans = []
    for index, edits in enumerate(groups):
        located = [(offset(starts, e.row, e.col), offset(starts, e.end_row, e.end_col), e.content) for e in edits]
        if located:
            spans.append((min(s for s, _, _ in located), max(e for _, e, _ in located), located, index))
    spans.sort(key=lambda s: (s[0], s[1]))
    chosen, last_end = [], -1
    for span in spans:
        if span[0] > last_end or (span[0] == last_end and span[1] > span[0]):
            chosen.append(span)
            last_end = span[1]
    out = text
    for _, _, located, _ in reversed(chosen):
        for start, end, content in sorted(located, key=lambda e: (e[0], e[1]), reverse=True):
            out = out[:start] + content + out[end:]
    return out, sorted(span[3] for span in chosen)


def diff(old: str, new: str) -> tuple[Edit, ...]:
    """The smallest replacements that turn ``old`` into ``new``: one per changed hunk,
    each trimmed to the characters that differ (so an edit touches only what changed)."""
    if old == new:
        return ()
    old_lines = old.splitlines(keepends=True)
    new_lines = new.splitlines(keepends=True)
    old_starts = [0]
    for line in old_lines:
        old_starts.append(old_starts[-1] + len(line))
    new_starts = [0]
    for line in new_lines:
        new_starts.append(new_starts[-1] + len(line))
    parser_starts = line_starts(old)
    edits = []
    matcher = difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        a_start, a_end = old_starts[i1], old_starts[i2]
        b_start, b_end = new_starts[j1], new_starts[j2]
        # Trim the common prefix and suffix of the hunk's characters.
        while a_start < a_end and b_start < b_end and old[a_start] == new[b_start]:
            a_start += 1
            b_start += 1
        while a_end > a_start and b_end > b_start and old[a_end - 1] == new[b_end - 1]:
            a_end -= 1
            b_end -= 1
        row, col = position(parser_starts, a_start)
        end_row, end_col = position(parser_starts, a_end)
        edits.append(Edit(new[b_start:b_end], row, col, end_row, end_col))
    return tuple(edits)


def unified_diff(old: str, new: str, name: str) -> str:
    return "".join(difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                        f"a/{name}", f"b/{name}"))
