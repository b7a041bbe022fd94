"""Jupyter notebooks, checked cell by cell like ruff does.

The code cells are joined into one virtual Python source (IPython magics and shell
escapes blanked out so it parses), which is analysed like any file; each finding is
then mapped back to its cell (1-based, counting every cell of the notebook, as ruff
and Jupyter number them) and its row inside the cell. Columns are unchanged: a cell's
lines are copied into the virtual source as they are.

``--fix`` (``dpcheck.fixes.notebook``) applies edits to the cells' own text and writes
back only the edited cells' ``source``.
"""

from __future__ import annotations

import ast
import re
import warnings
from collections.abc import Sequence
from pathlib import Path

from dpcheck.analysis.source import split_lines
from dpcheck.constants import NOTEBOOK_SUFFIX, SYNTAX_ERROR
from dpcheck.findings import Edit, Finding
from dpcheck.record import record, replace

# A line IPython rewrites before Python sees it: `%magic`, `!shell`, `?obj`, `obj?`,
# `x = !cmd`, `x = %magic`.
_MAGIC_LINE = re.compile(r"^\s*(?:[%!?]|[\w.]+\s*=\s*[%!])|^[^#'\"]*\?\s*$")
# Cell magics whose body is still Python; any other `%%` cell (bash, html, ...) is skipped.
_PYTHON_CELL_MAGICS = ("%%time", "%%timeit", "%%capture", "%%prun", "%%debug")


def is_notebook(path: Path | str) -> bool:
    return str(path).endswith(NOTEBOOK_SUFFIX)


class NotebookError(ValueError):
    """The file is not a notebook dpcheck can read (not JSON, or not nbformat's shape)."""


@record
class CodeCell:
    number: int  # 1-based position among all cells
    text: str  # the cell's source as written
    first_row: int  # its first row in the virtual source


def _cell_text(source) -> str:
    if isinstance(source, str):
        return source
    if isinstance(source, list) and all(isinstance(s, str) for s in source):
        return "".join(source)
    raise NotebookError("a cell's `source` is neither a string nor a list of strings")


def load_cells(raw: str) -> tuple[dict, list[tuple[int, str]]]:
    """The notebook's JSON and its code cells as (1-based cell number, source text)."""
    import json  # here: most runs read no notebook

    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise NotebookError(f"not valid JSON: {exc}") from None
    cells = data.get("cells") if isinstance(data, dict) else None
    if not isinstance(cells, list):
        raise NotebookError("no `cells` list: not a Jupyter notebook (nbformat 4)")
    code = []
    for number, cell in enumerate(cells, start=1):
        if isinstance(cell, dict) and cell.get("cell_type") == "code":
            code.append((number, _cell_text(cell.get("source", ""))))
    return data, code


def python_lines(text: str) -> list[str]:
    """The cell's lines as Python: IPython-only lines blanked to `pass` at their indent (so
    a block whose only statement was a magic still parses), same number of lines."""
    lines = split_lines(text)
    if lines and lines[0].startswith("%%"):
        if not lines[0].split()[0] in _PYTHON_CELL_MAGICS:
            return [""] * len(lines)  # another language: nothing to check
        lines = ["", *lines[1:]]
    if not any(_MAGIC_LINE.match(line) for line in lines):
        return lines
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse("\n".join(lines))
        return lines  # it is Python as written (`a % b` on a continuation line, say)
    except (SyntaxError, ValueError):
        pass
    out = []
    for line in lines:
        if _MAGIC_LINE.match(line):
            indent = line[:len(line) - len(line.lstrip())]
            out.append(f"{indent}pass")
        else:
            out.append(line)
    return out


@record
class VirtualSource:
    """The code cells joined into one Python text, and the way back to cells."""

    text: str
    cells: list[CodeCell]

    @classmethod
    def build(cls, code_cells: Sequence[tuple[int, str]]) -> VirtualSource:
        parts: list[str] = []
        cells: list[CodeCell] = []
        row = 1
        for number, text in code_cells:
            lines = python_lines(text)
            cells.append(CodeCell(number, text, row))
            parts.extend(lines)
            row += len(lines)
        return cls("".join(line + "\n" for line in parts), cells)

    def locate(self, row: int) -> tuple[int, int]:
        """(cell number, row in the cell) of a virtual row."""
        owner = self.cells[0]
        for cell in self.cells:
            if cell.first_row > row:
                break
            owner = cell
        return owner.number, row - owner.first_row + 1

    def row_of(self, cell_number: int, row: int) -> int:
        """The virtual row of ``row`` in cell ``cell_number``."""
        cell = next(c for c in self.cells if c.number == cell_number)
        return cell.first_row + row - 1

    def from_cell(self, finding: Finding) -> Finding:
        """``finding`` (cell coordinates) in virtual-source coordinates, its fix edits too."""
        if finding.cell is None:
            return finding
        fix = finding.fix
        if fix is not None and fix.edits:
            fix = replace(fix, edits=tuple(replace(e, row=self.row_of(finding.cell, e.row),
                                                   end_row=self.row_of(finding.cell, e.end_row))
                                           for e in fix.edits))
        noqa = None if finding.noqa_row is None else self.row_of(finding.cell, finding.noqa_row)
        return replace(finding, row=self.row_of(finding.cell, finding.row),
                       end_row=self.row_of(finding.cell, finding.end_row), fix=fix, noqa_row=noqa, cell=None)

    def to_cell(self, finding: Finding) -> Finding:
        cell, row = self.locate(finding.row)
        end_cell, end_row = self.locate(finding.end_row)
        if end_cell != cell:  # cannot happen for a statement; keep the finding inside its cell
            end_row, end_col = row, finding.col
        else:
            end_col = finding.end_col
        fix = finding.fix
        if fix is not None:
            edits = []
            for e in fix.edits:
                (a, r1), (b, r2) = self.locate(e.row), self.locate(e.end_row)
                if a != cell or b != cell:
                    edits = None
                    break
                edits.append(Edit(e.content, r1, e.col, r2, e.end_col))
            fix = None if edits is None else replace(fix, edits=tuple(edits))
        noqa_row = None if finding.noqa_row is None else self.locate(finding.noqa_row)[1]
        return replace(finding, row=row, end_row=end_row, end_col=end_col, fix=fix, noqa_row=noqa_row, cell=cell)


def analyze_notebook(path: Path, display: str, rules, module: str):
    """Check a notebook file's code cells; findings carry their cell. Returns a FileResult."""
    try:
        raw: str | Exception = path.read_text(encoding="utf-8")
    except (UnicodeDecodeError, OSError) as exc:
        raw = exc
    return analyze_notebook_text(raw, display, rules, module)


def analyze_notebook_text(raw: str | Exception, display: str, rules, module: str):
    """Check a notebook given as its JSON text (or the error met reading it)."""
    from dpcheck.analysis.file import FileResult, analyze_source

    try:
        if isinstance(raw, Exception):
            raise raw
        _, code_cells = load_cells(raw)
    except (NotebookError, UnicodeDecodeError, OSError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        result = FileResult(display, module)
        result.findings.append(Finding(SYNTAX_ERROR, f"Notebook cannot be read: {reason}", "error", display,
                                       1, 1, 1, 1, ""))
        return result
    if not code_cells:
        return FileResult(display, module)
    virtual = VirtualSource.build(code_cells)
    result = analyze_source(virtual.text, display, rules, module)
    result.findings = [virtual.to_cell(f) for f in result.findings]
    return result
