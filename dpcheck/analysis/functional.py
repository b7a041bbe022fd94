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
from dpcheck.analysis.torch_api import MODULE_CONTAINERS
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
    inputs of a functional data_parallel call -> [str(i), str(j)]."""
    if "data_parallel" not in ctx.source.text:
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
    return found


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
