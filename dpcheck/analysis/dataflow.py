"""Small dataflow questions rules ask about a function: parameters, batch-derived names, guards."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from dpcheck.analysis.tree import FunctionInfo

if TYPE_CHECKING:
    from dpcheck.analysis.model_class import ModelClass


def parameters_of(fn: FunctionInfo) -> list[str]:
    """Names of the function's parameters other than self."""
    args = fn.node.args
    names = [a.arg for a in args.posonlyargs + args.args + args.kwonlyargs]
    if args.vararg:
        names.append(args.vararg.arg)
    if args.kwarg:
        names.append(args.kwarg.arg)
    return names[1:] if names and names[0] == fn.self_name and fn.owner is not None else names


_RESHAPERS = frozenset({"transpose", "permute", "t", "T", "swapaxes", "swapdims", "movedim", "mT"})


def batch_derived(fn: FunctionInfo) -> dict[str, bool]:
    """Local names computed from forward's inputs: name -> still batch-major (no transpose seen).

    Inputs to a DataParallel-wrapped forward are chunks along dim 0, so a value computed
    from them without a transpose keeps the batch in dim 0.
    """
    return fn.fact(_find_batch_derived)


def _find_batch_derived(fn: FunctionInfo) -> dict[str, bool]:
    derived: dict[str, bool] = {p: True for p in parameters_of(fn)}
    assigns = sorted(fn.nodes(ast.Assign, ast.AnnAssign, ast.AugAssign), key=lambda n: (n.lineno, n.col_offset))
    for node in assigns:
        value = node.value
        if value is None:
            continue
        names = [n.id for n in ast.walk(value) if isinstance(n, ast.Name)]
        sources = [derived[n] for n in names if n in derived]
        if not sources:
            continue
        batch_major = all(sources) and not any(
            (isinstance(n, ast.Attribute) and n.attr in _RESHAPERS) for n in ast.walk(value))
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for target in targets:
            for t in ast.walk(target):
                if isinstance(t, ast.Name):
                    derived[t.id] = batch_major
    return derived


def is_batch_tensor(node: ast.AST, fn: FunctionInfo) -> bool:
    """A forward-input-derived, batch-major expression (conservative: names and method chains)."""
    derived = batch_derived(fn)
    if isinstance(node, ast.BinOp) and not isinstance(node.op, ast.MatMult):
        # `scale * x`, `x / t`: elementwise with a scalar or a broadcast keeps the batch dim.
        return is_batch_tensor(node.left, fn) or is_batch_tensor(node.right, fn)
    base = node
    while isinstance(base, (ast.Call, ast.Attribute, ast.Subscript)):
        if isinstance(base, ast.Attribute) and (base.attr in _RESHAPERS or base.attr in ("weight", "bias")):
            return False  # transposed, or a layer's weights (a module passed in is not data)
        if isinstance(base, ast.Subscript):
            return False  # indexing may drop or move the batch dim
        base = base.func if isinstance(base, ast.Call) else base.value
    return isinstance(base, ast.Name) and derived.get(base.id, False)


def rnn_kind(model: ModelClass, attr: str | None) -> str | None:
    """'LSTM'/'GRU'/'RNN'/'Transformer…' when self.<attr> is built from that torch.nn class."""
    if attr is None:
        return None
    facts = model.attrs.get(attr)
    if facts is None:
        return None
    for _, value, _ in facts.assignments:
        if isinstance(value, ast.Call):
            name = model.ctx.resolve(value.func) or ""
            if name.startswith("torch.nn."):
                return name.rsplit(".", 1)[-1]
    return None


def keyword(call: ast.Call, name: str) -> ast.AST | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def is_true(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and node.value is True


def under_lazy_guard(fn, node) -> bool:
    """Inside `if self.x is None:` / `if not self.x:` / `if not hasattr(self, ...)`."""
    cur = fn.parent(node)
    while cur is not None and cur is not fn.node:
        if isinstance(cur, ast.If):
            for test in ast.walk(cur.test):
                if isinstance(test, ast.Compare) and fn.self_attr(test.left) is not None and any(
                        isinstance(c, ast.Constant) and c.value is None for c in test.comparators):
                    return True
                if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) and (
                        fn.self_attr(test.operand) is not None or (
                        isinstance(test.operand, ast.Call) and isinstance(test.operand.func, ast.Name)
                        and test.operand.func.id == "hasattr")):
                    return True
        cur = fn.parent(cur)
    return False
