"""
## What it does
In training scripts, flags `.backward()` on what a DataParallel-wrapped model
returned (or an element of it: `out[0]`, `out["loss"]`, `out.loss`) without a
reduction in between.

An element rebound between the call and the backward is followed to its new value
(`for k in losses: losses[k] = torch.mean(losses[k])` reduces every element; `losses["d"] =
losses["a"] + losses["b"]` is still the sum of two vectors). So is a loss added up, scaled or
accumulated from such outputs before the backward (`err = err_real + err_fake`, `err = 0.0; err +=
crit(pred, y)` where the criterion itself is wrapped: `nn.DataParallel(nn.MSELoss())`), unless
it is reduced on the way.

## Why is this bad?
When forward returns a loss, each replica returns a 0-dim tensor and gather turns them
into a vector with one value per GPU. `loss.backward()` then fails with `grad can be
implicitly created only for scalar outputs`, after a single-GPU test run went fine.

A DataParallel subclass whose own `forward` calls no `gather` (nor a base's `forward`) is
not the stock wrapper: what it returns is its own (PyTorch-Encoding's `DataParallelCriterion`
returns `Reduce.apply(*outputs) / len(outputs)`, a 0-dim mean), and its output is left alone.
DP401 still treats a class such a subclass wraps as gathered. A subclass that defines its own
`gather` may reduce the per-GPU losses there: where every return of that gather reduces the part
of the output the loss is (the whole output, or the tuple element a script unpacks it from:
neural_sp's `CustomDataParallel` returns `gather(losses, ...).mean(), observation_avg` and the
script takes `loss, observation = model(...)`), nothing is reported; where it does not, a warning,
in its own file or another (an error where the subclass of another file keeps the stock gather).

## How to fix
Reduce first: `loss = model(x, y).mean()` (or `.sum()`), as transformers does with
`if n_gpu > 1: loss = loss.mean()`.
"""

from __future__ import annotations

import ast

from dpcheck.analysis.scripts import (
    STOCK_OUTPUT_CONDITION,
    UNREDUCED_GATHER_CONDITION,
    mentions_dataparallel,
    reduced_positions,
    replaced_output,
    script_facts,
)
from dpcheck.constants import DATAPARALLEL_CLASSES
from dpcheck.findings import Severity
from dpcheck.rule import TRAINING_SCRIPT, Rule


class UnreducedLossBackward(Rule):
    code = "DP703"
    name = "unreduced-loss-backward"
    severity = Severity.ERROR
    not_confirmable = TRAINING_SCRIPT
    summary = "backward() on a DataParallel output: per-GPU losses are a vector, not a scalar"
    fix_hint = "Reduce the gathered loss first: loss = model(x, y).mean()"
    bad_example = """
        model = nn.DataParallel(NetWithLoss().cuda())
        loss = model(x, y)
        loss.backward()
    """
    good_example = """
        model = nn.DataParallel(NetWithLoss().cuda())
        loss = model(x, y).mean()
        loss.backward()
    """

    def check_file(self, ctx):
        if not mentions_dataparallel(ctx):
            return
        facts = script_facts(ctx)
        for node in ctx.nodes(ast.Call):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "backward"):
                continue
            target = node.func.value
            wrap = _output_of(target, facts, node.lineno)
            if wrap is None:
                continue
            requires = wrap.requires
            wrapper = ctx.resolve(wrap.call.func) if isinstance(wrap.call, ast.Call) else None
            if wrapper and ctx.local_name(wrapper) in ctx.classes:
                if ctx.classes[ctx.local_name(wrapper)].qualname in replaced_output(ctx):
                    continue  # this file's subclass returns its own (reduced) output
            elif wrapper and facts.dp_class(wrap.call) is not None and wrapper not in DATAPARALLEL_CLASSES:
                requires = (*requires, frozenset({f"{STOCK_OUTPUT_CONDITION}{wrapper}"}))
            # A DataParallel subclass of another file (`dp:<class>`, also for a wrapper handed in as
            # an argument): an error only where it keeps the stock gather.
            stock_gather = wrap.keeps_stock("gather")
            # Which part of the output the loss is: a subclass's own gather may reduce just that.
            position = _output_position(target, facts.scope_of(node), node.lineno)
            local = ctx.classes.get(ctx.local_name(wrapper)) if wrapper and ctx.local_name(wrapper) else None
            if local is not None and "gather" in local.methods \
                    and _reduces(ctx.function(local.methods["gather"], local), position):
                continue  # this file's subclass reduces the per-GPU losses in its own gather
            requires = (*requires, *(frozenset({f"{UNREDUCED_GATHER_CONDITION}{position}:{name}"})
                                     for name in sorted(c.partition(":")[2] for c in wrap.source.requires
                                                        if c.startswith("dp:"))))
            note = wrap.source.note
            if "gather" in note:  # a custom gather may reduce the per-GPU losses itself
                yield self.violation(node, f"`{ast.unparse(target)}.backward()` on the output of the "
                                     f"DataParallel-wrapped `{wrap.name}` ({note}): unless that gather reduces "
                                     "the per-GPU losses, backward gets a vector", severity=Severity.WARNING,
                                     requires=requires)
                continue
            if stock_gather:
                yield self.violation(node, f"`{ast.unparse(target)}.backward()` on the output of the "
                                     f"DataParallel-wrapped `{wrap.name}`: with the stock gather a loss comes back "
                                     "with one value per GPU and backward needs a scalar (a warning where the "
                                     "DataParallel subclass has a gather of its own, which may reduce them)",
                                     severity=Severity.WARNING, requires=requires, error_if=stock_gather,
                                     fix=self.offer_fix(f"Average the per-GPU losses: "
                                                        f"`{ast.unparse(target)}.mean().backward()`"))
                continue
            yield self.violation(node, f"`{ast.unparse(target)}.backward()` on the output of the "
                                 f"DataParallel-wrapped `{wrap.name}`: a loss comes back with one value "
                                 "per GPU and backward needs a scalar", requires=requires,
                                 fix=self.offer_fix(f"Average the per-GPU losses: "
                                                    f"`{ast.unparse(target)}.mean().backward()`"))

    def fix(self, finding, editor):
        import libcst as cst

        call = editor.node  # `<loss>.backward()`
        if isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute):
            loss = call.func.value
            mean = cst.Call(func=cst.Attribute(value=loss, attr=cst.Name("mean")))
            editor.replace(call, call.with_changes(func=call.func.with_changes(value=mean)))


def _reduces(gather, position: str) -> bool:
    reduced = reduced_positions(gather)
    return "" in reduced or position in reduced


def _output_position(target, scope, line) -> str:
    """The part of the wrapper's output that ``target`` (the tensor backward is called on) holds: the
    element index where it is `out[i]` or a name unpacked from the output (`loss, stats = model(x)`),
    "" for the whole output (or where it cannot tell)."""
    if isinstance(target, ast.Subscript) and isinstance(target.slice, ast.Constant) \
            and isinstance(target.slice.value, int) and not isinstance(target.slice.value, bool):
        return str(target.slice.value)
    if not isinstance(target, ast.Name):
        return ""
    last = None
    for sub in ast.walk(scope):
        if isinstance(sub, ast.Assign) and sub.lineno < line and any(
                isinstance(t, ast.Name) and t.id == target.id for t in ast.walk(sub.targets[0])) \
                and (last is None or sub.lineno > last.lineno):
            last = sub
    unpacked = last.targets[0] if last is not None and len(last.targets) == 1 else None
    if isinstance(unpacked, ast.Tuple) and isinstance(last.value, ast.Call):
        return next((str(i) for i, t in enumerate(unpacked.elts) if isinstance(t, ast.Name) and t.id == target.id), "")
    return ""


def _output_of(node, facts, line):
    """The wrapper's name if ``node`` is (an element of) its direct output."""
    element = node if isinstance(node, ast.Subscript) else None
    while isinstance(node, (ast.Subscript, ast.Attribute)) and not (
            isinstance(node, ast.Attribute) and node.attr in ("mean", "sum")):
        node = node.value
    if isinstance(node, ast.Call):
        return facts.called_wrap(node)
    if isinstance(node, ast.Name):
        scope = facts.scope_of(node)
        last = None
        added = []
        for sub in ast.walk(scope):
            if isinstance(sub, ast.Assign) and sub.lineno < line and any(
                    isinstance(t, ast.Name) and t.id == node.id for target in sub.targets
                    for t in ([target] if not isinstance(target, ast.Tuple) else target.elts)):
                if last is None or sub.lineno > last.lineno:
                    last = sub
            elif isinstance(sub, ast.AugAssign) and sub.lineno < line and isinstance(sub.target, ast.Name) \
                    and sub.target.id == node.id:
                added.append(sub)
        added = [sub for sub in added if last is None or sub.lineno > last.lineno]
        # `err = 0.0; err += wrapped(...)`: a vector added in keeps the sum a vector, and so does
        # adding or scaling by anything else once it holds one.
        for sub in added:
            wrap = _output_in(sub.value, facts, sub.lineno) if isinstance(sub.op, _ELEMENTWISE) else None
            if wrap is not None:
                return wrap
        if any(not isinstance(sub.op, _ELEMENTWISE) for sub in added):
            return None
        if last is not None:
            if element is not None:
                rebound = _element_rebound(element, node.id, scope, last.lineno, line)
                if rebound is not None:
                    return _output_in(rebound.value, facts, rebound.lineno)
            if isinstance(last.value, ast.BinOp):
                return _output_in(last.value, facts, last.lineno)
            return _output_of(last.value, facts, last.lineno) if not isinstance(last.value, ast.Name) else None
    return None


# Arithmetic that keeps a per-GPU vector a vector (a scalar weight, another loss added to it).
_ELEMENTWISE = (ast.Add, ast.Sub, ast.Mult, ast.Div)


def _output_in(value, facts, line):
    """The wrapper's name if ``value``, or a term of its sums and products, is (an element of) its
    direct output (`losses["d"] = losses["wgan_d"] + losses["wgan_gp"] * lam` is still a vector)."""
    if isinstance(value, ast.BinOp):
        if not isinstance(value.op, _ELEMENTWISE):
            return None
        return _output_in(value.left, facts, line) or _output_in(value.right, facts, line)
    return _output_of(value, facts, line)


def _element_rebound(element, name, scope, start, line):
    """The last store into ``name[...]`` between the output's assignment and the backward that may
    rebind ``element`` (the same constant key, or a key computed at run time: a loop over the
    keys, `for k in losses: losses[k] = losses[k].mean()`); None if the element still holds
    what the wrapper returned."""
    key = element.slice
    last = None
    for sub in ast.walk(scope):
        if not (isinstance(sub, ast.Assign) and start < sub.lineno < line):
            continue
        for target in sub.targets:
            if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name) \
                    and target.value.id == name and (
                        not isinstance(target.slice, ast.Constant) or not isinstance(key, ast.Constant)
                        or target.slice.value == key.value) and (last is None or sub.lineno > last.lineno):
                last = sub
    return last
