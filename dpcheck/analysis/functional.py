"""Functional `nn.parallel.data_parallel(module, inputs, ...)` calls in a module's code, direct or
through a helper function of the project.

The functional form replicates ``module`` and scatters ``inputs`` along dim 0 right where it is
called, also from inside another module's forward (DCGAN's `data_parallel(self.main, x,
range(self.ngpu))`). Projects often call it through a helper of their own that passes two of its
parameters on (crnn.pytorch's `models/utils.py`: `def data_parallel(model, input, ngpu):` ...
`nn.parallel.data_parallel(model, input, range(ngpu))`, copied by its forks). Only calls that
scatter along dim 0 count (no `dim`, or `dim=0`). Each file records its module-level functions that
do (``FileResult.parallel_helpers``: function -> the positions of the parameters passed as the
module and as the inputs); a call of a function of the project carries
``parallel_helper:<dotted name>@<module position>@<inputs position>``, which the project index
settles (``ClassIndex.parallel_helper``).
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, NamedTuple

from dpcheck.analysis.dataflow import argument
from dpcheck.analysis.torch_api import FUNCTION_DEFS, MODULE_CONTAINERS, FunctionNode
from dpcheck.constants import DATAPARALLEL_FUNCTIONS

if TYPE_CHECKING:
    from dpcheck.analysis.context import FileContext
    from dpcheck.analysis.model_class import ModelClass
    from dpcheck.analysis.tree import FunctionInfo

PARALLEL_HELPER_CONDITION = "parallel_helper:"
# Callees that are surely no project helper (a library's function, a builtin's name).
_LIBRARY_ROOTS = ("torch.", "numpy.", "math.", "F.", "np.")


class FunctionalCall(NamedTuple):
    """A call in ``fn`` that may run `self.<attr>` (``module``) under the functional data_parallel, on
    ``requires``."""
    call: ast.Call
    fn: FunctionInfo
    attr: str
    module: ast.AST
    inputs: ast.AST | None
    requires: tuple[frozenset[str], ...]


def parallel_helpers(ctx: FileContext) -> dict[str, list[str]]:
    """This file's module-level functions that pass parameter i as the module and parameter j as the
    inputs of a functional data_parallel call -> [str(i), str(j)]; also those that do its steps by
    hand (``_hand_written_steps``)."""
    text = ctx.source.text
    if "data_parallel" not in text and "parallel_apply" not in text:
        return {}
    found: dict[str, list[str]] = {}
    for name, node in ctx.module_functions.items():
        params = [a.arg for a in (*node.args.posonlyargs, *node.args.args)]
        for call in ctx.tree_index.subtree(node):
            if isinstance(call, ast.Call) and (ctx.resolve(call.func) or "") in DATAPARALLEL_FUNCTIONS \
                    and _splits_dim0(call):
                module, inputs = argument(call, 0, "module"), argument(call, 1, "inputs")
                if isinstance(module, ast.Name) and isinstance(inputs, ast.Name) \
                        and module.id in params and inputs.id in params:
                    found[name] = [str(params.index(module.id)), str(params.index(inputs.id))]
                    break
        else:
            positions = _hand_written_steps(ctx, node, params) if "parallel_apply" in text else None
            if positions is not None:
                found[name] = positions
    return found


# torch's steps of a data-parallel call: run callables on their chunks in threads, and concatenate
# their outputs on one device.
_PARALLEL_APPLY = frozenset({"torch.nn.parallel.parallel_apply", "torch.nn.parallel.parallel_apply.parallel_apply"})
_GATHER = frozenset({"torch.nn.parallel.gather", "torch.nn.parallel.scatter_gather.gather"})


def _hand_written_steps(ctx: FileContext, node: ast.FunctionDef, params: list[str]) -> list[str] | None:
    """[str(i), str(j)] where the function does data_parallel's steps itself on its parameters i and
    j: it hands `parallel_apply` callables made from parameter i (the parameter, or a value naming it:
    `[partial(f, params=p) for p in replicas]`) and chunks made from parameter j (`scatter([input],
    devices)`), and returns `gather(...)` of the outputs (szagoruyko's `utils.data_parallel(f, input,
    params, mode, device_ids)`, which runs a function over a dict of weights); else None."""
    fn = ctx.function(node, None)
    if not any(isinstance(value, ast.Call) and (ctx.resolve(value.func) or "") in _GATHER
               for value in fn.returns()):
        return None
    for call, name in ctx.named_calls(fn):
        if name in _PARALLEL_APPLY and len(call.args) >= 2:
            module = _named_parameter(call.args[0], fn, ctx, params)
            inputs = _named_parameter(call.args[1], fn, ctx, params)
            if module is not None and inputs is not None and module != inputs:
                return [str(module), str(inputs)]
    return None


# Calls whose first argument a hand-written data-parallel step hands on whole: a callable bound to
# options (`partial(f, params=p)`), or the values scattered over the devices.
_HANDING_ON = frozenset({"functools.partial", "torch.nn.parallel.scatter", "torch.nn.parallel.scatter_gather.scatter"})


def _named_parameter(value: ast.AST, fn: FunctionInfo, ctx: FileContext, params: list[str],
                     depth: int = 0) -> int | None:
    """The position of the one parameter that ``value`` hands on whole: the parameter, a local bound
    to such a value, an item of a list display or comprehension of one, the callable of `partial(f,
    ...)` or the values of `scatter(value, devices)`."""
    if depth > 3:
        return None
    if isinstance(value, ast.Name):
        if value.id in params:
            return params.index(value.id)
        found = {_named_parameter(v, fn, ctx, params, depth + 1) for v in fn.local_values.get(value.id, ())}
        return found.pop() if len(found) == 1 else None
    if isinstance(value, ast.ListComp):
        return _named_parameter(value.elt, fn, ctx, params, depth + 1)
    if isinstance(value, (ast.List, ast.Tuple)) and len(value.elts) == 1:
        return _named_parameter(value.elts[0], fn, ctx, params, depth + 1)
    if isinstance(value, ast.Call) and value.args and (ctx.resolve(value.func) or "") in _HANDING_ON:
        return _named_parameter(value.args[0], fn, ctx, params, depth + 1)
    return None


def functional_calls_by_class(ctx: FileContext) -> dict[str, list[FunctionalCall]]:
    """Each module class of the file -> ``functional_calls`` of its forward code (one pass per file,
    which two rules read)."""
    return ctx.fact(_functional_calls_by_class)


def _functional_calls_by_class(ctx: FileContext) -> dict[str, list[FunctionalCall]]:
    from dpcheck.analysis.model_class import file_models

    found = {}
    for model in file_models(ctx):
        calls = [call for fn in model.in_forward for call in functional_calls(fn, ctx)]
        if calls:
            found[model.name] = calls
    return found


def functional_calls(fn: FunctionInfo, ctx: FileContext) -> list[FunctionalCall]:
    """The calls in ``fn`` that run a module of `self` under the functional data_parallel: torch's own
    (no condition), or a call of a function of the project that takes `self.<attr>` (on the
    condition that it passes that argument on as the module, and any other argument that is no
    attribute of self as the inputs)."""
    found = []
    self_attr = fn.self_attr
    for call, name in ctx.named_calls(fn):
        if name in DATAPARALLEL_FUNCTIONS:
            module = argument(call, 0, "module")
            attr = self_attr(module) if module is not None and _splits_dim0(call) else None
            if attr is not None:
                found.append(FunctionalCall(call, fn, attr, module, argument(call, 1, "inputs"), ()))
            continue
        args = call.args
        if len(args) < 2 or not name or name.startswith(_LIBRARY_ROOTS) or "." not in name \
                or self_attr(call.func) is not None or any(isinstance(a, ast.Starred) for a in args):
            continue
        for k, arg in enumerate(args):
            attr = self_attr(arg)
            if attr is None:
                continue
            for m, inputs in enumerate(args):
                if m != k and self_attr(inputs) is None:
                    condition = f"{PARALLEL_HELPER_CONDITION}{name}@{k}@{m}"
                    found.append(FunctionalCall(call, fn, attr, arg, inputs, (frozenset({condition}),)))
    return found


class ParallelFunction(NamedTuple):
    """A function of this file that a data-parallel helper of the project runs as the model (the
    model is a plain function over a dict of weights), on ``requires``."""

    fn: FunctionInfo
    helper: str  # the helper as the call names it
    requires: tuple[frozenset[str], ...]


def parallel_functions(ctx: FileContext) -> list[ParallelFunction]:
    """The functions of this file handed, by name, as the model to a helper of the project that does
    data_parallel's steps itself (``_hand_written_steps``: `utils.data_parallel(f, inputs, params, mode,
    range(ngpu))`, `f` a function of the calling scope or one around it): each replica runs it on its
    chunk and gather concatenates what it returns. A helper of this file is decided here; one of
    another file carries ``parallel_helper:<dotted name>@<position>``."""
    if "parallel" not in ctx.source.text:
        return []
    defined = {d.name for d in ctx.nodes(*FUNCTION_DEFS)}
    helpers = None
    found: dict[int, ParallelFunction] = {}
    for call in ctx.nodes(ast.Call):
        if not any(isinstance(a, ast.Name) and a.id in defined for a in call.args) \
                or not isinstance(call.func, (ast.Name, ast.Attribute)):
            continue  # (handed no function of this file by name: most calls, cheaply)
        helpers = parallel_helpers(ctx) if helpers is None else helpers
        local = call.func.id if isinstance(call.func, ast.Name) and call.func.id in ctx.module_functions else None
        name = ctx.resolve(call.func) or ""
        if local is None and ("." not in name or name.startswith(_LIBRARY_ROOTS)
                              or name in DATAPARALLEL_FUNCTIONS):
            continue
        if local is not None and local not in helpers:
            continue
        for k, arg in enumerate(call.args):
            if not isinstance(arg, ast.Name) or local is not None and helpers[local][0] != str(k):
                continue
            requires = () if local is not None else (frozenset({f"{PARALLEL_HELPER_CONDITION}{name}@{k}"}),)
            for node in _visible_functions(ctx, call, arg.id):
                found.setdefault(id(node), ParallelFunction(ctx.function(node, None), ast.unparse(call.func),
                                                            requires))
    return list(found.values())


def _visible_functions(ctx: FileContext, node: ast.AST, name: str) -> list[ast.FunctionDef]:
    """The functions named ``name`` defined in the scopes around ``node`` (the functions enclosing it,
    innermost first, then the module), each scope's own definitions (not those nested further)."""
    named = [d for d in ctx.nodes(*FUNCTION_DEFS) if d.name == name]
    scope = ctx.enclosing(node, FunctionNode)
    while named:
        defs = [d for d in named if ctx.enclosing(d, FunctionNode) is scope]
        if defs or scope is None:
            return defs
        scope = ctx.enclosing(scope, FunctionNode)
    return []


def _splits_dim0(call: ast.Call) -> bool:
    """Does this `data_parallel(module, inputs, device_ids, output_device, dim, ...)` scatter along dim
    0 (no `dim`, or a constant 0)? One given `dim=1` splits what that layout makes the batch."""
    dim = argument(call, 4, "dim")
    return dim is None or isinstance(dim, ast.Constant) and dim.value == 0


def stored_constructions(holder: ModelClass, attr: str | None) -> list[ast.Call]:
    """The constructions stored in `self.<attr>` of ``holder``: each value that is one, or the items
    of a torch container built there (`nn.Sequential(BidirectionalLSTM(...), ...)`)."""
    facts = holder.attrs.get(attr) if attr is not None else None
    found = []
    for _, value, _ in facts.assignments if facts is not None else ():
        if not isinstance(value, ast.Call):
            continue
        name = holder.ctx.resolve(value.func) or ""
        if name.startswith("torch.nn.") and name.rpartition(".")[2] in MODULE_CONTAINERS:
            found.extend(item for item in value.args if isinstance(item, ast.Call))
        else:
            found.append(value)
    return found


def summarize_parallel_helpers(ctx: FileContext, result) -> None:
    """Fill ``result.parallel_helpers`` (see ``parallel_helpers``)."""
    result.parallel_helpers = parallel_helpers(ctx)
