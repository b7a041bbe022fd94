"""``--fix`` for Jupyter notebooks: fixes are made concrete on the notebook's virtual
source (its code cells joined, ``dpcheck.analysis.notebook``), mapped back to their cell,
and applied to that cell's own text. The notebook is written back with only the edited
cells' ``source`` changed, in the indent, key order, ASCII escaping and final newline it
was read with, so a diff of the file shows the fix and nothing else.

A fix whose edits leave its finding's cell, or touch an IPython line (a magic that the
virtual source blanks), is not applied; nor, in a cell whose lines share an indent that
IPython strips, one that writes a new line (it would lack the indent).
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from dpcheck.analysis.notebook import NotebookError, VirtualSource, load_cells, python_cell, python_lines
from dpcheck.analysis.source import split_lines
from dpcheck.findings import Finding
from dpcheck.fixes import cst as cstfix
from dpcheck.fixes import text as textedits
from dpcheck.fixes import writer

_READ_ERRORS = (OSError, UnicodeDecodeError, SyntaxError, LookupError, NotebookError)


def _read(path: Path):
    snapshot = writer.read(path)
    data, code_cells = load_cells(snapshot.text)
    return snapshot, data, dict(code_cells)


def _concrete(texts: Mapping[int, str], findings: Sequence[Finding], rules: Mapping) -> list[Finding]:
    """``findings`` (cell coordinates) with offered fixes made concrete, in cell coordinates;
    a fix that cannot stay inside its cell is withdrawn."""
    virtual = VirtualSource.build(sorted(texts.items()))
    done = cstfix.materialise(virtual.text, [virtual.from_cell(f) for f in findings], rules)
    return [_without_magic_edits(texts, virtual.to_cell(f)) for f in done]


def _without_magic_edits(texts: Mapping[int, str], finding: Finding) -> Finding:
    if finding.fix is None or not finding.fix.edits or finding.cell is None:
        return finding
    text = texts[finding.cell]
    original, python = split_lines(text), python_cell(text)
    for edit in finding.fix.edits:
        # A new line the edit writes would lack the indent the cell's lines share.
        if python.offsets and "\n" in edit.content:
            return _withdrawn(finding)
        for row in range(edit.row, edit.end_row + 1):
            if row <= len(original) and original[row - 1][python.offset(row):] != python.lines[row - 1]:
                return _withdrawn(finding)
    return finding


def _withdrawn(finding: Finding) -> Finding:
    from dpcheck.record import replace

    return replace(finding, fix=None)


def materialise(path: Path, findings: Sequence[Finding], rules: Mapping) -> list[Finding]:
    """For output formats that print edits: offered fixes of a notebook made concrete."""
    try:
        _, _, texts = _read(path)
    except _READ_ERRORS:
        return [_withdrawn(f) if f.fix is not None and not f.fix.edits else f for f in findings]
    if not texts:
        return list(findings)
    return _concrete(texts, findings, rules)


def _apply(texts: dict[int, str], candidates: Sequence[Finding]) -> tuple[dict[int, str], list[Finding]]:
    by_cell: dict[int, list[Finding]] = {}
    for finding in candidates:
        by_cell.setdefault(finding.cell, []).append(finding)
    new_texts, applied = dict(texts), []
    for number, group in by_cell.items():
        new_text, chosen = textedits.apply(texts[number], [f.fix.edits for f in group])
        new_texts[number] = new_text
        applied.extend(group[i] for i in chosen)
    return new_texts, applied


def _cells_parse(texts: Mapping[int, str]) -> bool:
    return writer.parses("".join(line + "\n" for number in sorted(texts) for line in python_lines(texts[number])))


def _json_layout(raw: str) -> dict:
    """json.dumps arguments that write the notebook as ``raw`` was written (nbformat uses
    indent 1 and keeps non-ASCII characters; other writers differ)."""
    match = re.match(r"\{\r?\n([ \t]+)\S", raw)
    indent = match.group(1) if match else None
    return {"indent": indent, "ensure_ascii": raw.isascii(),
            "separators": (",", ": ") if indent is not None else (", ", ": ")}


def render(raw: str, data: dict, texts: Mapping[int, str]) -> str:
    """The notebook JSON with the cells' new texts; unchanged cells keep their ``source`` as read."""
    data = copy.deepcopy(data)
    for number, text in texts.items():
        cell = data["cells"][number - 1]
        old = cell.get("source", "")
        if ("".join(old) if isinstance(old, list) else old) != text:
            cell["source"] = text if isinstance(old, str) else split_lines(text, keepends=True)
    newline = "\r\n" if "\r\n" in raw else "\n"
    out = json.dumps(data, **_json_layout(raw))
    if newline != "\n":
        out = out.replace("\n", newline)
    return out + raw[len(raw.rstrip()):]


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def fix_notebook(path: Path, group: list[Finding], rules: Mapping, unsafe: bool, write: bool,
                 reanalyse, outcome) -> list[Finding]:
    """Like ``dpcheck.fixes._fix_one`` for a notebook: fix until stable, write back once."""
    from dpcheck.fixes import MAX_PASSES, applicable

    name = str(path)
    try:
        snapshot, data, texts = _read(path)
    except _READ_ERRORS as exc:
        outcome.problems[name] = f"cannot read the notebook: {getattr(exc, 'strerror', None) or exc}"
        return group
    original, current, applied = dict(texts), group, []
    for _ in range(MAX_PASSES):
        candidates = [f for f in _concrete(texts, [f for f in current if applicable(f, unsafe)], rules)
                      if f.fix is not None and f.fix.edits and f.cell in texts]
        if not candidates:
            break
        new_texts, chosen = _apply(texts, candidates)
        if new_texts == texts or not _cells_parse(new_texts):
            break
        applied.extend(chosen)
        texts = new_texts
        current = reanalyse(name, render(snapshot.text, data, texts))
    if texts == original:
        return group
    new_raw = render(snapshot.text, data, texts)
    if not write:
        outcome.diffs[name] = textedits.unified_diff(snapshot.text, new_raw, name)
        outcome.fixed[name] = applied
        return group
    reason = writer.write_if_writable(snapshot, new_raw, verify=_is_json)
    if reason is not None:
        outcome.problems[name] = reason
        return group
    outcome.fixed[name] = applied
    return current
