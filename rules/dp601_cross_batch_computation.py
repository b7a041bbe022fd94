"""
## What it does
Flags computations across the batch dimension in code that runs during `forward`, on
tensors computed from forward's inputs: reductions and normalisations over dim 0
(`x.mean(0)`, `x.std(dim=0)`, `x.sum(axis=0)`, `softmax(x, dim=0)`, `F.normalize(x, dim=0)`), in-batch
similarity matrices (`q @ k.T`, `torch.mm(a, b.t())` of two batch tensors), labels
from `torch.arange(batch_size)` (contrastive losses), order statistics over every element of a
batch tensor whose value then meets the samples or the returned value (`torch.median(x)`,
`x.quantile(q)` without a dim, `x.view(-1).topk(k)`, `torch.median(x[x > 0])`), extremes over every
element that divide the samples (`x / x.abs().max()`, `(z - z.min()) / (z.max() - z.min())`), and samples
paired by strided slices of the batch dim (`x[0::2] * lam + x[1::2] * (1 - lam)`).

## Why is this bad?
Each DataParallel replica sees only its B/N slice. Batch statistics come from the
slice, an in-batch contrastive loss has N times fewer negatives (CLIP on 8 GPUs with a
batch of 128 computes eight 16x16 matrices, not one 128x128), and batch centering
subtracts a different mean on every GPU. Shapes are right; the objective is silently
different from the single-device run.

Module-level functions of the same file that forward's code calls with a batch tensor run on
the replicas too: their reductions count (TimesNet's `FFT_for_Period(x)`, whose
`abs(xf).mean(0)` picks the periods every sample is reshaped by, from the replica's slice).

A reduction over one sample's rows of a packed tensor is per sample, not across the batch:
`h.narrow(0, start, n).mean(0)` or `rep[scope[i][0]:scope[i][1]].sum(0)` where a bound is bound per
iteration of a loop over the batch (OpenNRE's bags of sentences) (see DP404 for the lists that count as one entry per sample). So is a reduction over a new
leading dim that a `torch.stack` of a list per layer or step makes, or a `torch.cat` on dim 0 of such
a list whose items are each given a new dim 0 (`torch.cat([h.unsqueeze(0) for h in hidden_states[-4:]],
0).sum(0)`: the last layers added up, per sample). So is a reduction over dim 0 of the final states a
recurrent layer returns after its outputs (`_, (h_n, c_n) = self.lstm(x)`, then `h_n.sum(0)`): they are
shaped (layers x directions, B, H) whatever `batch_first` says.

An order statistic over all elements differs under any split, even into equal chunks (the median
of the whole batch is not the median of a half). It is reported where its value meets a batch
tensor (arithmetic, a comparison, an index) or is returned; one turned into a Python number or
only logged is not. Sorts are left out (a sort of a flattened tensor mostly groups tokens for
dispatch, a permutation undone later). A loop over a parameter is read as a loop over the samples
unless the parameter is annotated as a list of tensors (`List[torch.Tensor]`, a discriminator's
per-scale outputs), whose items are batch tensors.

An extreme over all elements (`x.max()`, `torch.amin(x)`, no dim) differs under a split too (the
batch's maximum lies in one chunk only). It is reported where it divides the samples: as the
divisor (`x / x.abs().max()`, scores divided by the batch's largest distance through
`torch.maximum(one, torch.max(s))`), or both ends of a min-max normalisation of every point of every
sample (`(z - z.min()) / (z.max() - z.min())`), in whatever layout the tensor holds the samples
(stacked on a new leading dim, permuted). Extremes are mostly lengths, bounds and tests
(`torch.arange(lengths.max())`, `if x.max() > 1`) or a shift before a softmax (`x - x.max()`, which
the softmax undoes): those are not reported. Nor is a shift, except where per-sample values are re-based
on the padded size less the extreme (`lens + x.size(1) - lens.max()`: lengths moved so that the longest
ends at the padded end) in a class with a bidirectional RNN: the collator pads a batch to its longest
sample, so the shift is zero on one device, but a replica's chunk without that sample extends every length
into the padding, where the backward direction then starts (a forward-only layer's valid steps come out
the same).

Samples paired by two strided slices of dim 0 with the same step and different starts (mixup
partners or siamese pairs laid out interleaved) are paired within each replica's chunk: a chunk
that starts at an odd sample or has an odd size pairs other samples than the caller's targets, or
raises on slices of different lengths. Even chunks keep the pairs, so it is a warning. A function
of another scanned file that pairs a parameter so (audioset_tagging_cnn's `do_mixup`) is reported
where forward's code hands it a batch tensor.

Samples selected by an index forward is handed (`torch.index_select(x, 0, perm)`, `x.index_select(0,
batch["unsort"])` on a batch tensor `x`, the index an argument or an entry of one, moved or cast at
most, in the forward of a class its file does not build as a layer) are picked by positions in the
whole batch: scatter splits the index like the batch, so a replica's chunk of it points past its own
slice (an index error) or at other samples than on one device (a permutation swapping the batch's
halves cannot pair across chunks). An index into a parameter or a buffer, along another dim,
computed in forward from the chunk (a sort undone in the call), or handed to a layer by its parent
is not reported.

A batch statistic used only as the fallback of `torch.where` (the scale of a series with no
observed values) differs only for the rows that take the fallback: a warning (latent).

A class that defines `__data_parallel_replicate__` (the callback `DataParallelWithCallback` or
`patch_replication_callback` runs on each replica, as Synchronized-BatchNorm-PyTorch's
`_SynchronizedBatchNorm` does) is written for DataParallel: its batch sums are per-replica partial
sums that its own code hands to a master replica to reduce across all of them (and, with a stock
DataParallel that never calls the callback, that path does not run). It is not reported.

A statistic behind a command-line switch off by default is latent, a warning (`if
self.opt.latent_norm:` on `add_argument("--latent_norm", action="store_true")`, the `else:` of a
`store_false` one). Forward's own optional arguments are not read so: a training loop passes
`return_loss=True` to the contrastive model it trains. A switch no
parser of the read's own file defines is looked up in the options every scanned file's parsers
define (EnlightenGAN's `options/base_options.py`); one that no scanned file defines, or that two
parsers give different defaults, may be on as the program stands: it stays an error.

A loss module (`*Loss`, `*Criterion`, owning no layers) reduces over the batch by design: it
is reported only where a scanned file wraps it or builds it inside a module (the wrapped
model's layer, or a part handed to its constructor). A criterion a script applies to the
gathered output runs on one device and sees the whole batch.

## How to fix
Return the embeddings from forward and compute batch-wide terms after gather (or with
`all_gather` under DistributedDataParallel).
"""

from __future__ import annotations

import ast

from dpcheck.analysis.classes import IN_MODEL_CONDITION
from dpcheck.analysis.dataflow import (OPTION_PATH_NOTE, argument, batch_derived, dim_argument, fixed_off_by_callers,
                                      is_batch_tensor, is_true, pairwise_over_batch, parameters_of, passed_values)
from dpcheck.analysis.guards import optional_argument_guard
from dpcheck.analysis.options import behind_switch_off_by_default
from dpcheck.analysis.outputs import gathered_verdict, is_loss_module, output_record_name
from dpcheck.analysis.pairing import STRIDED_PAIRING_CONDITION, pairing_helpers, strided_pairings
from dpcheck.analysis.scripts import LIBRARY_ROOTS
from dpcheck.analysis.torch_api import BIDIRECTIONAL_POSITION, RECURRENT_LAYERS
from dpcheck.analysis.wrapping import batch_dim_is_zero
from dpcheck.constants import REPLICATION_CALLBACK
from dpcheck.findings import ObservationKind as K
from dpcheck.findings import Severity
from dpcheck.record import replace
from dpcheck.rule import Rule

# Statistics over the batch. Running sums and arg-reductions over dim 0 are mostly index
# bookkeeping (cu_seqlens, level offsets, routing), not batch statistics: not included.
_REDUCTIONS = frozenset({"mean", "std", "var", "sum", "logsumexp", "softmax", "log_softmax", "norm",
                         "normalize", "median"})


class CrossBatchComputation(Rule):
    code = "DP601"
    name = "cross-batch-computation"
    severity = Severity.ERROR
    forward_code_only = True
    confirms = frozenset({K.VALUES_DIFFER, K.INTEGER_VALUES_DIFFER, K.GRADS_DIFFER})
    summary = "Batch-wide statistics or in-batch similarities in forward see only one replica's slice"
    fix_hint = "Return embeddings and compute batch-wide terms after DataParallel's gather"
    bad_example = """
        class Contrastive(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(8, 8)

            def forward(self, a, b):
                qa = F.normalize(self.proj(a), dim=-1)
                qb = F.normalize(self.proj(b), dim=-1)
                logits = qa @ qb.T
                labels = torch.arange(a.shape[0], device=a.device)
                return F.cross_entropy(logits, labels, reduction="none")
    """
    good_example = """
        class Contrastive(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(8, 8)

            def forward(self, a, b):
                qa = F.normalize(self.proj(a), dim=-1)
                qb = F.normalize(self.proj(b), dim=-1)
                return qa, qb, qa.mean(dim=-1), torch.softmax(qa, dim=1)
    """

    def check_class(self, model):
        # Where the class's output is gathered only on a cross-file condition (no other file uses it
        # as a layer), the findings hold on it; a selection by a handed-in index does not: its index
        # is what scatter split whether or not another file also builds the class.
        gathered, condition = gathered_verdict(model)
        on_gathered = (frozenset({condition}),) if condition and not is_loss_module(model) else ()
        for violation in self._check_class(model, gathered):
            if on_gathered and not violation.message.startswith(_INDEX_MESSAGE_START):
                violation.requires = (*violation.requires, *on_gathered)
            yield violation

    def _check_class(self, model, gathered):
        if not batch_dim_is_zero(model):
            return  # wrapped with `dim=k`: dim 0 of forward's inputs is not what DataParallel splits
        if model.find_method(REPLICATION_CALLBACK) is not None:
            return  # replica-aware: its own code exchanges the replicas' partial statistics
        loss_module = is_loss_module(model)
        if loss_module:
            # A loss module reduces over the batch by design, and runs on replicas only inside the
            # wrapped model (as its layer, or wrapped itself): a criterion a script applies to the
            # gathered output sees the whole batch on one device.
            model.conditions.add(f"{IN_MODEL_CONDITION}{model.info.qualname}")
        # The wrapped model's returned similarity matrices are DP408's; a layer's go to its parent.
        # (A loss module's outputs are gathered only where a file wraps it: not asked, as that
        # condition would hold back its findings that in_model alone allows.)
        outputs_gathered = not loss_module and gathered
        # An index its parent computes and hands a layer is not what scatter split: only the wrapped
        # model's own arguments are (a class its file builds as a layer is not that model).
        layer_of_file = not gathered
        for fn in (*model.in_forward, *_file_functions_called(model)):
            for violation in self._check_function(model, fn, outputs_gathered, layer_of_file):
                if violation.severity not in (None, Severity.ERROR):
                    yield violation
                    continue
                # Behind a command-line switch off by default (`if self.opt.latent_norm:` on a
                # `store_true` option): latent, a warning; where the project's option table decides,
                # the error stands on the condition that it shows no such default. (Not forward's own
                # options: a training loop passes `return_loss=True` to the contrastive model it trains,
                # and the path that computes the in-batch loss is the one that runs.)
                path = behind_switch_off_by_default(violation.node, model.ctx)
                if path is None:
                    yield violation
                    continue
                latent = dict(path.latent)
                latent["requires"] = (*violation.requires, *latent.get("requires", ()))
                yield replace(violation, message=violation.message + OPTION_PATH_NOTE,
                              severity=Severity.WARNING, **latent)
                if path.default_path:
                    yield replace(violation, requires=(*violation.requires, path.default_path))
            yield from self._pairings(model, fn)

    def _check_function(self, model, fn, outputs_gathered, layer_of_file):
        """The findings of one function forward's code runs (see ``_check_class``)."""
        resolve = model.ctx.resolve
        for node in fn.nodes(ast.Call, ast.BinOp):
            if pairwise_over_batch(node, fn, resolve):
                if not (outputs_gathered and fn is model.forward and _only_returned(node, fn, 0)):
                    yield self._similarity(node)
                continue
            if isinstance(node, ast.BinOp):
                continue
            func = node.func
            name = resolve(func) or ""
            last = name.rsplit(".", 1)[-1] if name.startswith("torch.") else ""
            if isinstance(func, ast.Attribute) and func.attr in _REDUCTIONS and not last \
                    and _dim_zero(node, first_positional=0) and is_batch_tensor(_elementwise_operand(func.value, fn, model.ctx), fn):
                found = self._reduction(model, node, f"`.{func.attr}` over dim 0", fn)
                if found:
                    yield found
            elif last in _REDUCTIONS and node.args and _dim_zero(node, first_positional=1) \
                    and is_batch_tensor(_elementwise_operand(node.args[0], fn, model.ctx), fn):
                found = self._reduction(model, node, f"`{ast.unparse(func)}` over dim 0", fn)
                if found:
                    yield found
            elif (statistic := _order_statistic(node, last, fn, model.ctx)) is not None:
                if fixed_off_by_callers(model, fn, node):
                    continue  # in an arm of a helper's flag that no call from forward takes
                if statistic in _WHOLE_TENSOR_EXTREMES:
                    if _scales_batch(node, fn):
                        yield self.violation(node, f"`{statistic}` over all elements of a batch tensor scales "
                                             "the samples in forward: each DataParallel replica takes it over "
                                             "its own slice, so the samples are normalised by another value "
                                             "than on one device")
                    elif (size := _padded_size_shift(node, fn)) is not None and _reads_backwards(model):
                        yield self.violation(node, f"`{statistic}` over all elements of a batch tensor, taken "
                                             f"from the padded size `{size}`, shifts the samples in forward: "
                                             "a batch padded to its longest sample gives no shift on one device, "
                                             "but each DataParallel replica takes the extreme over its own slice, "
                                             "so in a chunk without the batch's longest sample the bidirectional "
                                             "layer's backward pass starts in the padding")
                elif _applied_to_batch(node, fn):
                    yield self.violation(node, f"`{statistic}` over all elements of a batch tensor in forward: "
                                         "each DataParallel replica takes it over its own slice, so the "
                                         "samples it is applied to get another value than on one device")
            elif fn is model.forward and not layer_of_file \
                    and (index := _batch_index_argument(node, last, fn)) is not None:
                yield self.violation(node, _INDEX_MESSAGE.format(index=ast.unparse(index)))
            elif last == "arange" and node.args and _batch_size(node.args[-1] if len(node.args) == 1 else None, fn) \
                    and _used_as_targets(node, fn, model):
                yield self.violation(node, "`torch.arange(batch_size)` as targets: each DataParallel "
                                     "replica numbers only its own slice, so in-batch labels and "
                                     "negatives come from B/N samples")

    def _pairings(self, model, fn):
        """Samples paired by strided dim-0 slices (see ``pairing``): in forward's own code, and at the
        calls of forward's code that hand a batch tensor to a function pairing that parameter, of this
        file or (on a condition the index settles) imported from another. A warning: even chunks keep
        the pairs."""
        ctx = model.ctx
        if fn.owner is not None:  # (a module function's pairings are reported where forward's code calls it)
            for node, names in strided_pairings(fn, ctx):
                guard = optional_argument_guard(model, fn, node)
                if guard is not None and any(batch_derived(fn).get(name) for name in names):
                    yield self.violation(node, _PAIRING_MESSAGE, severity=Severity.WARNING, **guard)
        local = ctx.fact(pairing_helpers)
        imported = ctx.imports.aliases
        for call, name in ctx.named_calls(fn):
            root = call.func
            while root.__class__ is ast.Attribute:
                root = root.value
            # A function of this file, or one imported (`do_mixup`, `utils.do_mixup`); not a method
            # of a local or of self.
            if root.__class__ is not ast.Name or root.id in fn.local_values:
                continue
            func = call.func
            if func.__class__ is ast.Name and func.id in ctx.module_functions:
                positions = local.get(func.id)
                if not positions or not any(int(i) < len(call.args) and is_batch_tensor(call.args[int(i)], fn)
                                            for i in positions):
                    continue
                requires = ()
            elif root.id in imported and "." in name and not name.startswith(LIBRARY_ROOTS):
                batch = [i for i, arg in enumerate(call.args) if is_batch_tensor(arg, fn)]
                if not batch:
                    continue
                requires = (frozenset({f"{STRIDED_PAIRING_CONDITION}{name}@{','.join(map(str, batch))}"}),)
            else:
                continue
            guard = optional_argument_guard(model, fn, call)
            if guard is not None:
                callee = ast.unparse(func)
                yield self.violation(call, f"`{callee}` {_PAIRING_MESSAGE[0].lower()}{_PAIRING_MESSAGE[1:]}",
                                     severity=Severity.WARNING, requires=requires, **guard)

    def _reduction(self, model, node, what, fn):
        use = _reduction_use(node, fn)
        if use == "unused" or fixed_off_by_callers(model, fn, node):
            return None
        if use == "fallback":
            return self.violation(node, f"{what} of a batch tensor in forward, used only as the fallback of "
                                  "`torch.where`: each DataParallel replica computes it over its own slice, "
                                  "which changes only the samples that take the fallback (rows with no "
                                  "data of their own)", severity=Severity.WARNING)
        return self.violation(node, f"{what} of a batch tensor in forward: each DataParallel replica "
                              "computes it over its own slice of the batch")

    def _similarity(self, node):
        return self.violation(node, "An in-batch similarity matrix in forward: each DataParallel replica "
                              "compares only its own B/N samples (fewer negatives)")


_INDEX_MESSAGE = ("selects samples of a batch tensor by `{index}`, an index forward is handed: DataParallel "
                  "splits the index like a batch, so each replica gets positions in the whole batch for its own "
                  "slice (out of range, or pairing samples of its chunk only)")
_INDEX_MESSAGE_START = _INDEX_MESSAGE.partition("{")[0]
_PAIRING_MESSAGE = ("Pairs samples by strided batch slices (`x[0::2]` with `x[1::2]`) in forward: each "
                    "DataParallel replica pairs within its chunk, so a chunk of odd start or size pairs "
                    "other samples than the caller (or raises)")


def _file_functions_called(model) -> list:
    """The module-level functions of this file that forward's code calls, by their plain name (no
    local of the caller shadows it), with a batch tensor among the arguments, outside any `if`
    (or conditional expression, `match`, `try` handler) of the caller; and those that these call
    so, in turn. They run on every replica with its slice, on every call. A guarded call runs
    only when its flag is set, and the flag's default usually lives in another file (a config
    class: transformers' MoE `load_balancing_loss_func` runs only with the non-default
    `output_router_logits`), so guarded calls are not followed."""
    ctx = model.ctx
    functions = ctx.module_functions
    if not functions:
        return []
    found: dict[int, object] = {}
    work = list(model.in_forward)
    while work:
        fn = work.pop()
        for call in fn.nodes(ast.Call):
            func = call.func
            if func.__class__ is not ast.Name or func.id in fn.local_values:
                continue
            node = functions.get(func.id)
            if node is None or id(node) in found or _guarded(call, fn) \
                    or not any(is_batch_tensor(v, fn) for v in passed_values(call)):
                continue
            found[id(node)] = callee = ctx.function(node, None)
            work.append(callee)
    return list(found.values())


_GUARDS = (ast.If, ast.IfExp, ast.Match, ast.ExceptHandler, ast.BoolOp)


def _guarded(node, fn) -> bool:
    """Is ``node`` inside a branch of ``fn`` that may not run (an `if` arm, a conditional
    expression, a `match` case, an exception handler, the right of `and`/`or`)?"""
    parent = fn.parent(node)
    while parent is not None and parent is not fn.node:
        if isinstance(parent, _GUARDS):
            return True
        parent = fn.parent(parent)
    return False


def _elementwise_operand(node, fn, ctx):
    """The tensor under `abs(x)` / `torch.abs(x)` (an amplitude spectrum, `abs(torch.fft.rfft(x))`:
    the operand's shape, batch dim first), where the builtin is not rebound in the file or the
    function; else ``node`` itself."""
    while isinstance(node, ast.Call) and len(node.args) == 1 and not node.keywords:
        func = node.func
        if func.__class__ is ast.Name:
            if func.id != "abs" or func.id in fn.local_values or func.id in ctx.module_functions \
                    or ctx.resolve(func) != f"{ctx.module}.abs":
                break
        elif ctx.resolve(func) != "torch.abs":
            break
        node = node.args[0]
    return node


_TO_PYTHON = frozenset({"tolist", "item", "numpy", "cpu"})
_COMPARISONS = frozenset({"lt", "le", "gt", "ge", "eq", "ne", "less", "greater"})


def _reduction_use(node, fn, depth=0) -> str:
    """Where a batch reduction's value goes: 'unused' (discarded, turned into Python numbers, or
    only compared with: token counts for routing and capacity bookkeeping), 'fallback' (the
    `other` of `torch.where`: it matters only for the samples that take it), or 'value'
    (anything else: it reaches the output, a loss or state)."""
    if depth > 8:
        return "value"
    parent = fn.parent(node)
    while isinstance(parent, ast.Attribute) and isinstance(fn.parent(parent), ast.Call) \
            and fn.parent(parent).func is parent and parent.attr not in _TO_PYTHON:
        node = fn.parent(parent)  # `.sum(0).float()`: follow the chain
        parent = fn.parent(node)
    if isinstance(parent, ast.Expr):
        return "unused"
    if isinstance(parent, ast.Attribute) and parent.attr in _TO_PYTHON:
        return "unused"
    if isinstance(parent, ast.Call) and isinstance(parent.func, ast.Name) and parent.func.id in ("int", "float", "len"):
        return "unused"
    if isinstance(parent, ast.Compare):
        return "unused"
    if isinstance(parent, ast.Call) and node in parent.args:
        name = parent.func.attr if isinstance(parent.func, ast.Attribute) else getattr(parent.func, "id", "")
        if name == "where" and len(parent.args) == 3:
            return ("unused", "value", "fallback")[parent.args.index(node)]
        if name in _COMPARISONS:
            return "unused"
        if name in ("clamp", "squeeze", "unsqueeze", "clamp_min"):
            return _reduction_use(parent, fn, depth + 1)
    if isinstance(parent, ast.BinOp):
        return _reduction_use(parent, fn, depth + 1)
    targets = parent.targets if isinstance(parent, ast.Assign) else [parent.target] if isinstance(
        parent, ast.AugAssign) else []
    if len(targets) == 1 and isinstance(targets[0], ast.Name):
        uses = _uses_until_rebound(targets[0].id, parent, fn)
        kinds = {_reduction_use(u, fn, depth + 1) for u in uses}
        if not kinds or kinds == {"unused"}:
            return "unused"
        return "value" if "value" in kinds else "fallback" if "fallback" in kinds else "unused"
    return "value"


_OUTPUT_STEPS = frozenset({"t", "T", "mT", "float", "exp", "contiguous", "detach", "to", "clone"})


def _only_returned(node, fn, depth) -> bool:
    """Does the value only reach `return` (through names, scaling, `.t()`, tuples, dicts and
    output records)? Then it is an output, not an in-forward objective."""
    if depth > 8:
        return False
    parent = fn.parent(node)
    if isinstance(parent, ast.Return):
        return True
    if isinstance(parent, (ast.Tuple, ast.List, ast.Dict, ast.BinOp)) or (
            isinstance(parent, ast.Attribute) and parent.attr in _OUTPUT_STEPS):
        return _only_returned(parent, fn, depth + 1)
    if isinstance(parent, ast.Call) and parent.func is not node and (
            node in parent.args or any(k.value is node for k in parent.keywords)):
        return _only_returned(parent, fn, depth + 1) if _record_call(parent) else False
    if isinstance(parent, ast.keyword):
        call = fn.parent(parent)
        return _record_call(call) and _only_returned(call, fn, depth + 1)
    if isinstance(parent, ast.Call) and parent.func is node:
        return _only_returned(parent, fn, depth + 1)  # `x.t()`: the Attribute was checked above
    if isinstance(parent, ast.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0], ast.Name):
        uses = _uses_until_rebound(parent.targets[0].id, parent, fn)
        return bool(uses) and all(_only_returned(u, fn, depth + 1) for u in uses)
    return False


def _record_call(call) -> bool:
    func = call.func
    name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
    return name in ("dict", "tuple", "list") or output_record_name(name)


def _uses_until_rebound(name, assign, fn) -> list[ast.Name]:
    """Loads of ``name`` after ``assign`` and up to the next plain rebinding of it (whose own
    value may still read it: `n = n.tolist()`)."""
    after = (assign.lineno, assign.col_offset)
    # Only a rebinding that reads the old value is surely after it on every path (another may
    # sit in the other arm of an if).
    rebinds = [a.lineno for a in fn.nodes(ast.Assign) if a is not assign and (a.lineno, a.col_offset) > after
               and any(isinstance(t, ast.Name) and t.id == name for t in a.targets)
               and any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(a.value))]
    cutoff = min(rebinds, default=None)
    return [n for n in fn.nodes(ast.Name) if n.id == name and isinstance(n.ctx, ast.Load)
            and (n.lineno, n.col_offset) > after and (cutoff is None or n.lineno <= cutoff)]


def _dim_zero(call, first_positional) -> bool:
    dim = dim_argument(call, first_positional)
    return isinstance(dim, ast.Constant) and dim.value == 0 and not isinstance(dim.value, bool)


def _batch_index_argument(call, last, fn) -> ast.AST | None:
    """The index of `torch.index_select(x, 0, index)` / `x.index_select(0, index)` on a batch tensor
    `x` (not an attribute of self), where the index is one of the function's arguments (or an entry of one: `batch['perm']`),
    kept as handed in: positions in the whole batch (a permutation pairing samples, the inverse of a
    sort by length) that scatter splits like the batch itself."""
    func = call.func
    if last == "index_select":
        source, dim, index = argument(call, 0, "input"), argument(call, 1, "dim"), argument(call, 2, "index")
    elif func.__class__ is ast.Attribute and func.attr == "index_select" and not last:
        source, dim, index = func.value, argument(call, 0, "dim"), argument(call, 1, "index")
    else:
        return None
    if not (dim.__class__ is ast.Constant and dim.value == 0) or index is None or source is None \
            or fn.self_attr(source) is not None:
        return None  # (rows of a table the module keeps, a memory bank, are not the batch)
    return index if _handed_in(index, fn, 0) and is_batch_tensor(source, fn) else None


# Steps that keep an index tensor's values (a move, a dtype).
_INDEX_KEEPING = frozenset({"long", "to", "cuda", "int", "view", "flatten", "contiguous", "detach"})


def _handed_in(node, fn, depth) -> bool:
    """Is ``node`` an argument of ``fn``, or an entry of one, as handed in (through locals bound only
    to such values, and moves or dtype changes)?"""
    if depth > 4:
        return False
    if node.__class__ is ast.Name:
        if node.id in parameters_of(fn):
            return node.id not in fn.local_values
        values = fn.local_values.get(node.id)
        return bool(values) and all(_handed_in(value, fn, depth + 1) for value in values)
    if node.__class__ is ast.Subscript and node.slice.__class__ is ast.Constant:
        return _handed_in(node.value, fn, depth + 1)
    if node.__class__ is ast.Call and node.func.__class__ is ast.Attribute and node.func.attr in _INDEX_KEEPING:
        return _handed_in(node.func.value, fn, depth + 1)
    return False


def _batch_size(node, fn) -> bool:
    """`x.shape[0]`, `x.size(0)`, `len(x)` of a batch tensor, or a local bound to one."""
    if node is None:
        return False
    if isinstance(node, ast.Name):
        return any(_batch_size(v, fn) for v in fn.local_values.get(node.id, ()))
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "shape" \
            and isinstance(node.slice, ast.Constant) and node.slice.value == 0:
        return is_batch_tensor(node.value.value, fn)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "size" \
            and len(node.args) == 1 and isinstance(node.args[0], ast.Constant) and node.args[0].value == 0:
        return is_batch_tensor(node.func.value, fn)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "len" and node.args:
        return is_batch_tensor(node.args[0], fn)
    return False


def _used_as_targets(call, fn, model) -> bool:
    """Is the arange (or the name bound to it) passed to a loss, or compared with?"""
    uses = [call]
    parent = fn.parent(call)
    while isinstance(parent, ast.Attribute) and isinstance(fn.parent(parent), ast.Call):
        uses = [fn.parent(parent)]  # torch.arange(b).to(x.device)
        parent = fn.parent(uses[0])
    if isinstance(parent, ast.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0], ast.Name):
        name = parent.targets[0].id
        uses += [n for n in fn.nodes(ast.Name) if n.id == name and isinstance(n.ctx, ast.Load)]
    for use in uses:
        holder = fn.parent(use)
        if isinstance(holder, ast.keyword):
            holder = fn.parent(holder)
        if isinstance(holder, ast.Compare):
            return True
        if isinstance(holder, ast.Call):
            text = ast.unparse(holder.func).lower()
            if any(w in text for w in ("loss", "entropy", "nll", "criterion")):
                return True
    return False


# Order statistics over every element when given no dim (torch's and the tensor method's, and the
# position of the dim among the call's arguments after the tensor).
_WHOLE_TENSOR_STATISTICS = {"median": 0, "nanmedian": 0, "quantile": 1, "nanquantile": 1}
# Extremes over every element when called on the tensor alone (`x.max()`, `torch.amin(x)`); with
# any other argument they are taken along a dim or elementwise against another tensor.
_WHOLE_TENSOR_EXTREMES = frozenset({"max", "min", "amax", "amin"})
# Order statistics along one dim (the last by default): over all elements of a flattened tensor.
# Sorts are left out: a sort of a flattened tensor mostly groups tokens (MoE dispatch by expert),
# a permutation undone later, not a selection.
_ALONG_DIM_STATISTICS = {"kthvalue": 1, "topk": 1}


def _order_statistic(call, last, fn, ctx) -> str | None:
    """`torch.median(x)`, `x.quantile(q)` (no dim), `x.view(-1).topk(k)`, `torch.kthvalue(x.flatten(), k)`,
    `x.max()`, `torch.amin(x)` (no dim): an order statistic over all elements of a batch tensor, in
    any layout (or of a boolean-mask selection from one, `x[x > 0]`, which takes elements of every
    sample): its name; else None. Any split of the batch changes it, even into equal chunks."""
    func = call.func
    if last:
        if not call.args:
            return None
        name, operand, first = last, call.args[0], 1
    elif isinstance(func, ast.Attribute):
        name, operand, first = func.attr, func.value, 0
    else:
        return None
    if name in _WHOLE_TENSOR_STATISTICS:
        if dim_argument(call, first + _WHOLE_TENSOR_STATISTICS[name]) is not None:
            return None
    elif name in _WHOLE_TENSOR_EXTREMES:
        if len(call.args) > first or call.keywords:
            return None
    elif name in _ALONG_DIM_STATISTICS:
        dim = dim_argument(call, first + _ALONG_DIM_STATISTICS[name])
        if dim is not None and not (isinstance(dim, ast.Constant) and dim.value in (0, -1)
                                    and not isinstance(dim.value, bool)):
            return None
        operand = _flattened(operand, fn)
        if operand is None:
            return None
    else:
        return None
    operand = _elementwise_operand(operand, fn, ctx)
    if not (_batch_value(operand, fn) or _masked_selection(operand, fn)):
        return None
    return name


def _batch_value(node, fn) -> bool:
    """A batch tensor (``is_batch_tensor``), or arithmetic on one, or an item of a list of them, or a
    local holding every sample's elements in another layout (``_rearranged_batch``)."""
    if isinstance(node, ast.BinOp) and not isinstance(node.op, ast.MatMult):
        return _batch_value(node.left, fn) or _batch_value(node.right, fn)
    return is_batch_tensor(node, fn) or isinstance(node, ast.Name) and (
        node.id in _tensor_list_items(fn) or _rearranged_batch(node.id, fn))


# Steps that lay a tensor's elements out anew and keep every one of them.
_REARRANGING = frozenset({"permute", "transpose", "t", "T", "mT", "swapaxes", "swapdims", "movedim", "view",
                          "reshape", "flatten", "contiguous", "float", "abs"})


def _rearranged_batch(name, fn, depth=0) -> bool:
    """Is every binding of local ``name`` a tensor holding all the elements of a batch tensor, whatever
    its dims: a reorder or reshape of one, or `torch.stack`/`torch.cat` of a list with one among its
    items (SMART's `score_1 = torch.stack([(h - t) * sel, ...], dim=0)`, the batch in dim 1)? An
    order statistic over all its elements takes the replica's slice alike."""
    values = fn.local_values.get(name, ())
    return depth < 3 and bool(values) and all(_holds_batch(v, fn, depth + 1) for v in values)


def _holds_batch(node, fn, depth) -> bool:
    if isinstance(node, ast.BinOp) and not isinstance(node.op, ast.MatMult):
        return _holds_batch(node.left, fn, depth) or _holds_batch(node.right, fn, depth)
    if is_batch_tensor(node, fn):
        return True
    if isinstance(node, ast.Name):
        return _rearranged_batch(node.id, fn, depth)
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
        return False
    func = node.func
    if isinstance(func.value, ast.Name) and func.value.id == "torch":
        if func.attr in ("stack", "cat") and node.args and isinstance(node.args[0], (ast.List, ast.Tuple)):
            return any(_holds_batch(item, fn, depth) for item in node.args[0].elts)
        return func.attr in _REARRANGING and bool(node.args) and _holds_batch(node.args[0], fn, depth)
    return func.attr in _REARRANGING and _holds_batch(func.value, fn, depth)


_SEQUENCE_TYPES = frozenset({"List", "list", "Sequence", "Tuple", "tuple", "Iterable"})


def _tensor_list_items(fn) -> frozenset[str]:
    """Loop names that take the items of a parameter annotated as a list of tensors (`for dr, dg in
    zip(real_outputs, fake_outputs)` with `real_outputs: List[torch.Tensor]`, a discriminator's
    per-scale outputs): each item is a batch tensor. An unannotated parameter may be a tensor,
    whose items are its samples (`_over_batch` reads such a loop as one over the batch)."""
    return fn.fact(_find_tensor_list_items)


def _find_tensor_list_items(fn) -> frozenset[str]:
    args = fn.node.args
    lists = {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs) if _tensor_list_annotation(a.annotation)}
    if not lists:
        return frozenset()
    found = set()
    for loop in fn.nodes(ast.For):
        iterable, target = loop.iter, loop.target
        sources = iterable.args if isinstance(iterable, ast.Call) and isinstance(iterable.func, ast.Name) \
            and iterable.func.id == "zip" else [iterable]
        targets = target.elts if isinstance(target, ast.Tuple) and len(sources) > 1 else [target]
        for source, item in zip(sources, targets):
            if isinstance(source, ast.Name) and source.id in lists and isinstance(item, ast.Name):
                found.add(item.id)
    return frozenset(found)


def _tensor_list_annotation(node) -> bool:
    """`List[torch.Tensor]`, `list[Tensor]`, `Sequence[Tensor]`, `Tuple[Tensor, ...]`."""
    if not isinstance(node, ast.Subscript):
        return False
    outer = node.value.attr if isinstance(node.value, ast.Attribute) else getattr(node.value, "id", "")
    inner = node.slice.elts[0] if isinstance(node.slice, ast.Tuple) and node.slice.elts else node.slice
    inner_name = inner.attr if isinstance(inner, ast.Attribute) else getattr(inner, "id", "")
    return outer in _SEQUENCE_TYPES and inner_name in ("Tensor", "FloatTensor")


def _flattened(node, fn):
    """The tensor under `x.view(-1)`, `x.reshape(-1)`, `x.flatten()`, `torch.flatten(x)` (from dim 0),
    through one local name (`flat = x.view(-1)`); else None."""
    if isinstance(node, ast.Name):
        values = fn.local_values.get(node.id, ())
        return _flattened(values[0], fn) if len(values) == 1 and not isinstance(values[0], ast.Name) else None
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
        return None
    attr, args = node.func.attr, node.args
    if attr in ("view", "reshape") and len(args) == 1 and not node.keywords and _minus_one(args[0]):
        return node.func.value
    if attr == "flatten":
        module_call = isinstance(node.func.value, ast.Name) and node.func.value.id == "torch"
        tensor = args[0] if module_call and args else None if module_call else node.func.value
        start = argument(node, 1 if module_call else 0, "start_dim")
        if tensor is not None and (start is None or isinstance(start, ast.Constant) and start.value == 0):
            return tensor
    return None


def _minus_one(node) -> bool:
    return isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) \
        and isinstance(node.operand, ast.Constant) and node.operand.value == 1


def _masked_selection(node, fn) -> bool:
    """`x[mask]` of a batch tensor where the mask is a comparison (inline, or a local bound only to
    comparisons and their `&`/`|`/`~`): a 1-D selection of elements of every sample."""
    if not (isinstance(node, ast.Subscript) and is_batch_tensor(node.value, fn)):
        return False
    mask = node.slice
    if isinstance(mask, ast.Name):
        values = fn.local_values.get(mask.id, ())
        return bool(values) and all(_comparison(v) for v in values)
    return _comparison(mask)


def _comparison(node) -> bool:
    if isinstance(node, ast.Compare):
        return True
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.BitAnd, ast.BitOr)):
        return _comparison(node.left) and _comparison(node.right)
    return isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Invert) and _comparison(node.operand)


def _applied_to_batch(node, fn, depth=0) -> bool:
    """Does the statistic's value meet a batch tensor (arithmetic, a comparison, an index into one,
    another argument of the same call) or reach a `return`? Turned into Python numbers (`.item()`,
    logging) or discarded, it changes nothing the model computes."""
    if depth > 4:
        return False
    child, parent = node, fn.parent(node)
    while parent is not None:
        if isinstance(parent, ast.Attribute):
            if parent.attr in _TO_PYTHON:
                return False
        elif isinstance(parent, ast.Call):
            if parent.func is not child:
                if isinstance(parent.func, ast.Name) and parent.func.id in ("int", "float", "len", "print"):
                    return False
                if any(_meets_batch(v, fn) for v in passed_values(parent) if v is not child):
                    return True
        elif isinstance(parent, ast.keyword):
            pass
        elif isinstance(parent, ast.Subscript):
            if child is parent.slice and _meets_batch(parent.value, fn):
                return True
        elif isinstance(parent, ast.BinOp):
            if _meets_batch(parent.right if child is parent.left else parent.left, fn):
                return True
        elif isinstance(parent, ast.Compare):
            if any(_meets_batch(v, fn) for v in (parent.left, *parent.comparators) if v is not child):
                return True
        elif isinstance(parent, ast.Return):
            return True
        elif isinstance(parent, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = parent.targets if isinstance(parent, ast.Assign) else [parent.target]
            names = [n for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
            return any(_applied_to_batch(use, fn, depth + 1)
                       for target in names for use in _uses_until_rebound(target.id, parent, fn))
        elif isinstance(parent, ast.stmt):
            return False
        child, parent = parent, fn.parent(parent)
    return False


# Reads of a tensor's metadata: `x.size(1)` in `max_len - x.size(1)` is a number, not the samples.
_METADATA = frozenset({"shape", "size", "dim", "ndim", "device", "dtype"})


def _meets_batch(node, fn) -> bool:
    """Does the expression hold a batch tensor (itself or an operand of its arithmetic), other than
    by a read of its sizes?"""
    work = [node]
    while work:
        sub = work.pop()
        read = sub.func if isinstance(sub, ast.Call) else sub
        if isinstance(read, ast.Attribute) and read.attr in _METADATA:
            continue
        if isinstance(sub, (ast.Name, ast.Attribute, ast.Call)) and _batch_value(sub, fn):
            return True
        work.extend(ast.iter_child_nodes(sub))
    return False


# Elementwise steps between an extreme and the division it takes part in (`torch.maximum(one, x.max())`,
# `x.abs().max() + eps`, `.clamp(min=eps)`).
_ELEMENTWISE_WRAPPERS = frozenset({"maximum", "minimum", "clamp", "clamp_min", "clip", "abs", "float", "to",
                                   "detach"})


def _scales_batch(node, fn, depth=0) -> bool:
    """Does the extreme divide the samples? It is in the divisor of a division of a batch tensor
    (`x / x.abs().max()`, `s / torch.maximum(one, torch.max(s))`), or in the dividend of one whose
    divisor holds an extreme too, the numerator of a min-max normalisation (`(z - z.min()) / (z.max()
    - z.min())`); through arithmetic, elementwise wrappers and a local name (`peak = x.max()` then
    `x / peak`). An extreme that is only a shift (`x - x.max()` before a softmax, which the softmax
    undoes), a length, a bound or a test scales nothing."""
    if depth > 4:
        return False
    child, parent = node, fn.parent(node)
    while parent is not None:
        if isinstance(parent, ast.BinOp):
            if isinstance(parent.op, ast.Div):
                other = parent.left if child is parent.right else parent.right
                if not _meets_batch(other, fn):
                    return False
                return child is parent.right or _holds_extreme(parent.right)
        elif isinstance(parent, ast.Call):
            func = parent.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in ("div", "true_divide") and child is not func:
                divisor = parent.args[-1] if parent.args else None
                dividend = func.value if len(parent.args) == 1 and isinstance(func, ast.Attribute) \
                    else parent.args[0] if len(parent.args) == 2 else None
                return child is divisor and dividend is not None and _meets_batch(dividend, fn)
            if name not in _ELEMENTWISE_WRAPPERS:
                return False
        elif isinstance(parent, ast.Assign):
            if len(parent.targets) != 1 or not isinstance(parent.targets[0], ast.Name):
                return False
            return any(_scales_batch(use, fn, depth + 1)
                       for use in _uses_until_rebound(parent.targets[0].id, parent, fn))
        elif not isinstance(parent, (ast.Attribute, ast.keyword, ast.UnaryOp)):
            return False
        child, parent = parent, fn.parent(parent)
    return False


def _padded_size_shift(node, fn) -> str | None:
    """The size read in a sum or difference that re-bases the samples' values on the padded size less
    the extreme (`lens + x.size(1) - lens.max()`: lengths moved so that the longest sample ends at the
    padded end): a size of a batch tensor along a dim other than the batch's, and a batch value, among
    the terms of the `+`/`-` chain the extreme is a term of; else None. On one device the collator pads
    the batch to its longest sample and the shift is zero; a replica's chunk without that sample gets
    a shift. A shift alone (`x - x.max()` before a softmax) or a padding amount (`max_len - x.size(1)`
    handed to `F.pad`, no samples' values among the terms) is not one."""
    top = node
    parent = fn.parent(node)
    while isinstance(parent, ast.BinOp) and isinstance(parent.op, (ast.Add, ast.Sub)):
        top, parent = parent, fn.parent(parent)
    if top is node:
        return None
    terms, work = [], [top]
    while work:
        sub = work.pop()
        if isinstance(sub, ast.BinOp) and isinstance(sub.op, (ast.Add, ast.Sub)):
            work.extend((sub.left, sub.right))
        elif sub is not node:
            terms.append(sub)
    size = next((t for t in terms if _size_of_batch_dim(t, fn)), None)
    if size is None or not any(t is not size and _meets_batch(t, fn) for t in terms):
        return None
    return ast.unparse(size)


def _reads_backwards(model) -> bool:
    """Does the class build a bidirectional recurrent layer (`nn.LSTM(..., bidirectional=True)`)? Its
    backward direction starts at each sample's last valid step, so lengths shifted past the sample's
    end change the features at every valid step; a forward-only layer's valid steps come out the same
    (only the padding's outputs change, which the caller masks with the lengths it kept)."""
    resolve = model.ctx.resolve
    for facts in model.attrs.values():
        for _, value, _ in facts.assignments:
            if not isinstance(value, ast.Call):
                continue
            layer = resolve(value.func) or ""
            if layer.startswith("torch.nn.") and layer.rsplit(".", 1)[-1] in RECURRENT_LAYERS \
                    and is_true(argument(value, BIDIRECTIONAL_POSITION, "bidirectional")):
                return True
    return False


def _size_of_batch_dim(node, fn) -> bool:
    """`x.size(d)` / `x.shape[d]` of a batch tensor `x`, `d` a constant other than 0 (a padded length,
    not the batch)."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "size" \
            and len(node.args) == 1 and not node.keywords:
        tensor, dim = node.func.value, node.args[0]
    elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "shape":
        tensor, dim = node.value.value, node.slice
    else:
        return False
    if isinstance(dim, ast.UnaryOp) and isinstance(dim.op, ast.USub):
        dim = dim.operand
    return isinstance(dim, ast.Constant) and isinstance(dim.value, int) and not isinstance(dim.value, bool) \
        and dim.value != 0 and _batch_value(tensor, fn)


def _holds_extreme(node) -> bool:
    """Does the expression take an extreme over all elements (`z.max() - z.min()`)?"""
    return any(isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute)
               and sub.func.attr in _WHOLE_TENSOR_EXTREMES and not sub.keywords
               and len(sub.args) == (1 if isinstance(sub.func.value, ast.Name) and sub.func.value.id == "torch" else 0)
               for sub in ast.walk(node))
