"""
## What it does
Flags a 0-dim tensor returned from a model's `forward`, alone or inside a tuple, list
or dict (also one merged into a returned dict with `out.update({"loss": loss})`): a loss from `F.cross_entropy(...)` or an `nn.*Loss` module, or a full
reduction such as `x.mean()` or `x.sum()` with no dim, also when a function or method of the
file returns it (`penalty = self.calc_gradient_penalty(...)`) or an option read off the
model's configuration weighs it (`torch.mean(d) * self.config["alpha"]`), or it is read back from
an attribute of self every store of which, in any method of the class, is 0-dim or a number
(`self.loss_ce = F.cross_entropy(...)` then `return logits, self.loss_ce`; PHiSeg's `self.loss_tot
= 0` then `self.loss_tot += w * self.loss_dict[key]` in the helpers, the dict's items being 0-dim
means). Also what a module of
a project class returns, of this file or another, where every return of that class's forward
that can run with the options the call passes is 0-dim (`loss = self.crf(emissions, tags)`,
pytorch-crf's mean log-likelihood, unless the call asks for `reduction="none"`); an option given
by position or with a value the call does not show is not guessed at. Element k of such a call
(`y, aux_loss = self.gate(x)`) is 0-dim where every tuple that forward returns holds a 0-dim value
there (a sparsely gated mixture's load-balancing loss). A function imported from another module of
the project is 0-dim where every return of it is (`utils.at_loss(x, y)`); a helper's return of a
constant one-value tensor (`if x.shape[0] == 1: return torch.tensor([0])`) leaves the others to
decide, and a 0-dim total weighed by a number (`loss *= self.loss_coef`; in a layer of another file,
also by an option of its forward that the call leaves to a numeric default, `loss_coef=1`) stays 0-dim. Each item of a returned list comprehension is a returned value. Python's `sum` of 0-dim
values is 0-dim: `sum(losses)` where every item of the local list, displayed or appended, is one, or
`sum(F.l1_loss(a, b) for a, b in pairs)` (a list that also takes another value, or is extended, is not read).

A plain function over a dict of weights that a helper of the project runs as the model is checked
like forward: the helper does DataParallel's steps itself (`parallel_apply` over callables made
from its parameter, `partial(f, params=p)`, on chunks `scatter` makes of another, and returns
`gather(...)` of the outputs: szagoruyko's `utils.data_parallel(f, inputs, params, mode,
range(ngpu))`), and the function handed to it by name is one defined in the calling scope or one
around it.

## Why is this bad?
DataParallel gathers outputs by concatenating them along dim 0. A 0-dim tensor has no
dim 0, so gather warns `Was asked to gather along dimension 0, but all input tensors
were scalars; will instead unsqueeze and return a vector` and returns one value per
GPU. `loss.backward()` then fails with `grad can be implicitly created only for scalar
outputs`, and a `.mean()` of the vector weights uneven chunks equally. Under
`DataParallel(model, dim=k)` with k other than 0, gather views each scalar as a one-element
vector and then cannot concatenate those along dim k: the forward call raises.

Classes whose name ends in `Loss`, `Criterion`, `Metric` or `CE` (`ConfidenceBasedCE`), or whose
base's does (`Accuracy(base.Metric)`), and that own no layers (a learned tensor of their own,
CenterLoss's centers, is no layer) (in `<A>With<B>`, `<A>` names the class: `CrossEntropyLossWithOHEM`
and `SoftBCEWithLogitsLoss` are losses, `ClassifierWithLoss` a model), and
classes built as children of another module in the same file, are not checked unless a
scanned script wraps them: DataParallel gathers only the wrapped model's output. Nor is a
harness that parallelises a submodule of its own (`self.model = nn.DataParallel(self.model)`),
unless a script wraps the harness too.
Where every scanned file wraps the class in a DataParallel subclass that defines its own
`gather` (CSAILVision's `DictGatherDataParallel`, which unsqueezes 0-dim outputs before
concatenating), the finding is advice (info) and says so: that code, not the stock gather,
decides what becomes of the scalar.

A return behind an option the caller leaves out by default (inside `if labels is not None:`,
`if a is not None and b is not None:`, `if not return_dict:`) is a warning: it runs only when
the caller asks for it. It is an error where a call of a DataParallel wrapper of the class in
the scanned scripts passes the options that a `<option> is not None` test asks for
(`loss = model(input_ids, labels=labels)` after `model = nn.DataParallel(model)`): the path
runs when the model is wrapped. A loss computed or returned behind an optional argument of
forward with a None or False default (nanoGPT's `GPT.forward(idx, targets=None)`, which computes
the loss only under `if targets is not None:`) is advice (info) where no scanned call passes that
argument, through the wrapper or otherwise (the same reading as DP204's): the scripts drive the
model for its other outputs, and the 0-dim value is never returned. A class no scanned file builds
(a library model, whose callers are user code) counts as called with it.

## How to fix
Return per-sample losses (`reduction="none"`) and reduce after gather, or reduce the
gathered vector in the training loop (`loss = loss.mean()`).
"""

from __future__ import annotations

import ast

from dpcheck.analysis.functional import parallel_functions
from dpcheck.analysis.guards import optional_argument_guard
from dpcheck.analysis.outputs import (
    CodeOfNoClass,
    added_by_concatenation,
    error_when_passed,
    function_leaves,
    gathered_class,
    optional_path,
    optional_severity,
    reason_requires,
    returned_leaves,
    scalar_reason,
)
from dpcheck.analysis.wrapping import wrapped_batch_dim
from dpcheck.findings import ObservationKind as K
from dpcheck.findings import Severity
from dpcheck.rule import Rule


class ScalarReturnedFromForward(Rule):
    code = "DP401"
    name = "scalar-returned-from-forward"
    severity = Severity.ERROR
    wrapper_method = "gather"
    forward_code_only = True
    confirms = frozenset({K.SCALAR_OUTPUT_GATHERED, K.SCALAR_OUTPUT_SHAPE_DIFFERS, K.GATHER_FAILED, K.GRADS_DIFFER,
                          K.LOSS_MEAN_WEIGHTS_CHUNKS_EQUALLY})
    summary = "A 0-dim tensor returned from forward is gathered into a vector with one value per GPU"
    fix_hint = "Return per-sample values (reduction='none') or reduce the gathered output outside the model"
    bad_example = """
        class WithLoss(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 3)

            def forward(self, x, y):
                logits = self.fc(x)
                return F.cross_entropy(logits, y)
    """
    good_example = """
        class WithLoss(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 3)

            def forward(self, x, y):
                logits = self.fc(x)
                return F.cross_entropy(logits, y, reduction="none"), logits.mean(dim=1)
    """

    def check_class(self, model):
        if not gathered_class(model):
            return
        consequence = _gather_consequence(wrapped_batch_dim(model))
        leaves = list(returned_leaves(model))
        # `return ((loss,) + output) if loss is not None else output` beside `return
        # XOutput(loss=loss, ...)` (transformers' `return_dict=False` arms): one loss, one finding,
        # where it is returned otherwise.
        returned_otherwise = {id(leaf) for leaf, fn, anchor in leaves if not added_by_concatenation(anchor, fn)}
        for leaf, fn, anchor in leaves:
            if added_by_concatenation(anchor, fn) and id(leaf) in returned_otherwise:
                continue
            reason = scalar_reason(leaf, fn, model)
            if reason:
                # Computed or returned behind an optional argument of forward (`if targets is not None:`):
                # advice where no scanned caller passes it, not reported where the path never runs wrapped.
                guards = [optional_argument_guard(model, fn, leaf)]
                if anchor is not leaf:
                    guards.append(optional_argument_guard(model, model.forward, anchor))
                if None in guards:
                    continue
                advice_if = tuple(condition for guard in guards for condition in guard.get("advice_if", ()))
                severity = optional_severity(anchor, model, leaf)
                # Behind `if labels is not None:` that a call through the wrapper passes: it runs wrapped.
                error_if = error_when_passed(anchor, model) if severity is Severity.WARNING and \
                    not optional_path(leaf, model, flags_only=True) else ()
                yield self.violation(anchor, f"forward returns a 0-dim tensor ({reason}): {consequence}",
                                     severity=severity, error_if=error_if, requires=reason_requires(reason),
                                     advice_if=advice_if)


    def check_file(self, ctx):
        # A plain function over a dict of weights, run as the model by a data-parallel helper of the
        # project (szagoruyko's functional zoo): what it returns is gathered like forward's output.
        consequence = _gather_consequence(None)
        for run in parallel_functions(ctx):
            plain = CodeOfNoClass(ctx)
            for leaf, fn, anchor in function_leaves(run.fn, plain):
                reason = scalar_reason(leaf, fn, plain)
                if reason:
                    yield self.violation(anchor, f"`{run.fn.name}`, run as the model by `{run.helper}`, "
                                         f"returns a 0-dim tensor ({reason}): {consequence}",
                                         requires=run.requires + reason_requires(reason))


def _gather_consequence(dim: ast.AST | None) -> str:
    """What gather does with the scalars, given the `dim=` a script of this file wraps the class with."""
    if dim is None or isinstance(dim, ast.Constant) and dim.value == 0:
        return "DataParallel gathers it into a vector with one value per GPU"
    # Gather turns each scalar into a one-element vector, which has no dim 1 (or -2, ...) to concatenate on.
    return (f"DataParallel(dim={ast.unparse(dim)}) cannot gather it: the one-element vectors it makes of "
            "the scalars have no such dim, so the call raises")

