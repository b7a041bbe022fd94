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
            (isinstance(n, ast.Attribute) and n.attr in _RESHAPERS) for n in ast.walk(value)) \
            and not (isinstance(value, ast.Call) and stacks_new_leading_dim(value, fn, derived))
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


def stacks_new_leading_dim(call: ast.Call, fn: FunctionInfo, derived: dict[str, bool] | None = None) -> bool:
    """`torch.stack(items)` on dim 0 of a list built per layer, step or stream (not per sample).

    The new dim 0 indexes the list: it is the batch only when the list holds one entry per
    sample (`[f(s) for s in x]`, a loop over the batch appending `h[i]`).
    """
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    if name != "stack" or not call.args or not (isinstance(func, ast.Name) or (
            isinstance(func.value, ast.Name) and func.value.id == "torch")):
        return False
    dim = keyword(call, "dim") or (call.args[1] if len(call.args) > 1 else None)
    if dim is not None and not (isinstance(dim, ast.Constant) and dim.value == 0):
        return False
    return _per_step_list(call.args[0], fn, batch_derived(fn) if derived is None else derived)


def _per_step_list(node: ast.AST, fn: FunctionInfo, derived: dict[str, bool]) -> bool:
    if isinstance(node, ast.ListComp):
        return not _over_batch(node.generators[0].iter, fn)
    if isinstance(node, ast.List):
        return True
    if isinstance(node, ast.Name):
        values = fn.local_values.get(node.id, ())
        if any(isinstance(v, ast.ListComp) and _over_batch(v.generators[0].iter, fn) for v in values):
            return False
        if any(isinstance(v, (ast.List, ast.ListComp)) for v in values):
            return not _appended_per_sample(node.id, fn, derived)
    return False


def _over_batch(iterable: ast.AST, fn: FunctionInfo) -> bool:
    """`for item in x`, `zip(x, y)`, `enumerate(x)`, `x.unbind(0)`, `range(len(x))`, `range(x.shape[0])`."""
    params = set(parameters_of(fn))
    for sub in ast.walk(iterable):
        if isinstance(sub, ast.Name) and sub.id in params:
            text = ast.unparse(iterable)
            return not any(t in text for t in (".shape[1]", ".size(1)", ".shape[-", ".size(-"))
    return False


def _appended_per_sample(name: str, fn: FunctionInfo, derived: dict[str, bool]) -> bool:
    """Appended to in a loop over the batch, or with `h[i]` where `i` is the loop's index."""
    for loop in fn.nodes(ast.For):
        appends = [c for c in ast.walk(loop) if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)
                   and c.func.attr == "append" and isinstance(c.func.value, ast.Name) and c.func.value.id == name]
        if not appends:
            continue
        if _over_batch(loop.iter, fn):
            return True
        index = _loop_index(loop)
        if index and any(_indexes_with(c.args[0], index, derived) for c in appends if c.args):
            return True
    return False


def _loop_index(loop: ast.For) -> str | None:
    """`i` in `for i in range(...)` or `for i, ... in enumerate(...)`."""
    target = loop.target
    if isinstance(target, ast.Tuple) and target.elts and isinstance(loop.iter, ast.Call) \
            and isinstance(loop.iter.func, ast.Name) and loop.iter.func.id == "enumerate":
        target = target.elts[0]
    return target.id if isinstance(target, ast.Name) else None


def _indexes_with(node: ast.AST, index: str, derived: dict[str, bool]) -> bool:
    """The appended value starts from `batch_tensor[i]`: one entry per sample."""
    while isinstance(node, (ast.Call, ast.Attribute, ast.Subscript)):
        if isinstance(node, ast.Subscript):
            first = node.slice.elts[0] if isinstance(node.slice, ast.Tuple) and node.slice.elts else node.slice
            if isinstance(first, ast.Name) and first.id == index and isinstance(node.value, ast.Name) \
                    and node.value.id in derived:
                return True
        node = node.func if isinstance(node, ast.Call) else node.value
    return False
