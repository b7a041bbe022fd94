"""Turn offered fixes into edits with libcst, the concrete syntax tree that keeps every
comment, blank line and format.

Detection runs on the stdlib ``ast`` (fast); a rule that can fix a finding offers a fix
(message and applicability, no edits). Only a file with an offered fix is parsed with
libcst here: the flagged node is found by its span, the rule's ``fix`` rewrites it
through a :class:`FixEditor`, and the difference between the old and the regenerated
text becomes the fix's edits (so an edit covers only what changed).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Iterator, Mapping, Sequence

import libcst as cst
from libcst.metadata import MetadataWrapper, ParentNodeProvider, PositionProvider

from dpcheck.findings import Finding, Fix
from dpcheck.fixes import text as textedits


# Argument names that hold integer or boolean tensors: never a source of the activations' dtype.
_INTEGER_NAMES = ("ids", "mask", "label", "index", "idx", "token", "length", "position", "step")


class FixEditor:
    """What a rule's ``fix`` may do: look around the flagged node and replace nodes."""

    def __init__(self, module: cst.Module, node: cst.CSTNode, parents: Mapping, positions: Mapping,
                 by_span: Mapping | None = None):
        self.module = module
        self._by_span = by_span or {}
        self.node = node
        self._parents = parents
        self._positions = positions
        self._replacements: dict[cst.CSTNode, cst.CSTNode | cst.RemovalSentinel] = {}
        self._imports: list[str] = []

    # --- looking ---------------------------------------------------------------------
    def parent(self, node: cst.CSTNode) -> cst.CSTNode | None:
        return self._parents.get(node)

    def ancestors(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        current = self.parent(node)
        while current is not None:
            yield current
            current = self.parent(current)

    def enclosing(self, node: cst.CSTNode, kind: type) -> cst.CSTNode | None:
        return next((a for a in self.ancestors(node) if isinstance(a, kind)), None)

    def node_at(self, row: int, col: int, end_row: int, end_col: int) -> cst.CSTNode | None:
        """The innermost node spanning exactly (row, col)-(end_row, end_col) (0-based columns)."""
        return self._by_span.get((row, col, end_row, end_col))

    def code(self, node: cst.CSTNode) -> str:
        return self.module.code_for_node(node)

    def line_of(self, node: cst.CSTNode) -> int:
        return self._positions[node].start.line

    def first_input(self, node: cst.CSTNode, floating: bool = False) -> str | None:
        """The first argument of the enclosing ``forward`` (after ``self``): the input
        tensor whose device a replica's code should follow; None elsewhere or when it is
        annotated as something other than a tensor. With ``floating``, the first one whose
        name does not say it holds integers (ids, masks, labels, lengths): its dtype is the
        activations' dtype."""
        function = self.enclosing(node, cst.FunctionDef)
        if function is None or function.name.value != "forward":
            return None
        params = list(function.params.posonly_params) + list(function.params.params)
        for param in params[1:] if params else ():
            annotation = self.code(param.annotation.annotation) if param.annotation else ""
            if annotation and "Tensor" not in annotation:
                return None
            name = param.name.value
            if floating and any(word in name.lower() for word in _INTEGER_NAMES):
                continue
            return name
        return None

    # --- changing --------------------------------------------------------------------
    def replace(self, old: cst.CSTNode, new: cst.CSTNode | cst.RemovalSentinel) -> None:
        self._replacements[old] = new

    def touched_rows(self) -> list[tuple[int, int]]:
        """The row ranges the changes may touch: the replaced nodes' lines, and where
        imports go. libcst does not round-trip everything (a form feed at the start of a
        line is lost), so edits outside these rows are its artefacts, never ours."""
        rows = [(self._positions[n].start.line, self._positions[n].end.line) for n in self._replacements
                if n in self._positions]
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
        module = self.module.visit(_Replace(self._replacements)) if self._replacements else self.module
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


def materialise(source: str, findings: Sequence[Finding], rules: Mapping) -> list[Finding]:
    """``findings`` with each offered fix (a Fix without edits) turned into edits on
    ``source``, or withdrawn (``fix=None``) when the rule makes no change. ``rules`` maps
    codes to rule instances."""
    pending = {id(f) for f in findings if f.fix is not None and not f.fix.edits}
    if not pending:
        return list(findings)
    try:
        module = cst.parse_module(source)
        wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
        positions = wrapper.resolve(PositionProvider)
        parents = wrapper.resolve(ParentNodeProvider)
    except Exception:  # libcst cannot parse what ast could (rare): no fix, never a crash
        return [replace(f, fix=None) if id(f) in pending else f for f in findings]
    by_span: dict[tuple[int, int, int, int], cst.CSTNode] = {}
    for node, where in positions.items():  # children come before their parents:
        key = (where.start.line, where.start.column, where.end.line, where.end.column)
        by_span.setdefault(key, node)  # keep the innermost node with the span
    out = []
    for finding in findings:
        if id(finding) not in pending:
            out.append(finding)
            continue
        node = by_span.get((finding.row, finding.col - 1, finding.end_row, finding.end_col - 1))
        rule = rules.get(finding.code)
        edits: tuple = ()
        if node is not None and rule is not None:
            editor = FixEditor(module, node, parents, positions, by_span)
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
