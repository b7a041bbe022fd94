"""
## What it does
Flags a fixed GPU index in code that runs during `forward`: `"cuda:0"`,
`torch.device("cuda", 1)`, `.cuda(0)`, `.to(0)`, `device=0`, `torch.cuda.set_device(...)`
and `with torch.cuda.device(0):`.

## Why is this bad?
Each DataParallel replica runs in its own thread with its own GPU as the current
device. A tensor created on `cuda:0` inside forward is on the wrong GPU for every
replica but the first: `Expected all tensors to be on the same device, but found at
least two devices, cuda:1 and cuda:0!`. `set_device` inside forward changes the
device under the other replicas' feet.

Not flagged: a bare `.cuda()`, `device="cuda"` and `torch.device("cuda")`, which
follow the replica's current device, and `x.device`.

## How to fix
Use the input's device (`device=x.device`, `x.new_zeros(...)`, `torch.zeros_like(x)`);
a bare `"cuda"` also follows the replica.
"""

from __future__ import annotations

import ast

from dpcheck.analysis.devices import is_int_constant, pinned_device, placement_arguments
from dpcheck.findings import ObservationKind as K
from dpcheck.findings import Severity
from dpcheck.rule import Rule


class HardCodedDeviceIndex(Rule):
    code = "DP301"
    name = "hard-coded-device-index"
    severity = Severity.ERROR
    forward_code_only = True
    confirms = frozenset({K.DEVICE_MISMATCH})
    summary = "A fixed GPU index in forward puts tensors on the wrong device for every other replica"
    fix_hint = "Use the input's device (device=x.device, x.new_zeros, torch.zeros_like)"
    bad_example = """
        class Positional(nn.Module):
            def forward(self, x):
                pos = torch.arange(x.shape[1], device="cuda:0")
                return x + pos
    """
    good_example = """
        class Positional(nn.Module):
            def forward(self, x):
                pos = torch.arange(x.shape[1], device=x.device)
                extra = torch.ones(3, device="cuda")
                return x + pos + extra.sum().cuda()
    """

    def check_class(self, model):
        ctx = model.ctx
        for fn in model.reachable:
            for call, name in ctx.named_calls(fn):
                if name in ("torch.cuda.set_device", "torch.cuda.device"):
                    yield self.violation(call, f"`{ast.unparse(call.func)}(...)` in forward changes the "
                                         "current GPU under the other DataParallel replica threads")
                    continue
                pinned = pinned_device(call, ctx.resolve)
                if pinned is not None and not isinstance(fn.parent(call), ast.Compare):
                    yield self.violation(call, f"`{pinned}` in forward pins GPU index: every "
                                         "DataParallel replica but one is on another device")
                for arg in placement_arguments(call):
                    yield from self._check_placement(fn, call, arg, ctx)

    def _check_placement(self, fn, call, arg, ctx):
        if is_int_constant(arg):
            method = call.func.attr if isinstance(call.func, ast.Attribute) else None
            fix = None
            if method == "cuda" and call.args and call.args[0] is arg and len(call.args) == 1:
                fix = self.offer_fix("Drop the index so `.cuda()` follows the replica's device")
            yield self.violation(arg, f"Device index `{arg.value}` in forward pins one GPU: "
                                 "DataParallel replicas on other GPUs get tensors on the wrong device",
                                 fix=fix)
            return
        if pinned_device(arg, ctx.resolve) and isinstance(arg, ast.Constant):
            yield self.violation(arg, f"`{arg.value!r}` in forward pins one GPU: DataParallel "
                                 "replicas on other GPUs get tensors on the wrong device",
                                 fix=self.offer_fix("Use the input's device (or \"cuda\", the replica's "
                                                    "current device)"))
            return
        if isinstance(arg, ast.IfExp) and pinned_device(arg, ctx.resolve):
            yield self.violation(arg, f"`{ast.unparse(arg)}` in forward pins one GPU whenever CUDA is available: "
                                 "DataParallel replicas on other GPUs get tensors on the wrong device")
            return
        if isinstance(arg, ast.Name):
            for value in fn.local_values.get(arg.id, ()):
                if pinned_device(value, ctx.resolve) and isinstance(value, (ast.Constant, ast.IfExp)):
                    yield self.violation(value, f"`{ast.unparse(value)}` is used for placement in forward "
                                         f"(through `{arg.id}`) and pins one GPU for every replica")

    def fix(self, finding, editor):
        import libcst as cst  # only files with a fix to apply pay for libcst

        node = editor.node
        if isinstance(node, cst.Integer):  # `.cuda(0)` -> `.cuda()`
            call = editor.enclosing(node, cst.Call)
            if call is not None and len(call.args) == 1:
                editor.replace(call, call.with_changes(args=()))
        elif isinstance(node, cst.SimpleString):  # "cuda:0" -> x.device, or "cuda"
            source = editor.first_input(node)
            editor.replace_with_code(node, f"{source}.device" if source else '"cuda"')
