"""Tensors stored on the layers of a DataParallel wrapper from outside it.

MUNIT's AdaIN generators compute the per-sample normalisation parameters outside the decoder and
store them on its layers before calling it: `for m in model.modules(): if ...: m.bias = mean.view(-1)`,
then `self.dec(content)`. Where `model` is a DataParallel wrapper (`self.dec = DataParallel(self.dec)`),
the store lands on the original layers, and `replicate()` hands every replica those layers' plain
attributes by reference: each replica reads the whole batch's tensor, on the device it was made on,
against its own chunk of the batch. (Made inside the wrapped forward, the same store would be each
replica's own.)
"""

from __future__ import annotations

import ast

from dpcheck.analysis.context import FileContext
from dpcheck.analysis.scripts import Wrap, mentions_dataparallel, script_facts
from dpcheck.analysis.torch_api import FUNCTION_DEFS, TENSOR_METHODS
from dpcheck.record import record

# Module methods that walk a module's layers: `for m in model.modules()`, `for _, m in model.named_children()`.
_LAYER_WALKS = frozenset({"modules", "children", "named_modules", "named_children"})


@record(frozen=True)
class LayerStore:
    """A store of a tensor on a layer of what a wrapper holds, and the call that runs the wrapper."""

    store: ast.Attribute  # `m.bias` in `m.bias = mean.contiguous().view(-1)`
    wrap: Wrap
    wrapper: str  # the wrapper's expression at the hand-over (`self.dec`)
    call: ast.Call  # the call of the wrapper after the store


def layer_stores(ctx: FileContext) -> list[LayerStore]:
    """Every store of a tensor on a layer yielded by walking a DataParallel wrapper's modules (the
    walk on the wrapper itself, or on a parameter of a function the file calls with one), where the
    function that walks it, or hands it over, then calls the wrapper."""
    return ctx.fact(_layer_stores)


def _layer_stores(ctx: FileContext) -> list[LayerStore]:
    text = ctx.source.text
    if not any(f".{walk}()" in text for walk in _LAYER_WALKS) or not mentions_dataparallel(ctx):
        return []
    facts = script_facts(ctx)
    found: list[LayerStore] = []
    seen: set[int] = set()
    for loop in ctx.nodes(ast.For):
        walked = _walked(loop)
        if walked is None:
            continue
        owner, layer = walked
        stores = [target for stmt in loop.body for node in ast.walk(stmt) if isinstance(node, ast.Assign)
                  for target in node.targets if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)
                  and target.value.id == layer and _tensor_value(node.value, loop, ctx)]
        if not stores:
            continue
        function = ctx.enclosing(loop, FUNCTION_DEFS)
        for wrapper, wrap, caller in _wrappers_walked(owner, function, facts, ctx):
            call = _wrapper_called(wrapper, caller, facts, ctx)
            if call is None:
                continue
            for store in stores:
                if id(store) not in seen:
                    seen.add(id(store))
                    found.append(LayerStore(store, wrap, wrapper, call))
    return found


def _walked(loop: ast.For) -> tuple[ast.expr, str] | None:
    """(what the loop walks the layers of, the loop's name for each layer) for `for m in X.modules()`
    and `for name, m in X.named_modules()`; None for any other loop."""
    it = loop.iter
    if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) and it.func.attr in _LAYER_WALKS):
        return None
    target = loop.target
    if it.func.attr.startswith("named_"):
        target = target.elts[1] if isinstance(target, ast.Tuple) and len(target.elts) == 2 else None
    return (it.func.value, target.id) if isinstance(target, ast.Name) else None


def _tensor_value(value: ast.AST, loop: ast.For, ctx: FileContext, depth: int = 0) -> bool:
    """Is ``value`` a tensor, read as one: a multi-dimensional slice (`params[:, :n]`), a torch call,
    or a tensor method's result on one (`mean.contiguous().view(-1)`), also through a name the loop's
    function binds to one (`mean = adain_params[:, :m.num_features]`)?"""
    while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr in TENSOR_METHODS:
        value = value.func.value
    if isinstance(value, ast.Subscript):
        return isinstance(value.slice, ast.Tuple) and any(isinstance(e, ast.Slice) for e in value.slice.elts)
    if isinstance(value, ast.Call):
        name = ctx.resolve(value.func) or ""
        return name.startswith("torch.") and not name.startswith("torch.nn.")
    if isinstance(value, ast.Name) and depth < 2:
        scope = ctx.enclosing(loop, FUNCTION_DEFS) or ctx.tree
        bindings = [n.value for n in ctx.tree_index.nodes_within(scope, ast.Assign)
                    if any(isinstance(t, ast.Name) and t.id == value.id for t in n.targets)]
        return bool(bindings) and all(_tensor_value(b, loop, ctx, depth + 1) for b in bindings)
    return False


def _wrappers_walked(owner: ast.expr, function, facts, ctx: FileContext):
    """(the wrapper's expression, its Wrap, the function that holds it) for each wrapper whose layers
    ``owner`` walks: ``owner`` holds one itself (`self.dec.modules()`), or is a parameter of
    ``function`` that a call of this file hands one (`self.assign_adain_params(p, self.dec)`)."""
    wrap = facts.wrap_for(owner)
    if wrap is not None and not wrap.parameter:
        yield ast.unparse(owner), wrap, function
        return
    if not isinstance(owner, ast.Name) or function is None:
        return
    arguments = function.args
    positional = [a.arg for a in (*arguments.posonlyargs, *arguments.args)]
    if owner.id not in positional and owner.id not in {a.arg for a in arguments.kwonlyargs}:
        return
    method = ctx.enclosing(function, ast.ClassDef) is not None and ctx.parent(function) is ctx.enclosing(
        function, ast.ClassDef)
    index = positional.index(owner.id) - (1 if method else 0) if owner.id in positional else None
    for call in ctx.nodes(ast.Call):
        func = call.func
        if method:
            if not (isinstance(func, ast.Attribute) and func.attr == function.name and isinstance(func.value, ast.Name)
                    and func.value.id == "self"):
                continue
        elif not (isinstance(func, ast.Name) and func.id == function.name):
            continue
        handed = call.args[index] if index is not None and 0 <= index < len(call.args) else next(
            (k.value for k in call.keywords if k.arg == owner.id), None)
        wrap = facts.wrap_for(handed) if handed is not None else None
        if wrap is not None:
            yield ast.unparse(handed), wrap, ctx.enclosing(call, FUNCTION_DEFS)


def _wrapper_called(wrapper: str, function, facts, ctx: FileContext) -> ast.Call | None:
    """A call of the wrapper ``wrapper`` in ``function`` (the one that walks or hands it over)."""
    if function is None:
        return None
    for call in ctx.tree_index.nodes_within(function, ast.Call):
        if ast.unparse(call.func) == wrapper and facts.wrap_for(call.func) is not None:
            return call
    return None
