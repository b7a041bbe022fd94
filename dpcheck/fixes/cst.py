"""Turn offered fixes into edits with libcst, the concrete syntax tree that keeps every
comment, blank line and format.

Detection runs on the stdlib ``ast`` (fast); a rule that can fix a finding offers a fix
(message and applicability, no edits). Only a file with an offered fix is parsed with
libcst here: the flagged node is found by its span, the rule's ``fix`` rewrites it
through a :class:`FixEditor`, and the difference between the old and the regenerated
text becomes the fix's edits (so an edit covers only what changed).
"""

from __future__ import annotations

import ast
import bisect
import itertools
from typing import Iterator, Mapping, Sequence

import libcst as cst
from libcst.metadata import CodePosition, CodeRange, MetadataWrapper, ParentNodeProvider, PositionProvider

from dpcheck.analysis.devices import followed_input
from dpcheck.findings import Finding, Fix
from dpcheck.fixes import text as textedits
from dpcheck.record import replace

_MISSING = object()

class FixEditor:
    """What a rule's ``fix`` may do: look around the flagged node and replace nodes."""

    def __init__(self, module: cst.Module, node: cst.CSTNode, metadata: Metadata):
        self.module = module
        self.node = node
        self._metadata = metadata
        self._replacements: dict[cst.CSTNode, cst.CSTNode | cst.RemovalSentinel] = {}
        self._imports: list[str] = []

    # --- looking ---------------------------------------------------------------------
    def parent(self, node: cst.CSTNode) -> cst.CSTNode | None:
        return self._metadata.parent(node)

    def ancestors(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        current = self.parent(node)
        while current is not None:
            yield current
            current = self.parent(current)

    def enclosing(self, node: cst.CSTNode, kind: type) -> cst.CSTNode | None:
        return next((a for a in self.ancestors(node) if isinstance(a, kind)), None)

    def node_at(self, row: int, col: int, end_row: int, end_col: int) -> cst.CSTNode | None:
        """The innermost node spanning exactly (row, col)-(end_row, end_col) (0-based columns)."""
        return self._metadata.node_at((row, col, end_row, end_col))

    def code(self, node: cst.CSTNode) -> str:
        return self.module.code_for_node(node)

    def line_of(self, node: cst.CSTNode) -> int:
        return self._metadata.position(node).start.line

    def first_input(self, node: cst.CSTNode, floating: bool = False) -> str | None:
        """The input of the enclosing function that a replica's code should follow
        (:func:`dpcheck.analysis.devices.followed_input`: forward's first tensor argument)."""
        function = self.enclosing(node, cst.FunctionDef)
        if function is None:
            return None
        params = list(function.params.posonly_params) + list(function.params.params)
        return followed_input(function.name.value, [
            (param.name.value, self.code(param.annotation.annotation) if param.annotation else "")
            for param in params], floating)

    # --- changing --------------------------------------------------------------------
    def replace(self, old: cst.CSTNode, new: cst.CSTNode | cst.RemovalSentinel) -> None:
        self._replacements[old] = new

    def touched_rows(self) -> list[tuple[int, int]]:
        """The row ranges the changes may touch: the replaced nodes' lines, and where
        imports go. libcst does not round-trip everything (a form feed at the start of a
        line is lost), so edits outside these rows are its artefacts, never ours."""
        where = [self._metadata.position(n, None) for n in self._replacements]
        rows = [(w.start.line, w.end.line) for w in where if w is not None]
        if any(not self._has_import(s) for s in self._imports):
            rows.append((1, _import_row(self.module)))
        return rows

    def replace_with_code(self, old: cst.CSTNode, expression: str) -> None:
        """Replace an expression node by ``expression``, keeping the old node's parentheses."""
        new = cst.parse_expression(expression)
        if isinstance(old, cst.BaseExpression) and old.lpar:
            new = new.with_changes(lpar=old.lpar, rpar=old.rpar)
        self.replace(old, new)

    def add_import(self, statement: str) -> None:
        """Add a top-level import (``import torch.nn as nn``) unless the file has it already."""
        self._imports.append(statement)

    @property
    def changed(self) -> bool:
        return bool(self._replacements) or any(not self._has_import(s) for s in self._imports)

    def result(self) -> cst.Module:
        module = self._metadata.replaced(self._replacements) if self._replacements else self.module
        missing = [s for s in dict.fromkeys(self._imports) if not self._has_import(s)]
        if missing:
            module = _insert_imports(module, missing)
        return module

    def _has_import(self, statement: str) -> bool:
        wanted = cst.parse_statement(statement)
        return any(stmt.deep_equals(wanted) for stmt in self.module.body if isinstance(stmt, cst.SimpleStatementLine))


class _Replace(cst.CSTTransformer):
    def __init__(self, replacements: Mapping):
        self.replacements = replacements

    def on_leave(self, original_node, updated_node):
        return self.replacements.get(original_node, updated_node)


def _import_row(module: cst.Module) -> int:
    """The first row after the module's leading docstring and imports."""
    position = _import_position(module)
    return len(cst.Module(body=module.body[:position], header=module.header).code.splitlines()) + 1


def _insert_imports(module: cst.Module, statements: Sequence[str]) -> cst.Module:
    """After the docstring, `from __future__` imports and the other top-level imports."""
    body = list(module.body)
    position = _import_position(module)
    new = [cst.parse_statement(s + "\n") for s in statements]
    return module.with_changes(body=body[:position] + new + body[position:])


def _import_position(module: cst.Module) -> int:
    body = list(module.body)
    position = 0
    for index, stmt in enumerate(body):
        if isinstance(stmt, cst.SimpleStatementLine) and all(
                isinstance(s, (cst.Import, cst.ImportFrom)) or (
                    index == 0 and isinstance(s, cst.Expr) and isinstance(s.value, cst.SimpleString))
                for s in stmt.body):
            position = index + 1
        else:
            break
    return position


class Metadata:
    """Positions and parents of a module's nodes, resolved one top-level statement at a
    time when a node in it is first asked about.

    libcst's PositionProvider and ParentNodeProvider over a whole module cost about five
    times its parse; a fix looks at one or two statements. A top-level statement starts a
    line, so its nodes' positions are those of the statement alone (a module of its own)
    moved down by the rows before it: that row comes from ``ast`` (the statement's first
    code row less the comment and blank lines libcst attaches before it) and is checked by
    comparing the statement's code with the source at that row. Anything this cannot place
    (a node outside every statement, a mismatch) is answered from the whole module's
    metadata, as before; the answers are the same either way.
    """

    def __init__(self, module: cst.Module, source: str):
        self.module = module
        self._source = source
        self._line_starts = textedits.line_starts(source)
        self._first_rows: list[int] | None = None  # per top-level statement: its first row (comments included)
        self._positions: dict[cst.CSTNode, CodeRange] = {}
        self._parents: dict[cst.CSTNode, cst.CSTNode] = {}
        self._by_span: dict[tuple[int, int, int, int], cst.CSTNode] = {}
        self._resolved: dict[int, frozenset] = {}  # statement index -> its nodes
        self._last_rows: dict[int, int] = {}  # statement index -> its last row
        self._whole = False

    # --- asking ------------------------------------------------------------------------
    def node_at(self, span: tuple[int, int, int, int]) -> cst.CSTNode | None:
        """The innermost node whose span is ``span`` (row, 0-based col, end row, end col)."""
        if not self._whole:
            if self._statement_at(span[0]) is not None:
                node = self._by_span.get(span)
                if node is not None or span[:2] != (1, 0):  # (1, 0) may be the module itself
                    return node
            self._resolve_whole()
        return self._by_span.get(span)

    def parent(self, node: cst.CSTNode) -> cst.CSTNode | None:
        if node not in self._parents:
            self._find(node)
        return self._parents.get(node)

    def position(self, node: cst.CSTNode, default=_MISSING):
        if node not in self._positions:
            self._find(node)
        if default is _MISSING:
            return self._positions[node]
        return self._positions.get(node, default)

    def replaced(self, replacements: Mapping) -> cst.Module:
        """The module with ``replacements`` made, rebuilding only the statements they are in."""
        if self._whole or any(not any(n in nodes for nodes in self._resolved.values()) for n in replacements):
            return self.module.visit(_Replace(replacements))
        body = list(self.module.body)
        for index, nodes in self._resolved.items():
            if any(n in nodes for n in replacements):
                body[index] = body[index].visit(_Replace(replacements))
        kept = [stmt for stmt in body if not isinstance(stmt, cst.RemovalSentinel)]
        return self.module.with_changes(body=kept)

    # --- resolving ---------------------------------------------------------------------
    def _find(self, node: cst.CSTNode) -> None:
        """Resolve statements until ``node`` is among them (or the whole module)."""
        if self._whole:
            return
        for index in range(len(self.module.body)):
            if index not in self._resolved:
                if not self._resolve(index):
                    break
                if node in self._resolved[index]:
                    return
        self._resolve_whole()

    def _statement_at(self, row: int) -> int | None:
        """The top-level statement (resolved) whose rows hold ``row``; None for the module's
        header and footer, or a statement that could not be resolved alone."""
        if self._first_rows is None:
            self._first_rows = self._statement_rows()
        index = bisect.bisect_right(self._first_rows, row) - 1
        if index < 0 or not self._resolve(index) or row > self._last_rows[index]:
            return None
        return index

    def _statement_rows(self) -> list[int]:
        """Each top-level statement's first row, its attached comment and blank lines
        included, from ``ast``; empty when the two parsers disagree on the statements."""
        try:
            tree = ast.parse(self._source)
        except (SyntaxError, ValueError, MemoryError, RecursionError):
            return []
        rows, position = [], 0
        for stmt in self.module.body:
            count = len(stmt.body) if isinstance(stmt, cst.SimpleStatementLine) else 1
            if position + count > len(tree.body):
                return []
            first = tree.body[position]
            position += count
            row, leading = first.lineno, len(stmt.leading_lines)
            decorators = getattr(first, "decorator_list", None)
            if decorators and getattr(stmt, "decorators", None):
                row = min(d.lineno for d in decorators)
                leading += len(stmt.decorators[0].leading_lines)
            rows.append(row - leading)
        if position != len(tree.body) or any(b <= a for a, b in itertools.pairwise(rows)):
            return []
        return rows

    def _statement_module(self, index: int) -> cst.Module:
        m = self.module
        return cst.Module(body=[m.body[index]], header=(), footer=(), encoding=m.encoding,
                          default_indent=m.default_indent, default_newline=m.default_newline,
                          has_trailing_newline=True)

    def _resolve(self, index: int) -> bool:
        """Resolve statement ``index`` alone; False when its code is not where ``ast`` says."""
        if index in self._resolved:
            return True
        if self._whole:
            return False
        if self._first_rows is None:
            self._first_rows = self._statement_rows()
        if index >= len(self._first_rows):
            return False
        own = self._statement_module(index)
        code = own.code
        shift = self._first_rows[index] - 1
        if shift >= len(self._line_starts) or not self._matches(code, self._line_starts[shift]):
            return False
        wrapper = MetadataWrapper(own, unsafe_skip_copy=True)
        positions = wrapper.resolve(PositionProvider)
        parents = wrapper.resolve(ParentNodeProvider)
        statement = self.module.body[index]
        for node, where in positions.items():
            if node is own:
                continue
            moved = CodeRange(CodePosition(where.start.line + shift, where.start.column),
                              CodePosition(where.end.line + shift, where.end.column))
            self._positions[node] = moved
            self._by_span.setdefault((moved.start.line, moved.start.column, moved.end.line, moved.end.column), node)
        for node, parent in parents.items():
            self._parents[node] = self.module if node is statement else parent
        self._resolved[index] = frozenset(parents)
        self._last_rows[index] = shift + len(textedits.line_starts(code)) - 1
        return True

    def _matches(self, code: str, start: int) -> bool:
        """Whether the source holds ``code`` at ``start`` (the file's last line may lack its newline)."""
        if self._source.startswith(code, start):
            return True
        newline = next((n for n in ("\r\n", "\r", "\n") if code.endswith(n)), "")
        return bool(newline) and self._source[start:] == code[:-len(newline)]

    def _resolve_whole(self) -> None:
        """The whole module's metadata, as libcst gives it; it answers every later question."""
        if self._whole:
            return
        wrapper = MetadataWrapper(self.module, unsafe_skip_copy=True)
        positions = wrapper.resolve(PositionProvider)
        self._parents = dict(wrapper.resolve(ParentNodeProvider))
        self._positions = dict(positions)
        self._by_span = {}
        for node, where in positions.items():  # children come before their parents:
            key = (where.start.line, where.start.column, where.end.line, where.end.column)
            self._by_span.setdefault(key, node)  # keep the innermost node with the span
        self._whole = True


def materialise(source: str, findings: Sequence[Finding], rules: Mapping) -> list[Finding]:
    """``findings`` with each offered fix (a Fix without edits) turned into edits on
    ``source``, or withdrawn (``fix=None``) when the rule makes no change. ``rules`` maps
    codes to rule instances."""
    pending = {id(f) for f in findings if f.fix is not None and not f.fix.edits}
    if not pending:
        return list(findings)
    try:
        module = cst.parse_module(source)
    except Exception:  # libcst cannot parse what ast could (rare): no fix, never a crash
        return [replace(f, fix=None) if id(f) in pending else f for f in findings]
    metadata = Metadata(module, source)
    out = []
    for finding in findings:
        if id(finding) not in pending:
            out.append(finding)
            continue
        rule = rules.get(finding.code)
        edits: tuple = ()
        try:
            node = metadata.node_at((finding.row, finding.col - 1, finding.end_row, finding.end_col - 1))
        except Exception:  # noqa: BLE001 - libcst's metadata failed on this file: no fix, never a crash
            node = None
        if node is not None and rule is not None:
            editor = FixEditor(module, node, metadata)
            try:
                rule.fix(finding, editor)
                if editor.changed:
                    rows = editor.touched_rows()
                    edits = tuple(e for e in textedits.diff(source, editor.result().code)
                                  if any(start <= e.end_row and e.row <= end for start, end in rows))
            except Exception:  # a fixer bug withdraws that fix only
                edits = ()
        out.append(replace(finding, fix=Fix(finding.fix.message, edits, finding.fix.applicability) if edits else None))
    return out
