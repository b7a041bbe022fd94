"""``--add-noqa``: silence every current finding with a ``# noqa: CODE`` comment on its line.

Comments are found with ``tokenize`` (a ``#`` inside a string is not a comment); codes
merge into an existing ``# noqa: ...``; a line that a bare ``# noqa`` already silences
is left alone. A finding on a line where a comment cannot go (inside a multi-line string,
or a line continued with a backslash) is skipped and reported. Files are written with
the same guarantees as ``--fix``.
"""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path
from typing import Sequence

from dpcheck.findings import Finding
from dpcheck.fixes import text as textedits
from dpcheck.fixes import writer

_NOQA = re.compile(r"#\s*noqa(?P<colon>:\s*(?P<codes>[A-Za-z]+[0-9]+(?:[,\s]+[A-Za-z]+[0-9]+)*))?", re.I)


def add_noqa(findings: Sequence[Finding]) -> tuple[int, dict[str, str]]:
    """Returns (directives added or extended, per-file problems)."""
    by_file: dict[str, dict[int, set[str]]] = {}
    for f in findings:
        if f.filename == "-" or f.filename.endswith(".ipynb"):
            continue
        by_file.setdefault(f.filename, {}).setdefault(f.noqa_row or f.row, set()).add(f.code)
    added, problems = 0, {}
    for filename, rows in by_file.items():
        try:
            snapshot = writer.read(Path(filename))
            new_text, count, skipped = _with_noqa(snapshot.text, rows)
        except (OSError, UnicodeDecodeError, SyntaxError, LookupError, tokenize.TokenError) as exc:
            problems[filename] = str(getattr(exc, "strerror", None) or exc)
            continue
        if skipped:
            problems[filename] = f"line(s) {', '.join(map(str, skipped))} cannot carry a comment"
        if new_text == snapshot.text:
            continue
        reason = writer.write_if_writable(snapshot, new_text)
        if reason is not None:
            problems[filename] = reason
            continue
        added += count
    return added, problems


def _with_noqa(text: str, rows: dict[int, set[str]]) -> tuple[str, int, list[int]]:
    comments: dict[int, tokenize.TokenInfo] = {}
    inside_string: set[int] = set()
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type == tokenize.COMMENT:
            comments[token.start[0]] = token
        elif token.type == tokenize.STRING or getattr(tokenize, "FSTRING_MIDDLE", None) == token.type:
            inside_string.update(range(token.start[0], token.end[0]))  # rows a comment can't end
    starts = textedits.line_starts(text)
    edits, count, skipped = [], 0, []
    for row, codes in sorted(rows.items()):
        if row < 1 or row > len(starts):
            continue
        line_end = _line_end(text, starts, row)
        line = text[starts[row - 1]:line_end]
        if row in inside_string or line.rstrip().endswith("\\"):
            skipped.append(row)
            continue
        comment = comments.get(row)
        match = _NOQA.search(comment.string) if comment is not None else None
        if match is not None and not match.group("colon"):
            continue  # a bare `# noqa` silences everything already
        if match is not None:
            existing = [c.upper() for c in re.split(r"[,\s]+", match.group("codes").strip()) if c]
            merged = list(dict.fromkeys(existing + sorted(codes)))
            if merged == existing:
                continue
            col = comment.start[1] + match.start()
            new_comment = f"# noqa: {', '.join(merged)}"
            start = starts[row - 1] + col
            edits.append((start, start + len(match.group(0)), new_comment))
        else:
            stripped = len(line.rstrip(" \t"))
            edits.append((starts[row - 1] + stripped, line_end, f"  # noqa: {', '.join(sorted(codes))}"))
        count += 1
    for start, end, content in sorted(edits, reverse=True):
        text = text[:start] + content + text[end:]
    return text, count, skipped


def _line_end(text: str, starts: list[int], row: int) -> int:
    """Offset of the line break that ends ``row`` (or the end of the text)."""
    end = starts[row] if row < len(starts) else len(text)
    while end > starts[row - 1] and text[end - 1] in "\r\n":
        end -= 1
    return end
