"""Jupyter notebooks, checked cell by cell like ruff does.

The code cells are joined into one virtual Python source (IPython magics and shell
escapes blanked out so it parses), which is analysed like any file; each finding is
then mapped back to its cell (1-based, counting every cell of the notebook, as ruff
and Jupyter number them) and its row inside the cell. Rows never move: a line IPython
rewrites is blanked, never dropped. Columns move only in a cell whose lines share an
indent (IPython strips it; the mapping adds it back).

``--fix`` (``dpcheck.fixes.notebook``) applies edits to the cells' own text and writes
back only the edited cells' ``source``.
"""

from __future__ import annotations

import ast
import re
import warnings
from collections.abc import Sequence
from os.path import commonprefix
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
# Line magics IPython runs without their `%` (automagic, on by default) when a cell is that
# one line: IPython's own line magics, its POSIX shell aliases, and the Jupyter kernel's.
_AUTOMAGICS = frozenset("""
    alias alias_magic autoawait autocall automagic bookmark cat cd colors conda config cp debug dhist dirs
    doctest_mode ed edit env gui hist history killbgscripts ldir lf lk ll load load_ext loadpy logoff logon
    logstart logstate logstop ls lsmagic lx macro magic matplotlib mkdir mv notebook page pastebin pdb pdef
    pdoc pfile pinfo pinfo2 pip popd pprint precision prun psearch psource pushd pwd pycat pylab quickref
    recall rehashx reload_ext rep rerun reset reset_selective rm rmdir run save sc set_env sx system tb time
    timeit unalias unload_ext who who_ls whos xdel xmode
    autosave clear connect_info less man more qtconsole
""".split())
# IPython's split of a line into its leading name and the rest (`IPython.core.splitinput`).
_LEADING_NAME = re.compile(r"\s*%{0,2}([\w.*]*)\s*(.*)")


def is_notebook(path: Path | str) -> bool:
    return str(path).endswith(NOTEBOOK_SUFFIX)


class NotebookError(ValueError):
    """The file is not a notebook dpcheck can read (not JSON, or not nbformat's shape)."""


@record
class CodeCell:
    number: int  # 1-based position among all cells
    text: str  # the cell's source as written
    first_row: int  # its first row in the virtual source
    python: PythonCell  # its lines as they stand in the virtual source


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


@record
class PythonCell:
    """A code cell as the Python IPython runs: one line per line of the cell."""

    lines: list[str]
    # Per line, how many leading characters IPython stripped (the indent every line of the
    # cell shares); empty where nothing was stripped. A column in ``lines[i]`` is that many
    # characters further right in the cell's own line.
    offsets: tuple[int, ...] = ()

    def offset(self, row: int) -> int:
        return self.offsets[row - 1] if self.offsets and 0 < row <= len(self.offsets) else 0


def _shared_indent(lines: list[str], first: int) -> str:
    """The indent every non-blank line shares (IPython 9's ``leading_indent``, a
    ``textwrap.dedent``); "" unless the first non-blank line is indented."""
    if lines[first][:1] not in (" ", "\t"):
        return ""
    shared = lines[first][:len(lines[first]) - len(lines[first].lstrip(" \t"))]
    for line in lines[first + 1:]:
        if line.strip(" \t") and not line.startswith(shared):
            indent = line[:len(line) - len(line.lstrip(" \t"))]
            shared = commonprefix([shared, indent])
            if not shared:
                break
    return shared


def _is_automagic(line: str) -> bool:
    """``line`` would run as a line magic without its `%` (IPython's prefilter checkers: a
    known magic's name, not followed by an assignment)."""
    match = _LEADING_NAME.match(line)
    return match.group(1) in _AUTOMAGICS and not match.group(2).startswith(("=", ","))


def _parses(lines: list[str]) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse("\n".join(lines))
    except (SyntaxError, ValueError):
        return False
    return True


def python_cell(text: str) -> PythonCell:
    """The cell's lines as Python, IPython's static rewriting mirrored without moving a row:
    an indent all lines share is stripped; IPython-only lines (a magic or shell escape, with
    the lines it continues over with `\\`) are blanked, the first to `pass` at its indent (so
    a block whose only statement was a magic still parses); a cell that is one line naming a
    line magic without `%` is blanked like a magic when it is not Python as written."""
    lines = split_lines(text)
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    if first is None:
        return PythonCell(lines)
    offsets: tuple[int, ...] = ()
    indent = _shared_indent(lines, first)
    if indent:
        offsets = tuple(len(indent) if line.startswith(indent) else 0 for line in lines)
        lines = [line[n:] for line, n in zip(lines, offsets)]
    if lines[first].startswith("%%"):
        if not lines[first].split()[0] in _PYTHON_CELL_MAGICS:
            return PythonCell([""] * len(lines), offsets)  # another language: nothing to check
        lines[first] = ""
    # IPython runs a magic without `%` only in a cell of one line (leading blank lines aside).
    automagic = first == len(lines) - 1 and _is_automagic(lines[first])
    if not automagic and not any(_MAGIC_LINE.match(line) for line in lines):
        return PythonCell(lines, offsets)
    if _parses(lines):
        return PythonCell(lines, offsets)  # it is Python as written (`a % b` on a continuation line, say)
    out, continued = [], False
    for i, line in enumerate(lines):
        if continued:
            out.append("")  # the escaped line goes on: its words are no Python
        elif _MAGIC_LINE.match(line) or (automagic and i == first):
            indent = line[:len(line) - len(line.lstrip())]
            out.append(f"{indent}pass")
        else:
            out.append(line)
            continue
        continued = line.endswith("\\")
    return PythonCell(out, offsets)


def python_lines(text: str) -> list[str]:
    """The cell's lines as Python (``python_cell``), same number of lines."""
    return python_cell(text).lines


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
            python = python_cell(text)
            cells.append(CodeCell(number, text, row, python))
            parts.extend(python.lines)
            row += len(python.lines)
        return cls("".join(line + "\n" for line in parts), cells)

    def _owner(self, row: int) -> CodeCell:
        owner = self.cells[0]
        for cell in self.cells:
            if cell.first_row > row:
                break
            owner = cell
        return owner

    def locate(self, row: int) -> tuple[int, int]:
        """(cell number, row in the cell) of a virtual row."""
        owner = self._owner(row)
        return owner.number, row - owner.first_row + 1

    def _cell(self, number: int) -> CodeCell:
        return next(c for c in self.cells if c.number == number)

    def _shift(self, cell_number: int, row: int) -> int:
        """Characters a column of ``row`` in cell ``cell_number`` lies further right in the
        cell's own text than in the virtual source (the cell's stripped indent)."""
        return self._cell(cell_number).python.offset(row)

    def row_of(self, cell_number: int, row: int) -> int:
        """The virtual row of ``row`` in cell ``cell_number``."""
        return self._cell(cell_number).first_row + row - 1

    def from_cell(self, finding: Finding) -> Finding:
        """``finding`` (cell coordinates) in virtual-source coordinates, its fix edits too."""
        if finding.cell is None:
            return finding
        number, fix = finding.cell, finding.fix
        if fix is not None and fix.edits:
            fix = replace(fix, edits=tuple(Edit(e.content, self.row_of(number, e.row),
                                                e.col - self._shift(number, e.row),
                                                self.row_of(number, e.end_row),
                                                e.end_col - self._shift(number, e.end_row))
                                           for e in fix.edits))
        noqa = None if finding.noqa_row is None else self.row_of(number, finding.noqa_row)
        return replace(finding, row=self.row_of(number, finding.row),
                       col=finding.col - self._shift(number, finding.row),
                       end_row=self.row_of(number, finding.end_row),
                       end_col=finding.end_col - self._shift(number, finding.end_row), fix=fix, noqa_row=noqa,
                       cell=None)

    def to_cell(self, finding: Finding) -> Finding:
        owner = self._owner(finding.row)
        cell, row = owner.number, finding.row - owner.first_row + 1
        col = finding.col + owner.python.offset(row)
        end_cell, end_row = self.locate(finding.end_row)
        if end_cell != cell:  # cannot happen for a statement; keep the finding inside its cell
            end_row, end_col = row, col
        else:
            end_col = finding.end_col + owner.python.offset(end_row)
        fix = finding.fix
        if fix is not None:
            edits = []
            for e in fix.edits:
                (a, r1), (b, r2) = self.locate(e.row), self.locate(e.end_row)
                if a != cell or b != cell:
                    edits = None
                    break
                edits.append(Edit(e.content, r1, e.col + owner.python.offset(r1), r2,
                                  e.end_col + owner.python.offset(r2)))
            fix = None if edits is None else replace(fix, edits=tuple(edits))
        noqa_row = None if finding.noqa_row is None else self.locate(finding.noqa_row)[1]
        line_text = finding.line_text
        if owner.python.offsets and line_text:  # an indent was stripped: show the cell's own line
            line_text = split_lines(owner.text)[row - 1]
        return replace(finding, row=row, col=col, end_row=end_row, end_col=end_col, line_text=line_text, fix=fix,
                       noqa_row=noqa_row, cell=cell)


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
