"""
## What it does
In training scripts, flags a stock `nn.DataParallel(module, device_ids, output_device)` whose
`output_device` (its third positional parameter, or the keyword) is a value the same function builds
the wrapped model with (`Generator(ngpu, nz, ngf, nc, k)` then `nn.DataParallel(netG,
list(range(ngpu)), k)`: a layer count, a width) and never uses as a device (no `.to(k)`, `.cuda(k)`,
`torch.device(k)`, `device=k`, no item of a device list, no `"cuda:{k}"`).

## Why is this bad?
DataParallel's signature is `DataParallel(module, device_ids=None, output_device=None, dim=0)`: it
hands nothing on to the model. A model hyperparameter passed third becomes the GPU index that
`gather` collects the outputs on, so on a machine with that many GPUs or fewer the first call raises
`invalid device ordinal` (and on a larger one the outputs land on another GPU than the inputs and
the targets). A single-GPU run never builds the wrapper and works.

## How to fix
Drop the argument (`nn.DataParallel(netG, list(range(ngpu)))`: outputs gather on `device_ids[0]`), or
pass a device: `output_device=device_ids[0]`.
"""

from __future__ import annotations

import ast

from dpcheck.analysis.bindings import reaching_assignment
from dpcheck.analysis.dataflow import argument, passed_values
from dpcheck.analysis.scripts import mentions_dataparallel, script_facts
from dpcheck.analysis.torch_api import MOVE_METHODS
from dpcheck.constants import DATAPARALLEL_CLASSES
from dpcheck.findings import Severity
from dpcheck.rule import TRAINING_SCRIPT, Rule

# DataParallel's own parameters, in its signature's order: `output_device` is the third.
_OUTPUT_DEVICE = (2, "output_device")
# Keywords of a construction that take a device (a model that places itself: `Net(device=gpu)`).
_DEVICE_WORDS = ("device", "gpu", "cuda", "rank")
# Calls that take a device index.
_DEVICE_CALLS = frozenset({"torch.device", "torch.cuda.set_device", "torch.cuda.device"})


class OutputDeviceNotADevice(Rule):
    code = "DP709"
    name = "output-device-not-a-device"
    severity = Severity.ERROR
    not_confirmable = TRAINING_SCRIPT
    summary = "A model hyperparameter passed as DataParallel's output_device gathers onto that GPU index"
    fix_hint = "Drop the third argument (outputs gather on device_ids[0]) or pass a device"
    bad_example = """
        netG = Generator(nz, ngf, n_layers).cuda()
        model = nn.DataParallel(netG, list(range(ngpu)), n_layers)
    """
    good_example = """
        netG = Generator(nz, ngf, n_layers).cuda()
        model = nn.DataParallel(netG, list(range(ngpu)))
    """

    def check_file(self, ctx):
        if not mentions_dataparallel(ctx):
            return
        facts = script_facts(ctx)
        for call in facts.dp_calls:
            if ctx.resolve(call.func) not in DATAPARALLEL_CLASSES:
                continue  # a subclass may take other parameters
            output = argument(call, *_OUTPUT_DEVICE)
            if not isinstance(output, ast.Name):
                continue
            construction = _construction(ctx, argument(call, 0, "module"))
            if construction is None or not _builds_with(construction, output.id):
                continue
            scope = facts.scope_of(call)
            if any(node is not call and _device_use(node, output.id, ctx) for node in ast.walk(scope)):
                continue
            how = "third parameter, `output_device`" if output in call.args else "`output_device`"
            yield self.violation(output, f"`{output.id}` is passed as DataParallel's {how}, "
                                 f"but builds the wrapped model (`{ast.unparse(construction.func)}"
                                 f"(..., {output.id}, ...)`) and is never used as a device: gather collects the "
                                 f"outputs on GPU index `{output.id}`, which raises `invalid device ordinal` on "
                                 "a machine with that many GPUs or fewer")


def _construction(ctx, module) -> ast.Call | None:
    """The call that builds the wrapped model: ``module`` itself, or the value its name was last bound
    to, through moves (`Net(...).to(device)`, `.cuda()`)."""
    if isinstance(module, ast.Name):
        assign = reaching_assignment(ctx, module.id, module)
        module = assign.value if assign is not None else None
    while isinstance(module, ast.Call) and isinstance(module.func, ast.Attribute) \
            and module.func.attr in MOVE_METHODS:
        module = module.func.value
    return module if isinstance(module, ast.Call) else None


def _builds_with(construction: ast.Call, name: str) -> bool:
    """Does the construction take ``name`` as a model argument (positionally, or by a keyword that is
    not a device's)?"""
    if any(_is_name(a, name) for a in construction.args):
        return True
    return any(_is_name(k.value, name) and k.arg
               and not any(w in k.arg.lower() for w in _DEVICE_WORDS) for k in construction.keywords)


def _device_use(node, name: str, ctx) -> bool:
    """Is ``node`` a use of ``name`` as a device: moved to (`.to(k)`, `.cuda(k)`), `torch.device(k)`,
    a device keyword, an item of a list (a device list), or formatted into a string (`f"cuda:{k}"`,
    `"cuda:{}".format(k)`)?"""
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in (*MOVE_METHODS, "format") \
                or (ctx.resolve(func) or "") in _DEVICE_CALLS:
            return any(_is_name(v, name) for v in passed_values(node))
        return any(_is_name(k.value, name) and k.arg and any(w in k.arg.lower() for w in _DEVICE_WORDS)
                   for k in node.keywords)
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return any(_is_name(e, name) for e in node.elts)
    if isinstance(node, ast.JoinedStr):
        return any(isinstance(v, ast.FormattedValue) and _is_name(v.value, name) for v in node.values)
    return False


def _is_name(node, name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == name
