"""Apply fixes: all edits of a file at once, verified, written atomically.

A fixed file is parsed before it replaces the original; if it does not parse, or two
fixes overlap, the file is left untouched. The write goes to a temporary file in the
same folder and is renamed over the original, so a file is never half written.
"""

from __future__ import annotations

import ast
import os
import tempfile
from pathlib import Path
from typing import Sequence

from dpcheck.analysis.file import read_source
from dpcheck.findings import Finding


def applicable(finding: Finding, unsafe: bool) -> bool:
    return finding.fix is not None and (finding.fix.applicability == "safe" or unsafe)


def apply_edits(text: str, findings: Sequence[Finding]) -> tuple[str, list[Finding]]:
    """Apply the non-overlapping fixes of ``findings`` to ``text``; returns (text, applied)."""
    lines = text.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def offset(row: int, col: int) -> int:
        # Edits carry character columns; lines are str, so they index directly.
        return starts[row - 1] + col

    spans = []
    for finding in findings:
        edits = [(offset(e.row, e.col), offset(e.end_row, e.end_col), e.content) for e in finding.fix.edits]
        spans.append((min(s for s, _, _ in edits), max(e for _, e, _ in edits), edits, finding))
    spans.sort(key=lambda s: s[0])
    chosen, last_end = [], -1
    for span in spans:
        if span[0] >= last_end:  # overlapping fixes wait for the next run, like ruff
            chosen.append(span)
            last_end = span[1]
    out = text
    for _, _, edits, _ in reversed(chosen):
        for start, end, content in sorted(edits, reverse=True):
            out = out[:start] + content + out[end:]
    return out, [span[3] for span in chosen]


def fix_file(path: Path, findings: Sequence[Finding]) -> list[Finding]:
    """Fix ``path`` in place; returns the findings whose fixes were applied."""
    text = read_source(path)
    new_text, applied = apply_edits(text, findings)
    if not applied or new_text == text:
        return []
    try:
        ast.parse(new_text)
    except SyntaxError:
        return []
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".dpcheck")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(new_text)
        os.chmod(tmp, path.stat().st_mode & 0o7777)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return applied
