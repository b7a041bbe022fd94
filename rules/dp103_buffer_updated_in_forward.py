"""
## What it does
Flags writes to a registered buffer in code that runs during `forward`:
reassignment (`self.ema = 0.9 * self.ema + 0.1 * x.mean(0)`) as an error, and in-place
or indexed writes that depend on the batch (`self.queue[:, p:p + n] = keys`,
`self.running.mul_(m).add_(x.mean(0))`, `self.ptr[0] = p + n`) as warnings.
Updates that do not depend on the input (`self.steps += 1`) and BatchNorm's own
running statistics are not findings. A buffer rebuilt lazily, converted to the input's
device costs only speed under DataParallel: a warning (cost-only). A buffer recomputed
from scratch before every use costs nothing more under DataParallel; only code that reads it
from the model after forward would see the old value: info (advice). An in-place update of `running_mean`/`running_var` in a hand-written
norm layer is info, as BatchNorm's own statistics are (see DP602). A reassignment behind
a non-default option is a warning.

Also flagged: rebinding the `.data` of a Parameter in forward from a value read before
(`u.data = l2normalize(W @ v)` in a hand-written spectral norm whose power-iteration vectors are
frozen Parameters, `self.scale.data = ...`), where the Parameter is `self.<attr>` or read back
with `getattr(self..., name)` under a name the class passes to `register_parameter`.

## Why is this bad?
Each replica gets its own `_buffers` dict, so a reassignment lands there and is lost
on every replica, replica 0 included: the buffer never changes. Replica 0's buffers
*are* the original tensors (same storage), so an in-place write survives, but only
replica 0's: statistics, EMA values and memory queues are updated from the first
chunk of the batch only (a MoCo queue advances by B/N, not B). Parameters are broadcast
through autograd in training, so every replica, replica 0 included, holds new tensor objects:
a rebound `.data` is lost everywhere and the power iteration restarts from the same vector.

## How to fix
Update the buffer in place (`self.ema.mul_(0.9).add_(...)`) with statistics computed
from the whole batch, e.g. in the training loop after DataParallel has gathered the
outputs, or move the state update out of forward.
"""

from __future__ import annotations

import ast

from dpcheck.analysis.dataflow import (
    old_value_use,
    option_constructions,
    parameters_of,
    reads_before_write,
    under_lazy_guard,
)
from dpcheck.analysis.names import self_attr_root
from dpcheck.findings import ObservationKind as K
from dpcheck.findings import Severity, Subject
from dpcheck.rule import Rule

# BatchNorm's names for its running statistics, reused by hand-written norm layers.
_NORM_STATISTICS = frozenset({"running_mean", "running_var", "running_std"})
_IN_PLACE = lambda name: name.endswith("_") and not name.startswith("_") and name not in ("requires_grad_",)


class BufferUpdatedInForward(Rule):
    code = "DP103"
    name = "buffer-updated-in-forward"
    severity = Severity.ERROR
    forward_code_only = True
    confirms = frozenset({K.STATE_LOST_ON_REPLICA, K.STATE_DIFFERS, K.VALUES_DIFFER, K.GRADS_DIFFER})
    summary = "A buffer reassigned in forward is lost; an in-place update keeps only replica 0's chunk"
    fix_hint = "Update buffers in place from whole-batch statistics, outside forward if possible"
    bad_example = """
        class EMA(nn.Module):
            def __init__(self):
                super().__init__()
                self.register_buffer("ema", torch.zeros(4))

            def forward(self, x):
                self.ema = 0.9 * self.ema + 0.1 * x.mean(0)
                return x - self.ema
    """
    good_example = """
        class EMA(nn.Module):
            def __init__(self):
                super().__init__()
                self.register_buffer("ema", torch.zeros(4))
                self.register_buffer("steps", torch.zeros((), dtype=torch.long))

            def forward(self, x):
                self.steps += 1
                return x - self.ema
    """

    def check_class(self, model):
        yield from self._parameter_data_rebound(model)
        buffers = {name for name, facts in model.attrs.items() if "buffer" in facts.kinds}
        if not buffers:
            return
        for fn in model.reachable:
            inputs = _input_names(fn)
            for node in fn.nodes(ast.Assign, ast.AugAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    for sub in ast.walk(target) if isinstance(target, (ast.Tuple, ast.List)) else [target]:
                        name = fn.self_attr(sub)
                        if name in buffers and isinstance(node, ast.Assign):
                            yield self._reassigned(model, fn, sub, name, node)
                        elif name in buffers and _uses(node.value, inputs):
                            yield self._in_place(sub, name)
                        elif isinstance(sub, ast.Subscript) and fn.self_attr(sub.value) in buffers \
                                and _uses(node.value, inputs):
                            yield self._in_place(sub, fn.self_attr(sub.value))
            for call in fn.nodes(ast.Call):
                func = call.func
                if isinstance(func, ast.Attribute) and _IN_PLACE(func.attr):
                    name = fn.self_attr(_root_call_receiver(func.value))
                    if name in buffers and any(_uses(a, inputs) for a in [*call.args, *(k.value for k in call.keywords)]):
                        yield self._in_place(call, name)

    def _reassigned(self, model, fn, target, name, node):
        """An error only when a later call reads what this one wrote: the new value combines the
        old one, or forward reads the buffer before writing it. A table rebuilt, converted or
        recomputed from the inputs and weights on every call costs only speed."""
        use = old_value_use(model, fn, name, node.value)
        severity = Severity.WARNING  # a per-call table: cost-only by the severity policy
        settled = {}
        if under_lazy_guard(fn, node, building=True) or use == "memo":
            why = "is rebuilt lazily in forward: the new value is lost with each DataParallel replica, so it " \
                  "is recomputed on every call"
        elif use == "converted":
            why = "is converted to another device or dtype in forward: the converted copy is lost with each " \
                  "DataParallel replica, so the conversion repeats on every call"
        elif use is None and not reads_before_write(model, fn, name, node):
            # Recomputed on every call on one device too: DataParallel adds no cost, and only code
            # that reads the buffer from the model after forward sees the old value (advice).
            severity = Severity.INFO
            why = "is recomputed from scratch in forward before it is used: each DataParallel replica " \
                  "keeps its own value and the original keeps the old one (it matters only to code " \
                  "that reads the buffer after forward)"
        elif (option := option_constructions(model, fn, node)) is not None:
            severity = Severity.WARNING  # lost state (an error by default), but only with the option on
            settled = option
            why = "is reassigned in forward on a path behind a non-default option: with that option on, " \
                  "each DataParallel replica has its own buffer dict and the new value is lost"
        else:
            return self.violation(target, f"Buffer `self.{name}` is reassigned in forward from its old value: "
                                  "each DataParallel replica has its own buffer dict, so the update is lost "
                                  "on every replica and the next call starts from the old value")
        return self.violation(target, f"Buffer `self.{name}` {why}", severity=severity, **settled)

    def _parameter_data_rebound(self, model):
        """`u.data = l2normalize(W @ v)` on a Parameter in forward (a power-iteration vector kept as a
        frozen Parameter): replicate broadcasts parameters through autograd, so every replica,
        replica 0 included, holds its own tensor objects, and rebinding `.data` on one is lost."""
        rebound = [(fn, node, target) for fn in model.reachable for node in fn.nodes(ast.Assign)
                   for target in node.targets if isinstance(target, ast.Attribute) and target.attr == "data"]
        if not rebound:  # nearly every class: nothing more to read
            return
        parameters = {name for name, facts in model.attrs.items() if "parameter" in facts.kinds}
        registered = _registered_parameter_names(model)
        for fn, node, target in rebound:
            holder = target.value
            name = fn.self_attr(holder)
            if name in parameters:
                shown = f"self.{name}"
            elif isinstance(holder, ast.Name) and registered and any(
                    _fetches_registered(v, fn, registered) for v in fn.local_values.get(holder.id, ())):
                shown = holder.id
            else:
                continue
            if not _old_value_read(fn, shown, node):
                continue  # recomputed from other values before any read: nothing carried over
            yield self.violation(target, f"Parameter `{shown}` has its `.data` rebound in forward: "
                                 "DataParallel replicas hold broadcast copies of the parameters, "
                                 "replica 0 included, so the new value is lost and the next call "
                                 "starts from the old one", subject=Subject(attr=name))

    def _in_place(self, node, name):
        if name in _NORM_STATISTICS:
            # A hand-written norm layer's running statistics behave exactly as BatchNorm's do under
            # DataParallel, which the severity policy rates as advice (DP602).
            return self.violation(node, f"Buffer `self.{name}` is a running statistic updated in place from the "
                                  "batch, as BatchNorm's: under DataParallel only replica 0's chunk updates it",
                                  severity=Severity.INFO, subject=Subject(attr=name))
        return self.violation(node, f"Buffer `self.{name}` is updated in place from the batch in forward: "
                              "under DataParallel only replica 0's update (its chunk of the batch) "
                              "is kept", severity=Severity.WARNING, subject=Subject(attr=name))


def _old_value_read(fn, shown: str, node: ast.Assign) -> bool:
    """Is the value read before this rebinding (earlier in the function, or by the new value itself:
    `v.data = f(w, u.data)` then `u.data = g(w, v.data)` reads u's old value, not v's)?"""
    for use in (*fn.nodes(ast.Name), *fn.nodes(ast.Attribute)):
        if isinstance(use.ctx, ast.Load) and ast.unparse(use) == shown and (
                use.lineno < node.lineno or any(use is n for n in ast.walk(node.value))):
            return True
    return False


def _registered_parameter_names(model) -> frozenset[str]:
    """Source text of the names the class registers parameters under with `register_parameter(name,
    ...)` on itself or a submodule (`self.module.register_parameter(self.name + "_u", u)`)."""
    if "register_parameter" not in model.ctx.source.text:
        return frozenset()
    return frozenset(ast.unparse(node.args[0]) for node in model.ctx.tree_index.nodes_within(model.info.node, ast.Call)
                     if isinstance(node.func, ast.Attribute) and node.func.attr == "register_parameter"
                     and len(node.args) == 2)


def _fetches_registered(value, fn, registered) -> bool:
    """`getattr(self.module, self.name + "_u")`: one of those parameters, read back by its name."""
    return isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "getattr" \
        and len(value.args) >= 2 and ast.unparse(value.args[1]) in registered \
        and (fn.is_self(value.args[0]) or self_attr_root(value.args[0], fn.self_name) is not None)




def _root_call_receiver(node):
    # self.buf.mul_(m).add_(x) -> self.buf
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        node = node.func.value
    return node


def _input_names(fn) -> set[str]:
    """Forward's inputs and the locals computed from them."""
    from dpcheck.analysis.dataflow import batch_derived
    return set(batch_derived(fn)) | set(parameters_of(fn))


def _uses(node, names) -> bool:
    return node is not None and any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(node))
