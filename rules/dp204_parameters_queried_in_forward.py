"""
## What it does
Flags `self.parameters()`, `self.named_parameters()` (and the same on a submodule,
`self.encoder.parameters()`) in code that runs during `forward`, including the
common `next(self.parameters()).device` idiom.

## Why is this bad?
Since PyTorch 1.5, DataParallel replicas have no registered Parameters: the per-GPU
copies are plain, non-leaf tensors in the replica's `__dict__`. On a replica
`parameters()` yields nothing, so `next(self.parameters())` raises
`StopIteration: Caught StopIteration in replica 0 on device 0.`, and a loop over
`self.parameters()` (a weight penalty, a norm) silently runs zero times.

A property of a base class in another scanned file whose getter takes `next(self.parameters())`
(`self.device` on a model whose base defines `device` so) raises the same way where forward reads
it; the base's file tells the class index which of its properties do.

A query behind an optional argument of forward (`if mask is not None:` or `if has_mask:`,
with a None or False default) runs only when a caller passes it. Where no call that reaches
the class under the wrap passes it (the scripts' calls of the wrapped model, the modules'
calls of their layers, a layer call that hands on its caller's own argument counting only
where that caller's callers pass it), the finding is advice only (info), its message ending
with "it runs only when `mask` is passed, and no scanned caller passes it". A parameter
forward rebinds only inside the test's `if` or after it (outside a loop) still holds what the
caller passed when the test reads it. `**inputs` passes the keys of the dict literals `inputs`
is bound to in the caller's function, where every other use of it only reads an entry (a
script's `inputs = {"input_ids": batch[0], ...}; model(**inputs)`); any other `**kwargs`,
a class no scanned file builds (a library model) and an untraced wrap count as passing it.

A query that runs only in eval mode (under `if not self.training:`, or the `else:` of `if
self.training:`) is latent, a warning, where the scanned files wrap a model and none puts one in
eval mode (no `.eval()`, `.train(False)`, no library trainer): a module starts in training mode. A
file counts only where a wrapping script loads it (by its imports): a test script that builds its model
bare and that no wrapping script imports evaluates only that model. It is an error where some file
that runs with a wrapped model may evaluate.

## How to fix
Take the device and dtype from the input (`x.device`, `x.dtype`), or from a buffer.
Compute parameter penalties in the training loop, on the original module.
"""

from __future__ import annotations

import ast

from dpcheck.analysis.devices import input_to_follow
from dpcheck.analysis.guards import EVAL_MODE_LATENT, EVAL_MODE_NOTE, eval_mode_only, optional_argument_guard
from dpcheck.analysis.model_class import PARAMETER_PROPERTY_CONDITION, PARAMETER_QUERIES
from dpcheck.analysis.torch_api import is_torch_nn_class
from dpcheck.findings import Severity
from dpcheck.rule import Rule


class ParametersQueriedInForward(Rule):
    code = "DP204"
    name = "parameters-queried-in-forward"
    severity = Severity.ERROR
    forward_code_only = True
    summary = "`self.parameters()` is empty on DataParallel replicas (StopIteration or empty loops)"
    fix_hint = "Use the input's device/dtype (x.device) or compute parameter terms outside forward"
    bad_example = """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)

            def forward(self, x):
                device = next(self.parameters()).device
                return self.fc(x.to(device))
    """
    good_example = """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)

            def forward(self, x):
                noise = torch.randn(x.shape, device=x.device)
                return self.fc(x + noise)

            def num_params(self):
                return sum(p.numel() for p in self.parameters())
    """

    def check_class(self, model):
        for fn in model.reachable:
            for node in fn.nodes(ast.Call):
                func = node.func
                if not (isinstance(func, ast.Attribute) and func.attr in PARAMETER_QUERIES):
                    continue
                receiver = func.value
                if not (fn.is_self(receiver) or fn.self_attr(receiver) is not None):
                    continue
                guard = optional_argument_guard(model, fn, node)
                if guard is None:
                    continue  # behind a guard no run of the wrapped model takes
                consequence = _consequence(fn, node)
                text = ast.unparse(node)
                parent = fn.parent(node)
                direct_next = isinstance(parent, ast.Call) and _call_name(parent) == "next" and len(parent.args) == 1
                outer = fn.parent(parent) if direct_next else None
                fix = None
                if isinstance(outer, ast.Attribute) and outer.attr in ("device", "dtype") \
                        and input_to_follow(fn, node, floating=outer.attr == "dtype"):
                    fix = self.offer_fix(f"Use the input's `.{outer.attr}` (forward's first tensor argument)")
                message = f"`{text}` in forward {consequence}: DataParallel replicas hold their weights as " \
                          "plain tensors, not Parameters"
                if eval_mode_only(fn, node):
                    yield self.violation(node, message + EVAL_MODE_NOTE, fix=fix, **guard, **EVAL_MODE_LATENT)
                else:
                    yield self.violation(node, message, fix=fix, **guard)
        yield from self._inherited_properties(model)

    def _inherited_properties(self, model):
        """Reads in forward of `self.<attr>` that no class of the file defines or assigns, passed on as a
        value (`device=self.device`, `f(x, self.device)`), on condition that a base class of another
        file defines <attr> as a property taking `next(self.parameters())`: one finding per attribute."""
        ctx = model.ctx
        bases = frozenset(f"{PARAMETER_PROPERTY_CONDITION}{base}:" for cls in model.mro for base in cls.bases
                          if ctx.local_name(base) not in ctx.classes and not base.startswith("torch.")
                          and not is_torch_nn_class(base))
        if not bases:
            return
        # The values calls pass (fewer nodes than every attribute of forward's code), first read of each name.
        first: dict[str, ast.Attribute] = {}
        for fn in model.reachable:
            self_name = fn.self_name
            for call in fn.nodes(ast.Call):
                for value in (*call.args, *(k.value for k in call.keywords)):
                    if value.__class__ is ast.Attribute and value.value.__class__ is ast.Name \
                            and value.value.id == self_name:
                        known = first.get(value.attr)
                        if known is None or (value.lineno, value.col_offset) < (known.lineno, known.col_offset):
                            first[value.attr] = value
        stored: set[str] | None = None
        for attr, node in sorted(first.items(), key=lambda item: (item[1].lineno, item[1].col_offset)):
            if model.find_method(attr) is not None or model.has_property(attr):
                continue
            if stored is None:
                stored = {n.attr for f in model.all_methods for n in f.nodes(ast.Attribute)
                          if isinstance(n.ctx, ast.Store) and f.is_self(n.value)}
            if attr in stored:
                continue
            yield self.violation(node, f"`self.{attr}` in forward is a property of a base class in another "
                                 "file that takes `next(self.parameters())`, which raises StopIteration on every "
                                 "replica: DataParallel replicas hold their weights as plain tensors, not "
                                 "Parameters", requires=(frozenset(f"{b}{attr}" for b in bases),))

    def fix(self, finding, editor):
        import libcst as cst

        call = editor.node  # `self.parameters()` inside `next(...).device`
        wrapper = editor.parent(editor.parent(call))  # Arg -> Call next(...)
        outer = editor.parent(wrapper) if wrapper is not None else None
        if not isinstance(outer, cst.Attribute) or outer.value is not wrapper:
            return
        source = editor.first_input(call, floating=outer.attr.value == "dtype")
        if source:
            editor.replace_with_code(outer, f"{source}.{outer.attr.value}")


def _consequence(fn, query) -> str:
    """What an empty parameter iterator does where it is consumed."""
    node, parent = query, fn.parent(query)
    chained = False
    while isinstance(parent, ast.Call) and parent.func is not node and (
            _call_name(parent) in ("iter", "chain", "itertools.chain", "list", "tuple")):
        chained |= _call_name(parent) in ("chain", "itertools.chain") and len(parent.args) > 1
        node, parent = parent, fn.parent(parent)
    if isinstance(parent, ast.Call) and _call_name(parent) == "next":
        if len(parent.args) > 1:
            return "returns next()'s default on every replica"
        if chained:
            return "yields no parameters on a replica, so next() falls through to what follows " \
                   "(buffers) or raises StopIteration when there is nothing"
        return "raises StopIteration on every replica"
    if isinstance(parent, (ast.For, ast.comprehension)) and parent.iter is node:
        return "yields nothing on a replica, so this loop runs zero times"
    return "yields nothing on a replica, so this silently computes over no parameters"


def _call_name(call) -> str:
    func = call.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        return f"{func.value.id}.{func.attr}"
    return ""
