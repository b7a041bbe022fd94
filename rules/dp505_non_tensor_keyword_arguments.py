"""
## What it does
Flags a call of an `nn.DataParallel` wrapper in a training script that passes the batch
positionally and only non-tensor keyword arguments: `model(images, return_loss=False)`,
`model(x, mask=None)`, `model(x, mode="train")` (constants, directly or through a local or
module-level name).

A call that cannot bind to the forward of the class the wrapper holds (a class of this file:
`model(mel, speaker, return_unsample=True)` on `forward(self, mel, return_unsample=False)`, an
argument too many or a keyword no parameter takes) raises TypeError on one device too, before
DataParallel splits anything: it is not flagged.

A DataParallel subclass that defines its own `scatter` (in this file, or in another scanned file
it is imported from) decides how its inputs reach each device: calls through it are not flagged.

## Why is this bad?
Positional and keyword arguments are scattered separately. Tensors split into one chunk
per GPU *that has rows to take*, so a batch of B < N samples gives B positional chunks;
non-tensor values are copied once per GPU, so the keywords give N chunks. DataParallel
then pads the positional chunks with `()` and runs N replicas: the extra ones call
`forward(**kwargs)` with no input and raise `TypeError: forward() missing 1 required
positional argument`. It happens on every call with `batch_size=1` loaders on two or more
GPUs (an error), else on the last batch of a DataLoader without `drop_last=True` when it
holds fewer samples than there are GPUs (a warning). A loader with `drop_last=True` is not
flagged, whether the loop iterates it directly or through `enumerate(...)`, `tqdm(...)`,
`iter(...)`, `list(...)`, `[batch for batch in loader]` or a name bound to one of these. Nor is a
call whose batches the callers of the function around it hand in, where every scanned call of that
function runs in a loop over a loader of its file with `drop_last=True` (or is handed one): a model's
`train_step(self, images, ...)` that the training script calls once per batch (also through a method
that `train_step` calls in its body), or a loop over a loader parameter (`train_network(epoch,
loader)`).

## How to fix
Pass the flag positionally (positional non-tensors are copied per chunk, not per GPU),
make it a constructor option or attribute, or use `drop_last=True` and batches of at
least one sample per GPU.
"""

from __future__ import annotations

import ast

from dpcheck.analysis.batch_feeds import PARTIAL_FEED_CONDITION, batch_of_one, drops_last, is_loader, loop_source
from dpcheck.analysis.bindings import reaching_assignment
from dpcheck.analysis.dataflow import binding_error
from dpcheck.analysis.scripts import mentions_dataparallel, script_facts
from dpcheck.analysis.torch_api import FUNCTION_DEFS
from dpcheck.analysis.wrapping import classes_of
from dpcheck.findings import Severity
from dpcheck.rule import TRAINING_SCRIPT, Rule


class NonTensorKeywordArguments(Rule):
    code = "DP505"
    name = "non-tensor-keyword-arguments"
    severity = Severity.WARNING
    # The harness finds the same mismatch from a model's example inputs (a dynamic rule); this
    # rule reads it off the script's call, which the harness does not run.
    not_confirmable = TRAINING_SCRIPT
    summary = "Only non-tensor keywords next to a positional batch: replicas past a small batch get no input"
    fix_hint = "Pass the flag positionally or set it on the model; use drop_last=True"
    bad_example = """
        model = nn.DataParallel(Detector().cuda())
        loader = DataLoader(dataset, batch_size=1)
        for images in loader:
            detections = model(images.cuda(), return_loss=False)
    """
    good_example = """
        model = nn.DataParallel(Detector().cuda())
        loader = DataLoader(dataset, batch_size=8, drop_last=True)
        for images in loader:
            detections = model(images.cuda(), return_loss=False)
            scores = model(images.cuda(), mask=images.ne(0))
    """

    def check_file(self, ctx):
        if not mentions_dataparallel(ctx):
            return
        facts = script_facts(ctx)
        for call in ctx.nodes(ast.Call):
            if not call.args or not call.keywords or any(isinstance(a, ast.Starred) for a in call.args) \
                    or any(k.arg is None for k in call.keywords):
                continue  # no positional batch, no keyword, or `**kwargs` of unknown values
            wrap = facts.called_wrap(call)
            if wrap is None or "scatter" in wrap.source.note:
                continue  # not a wrapper, or one whose own scatter decides
            constants = [k for k in call.keywords if _constant(k.value, call, ctx)]
            if len(constants) != len(call.keywords):
                continue  # a tensor keyword splits with the batch
            if _never_binds(call, wrap, ctx):
                continue  # TypeError on one device too: the call never reaches the scatter
            loader = _loader_of(call, ctx)
            if loader is not None and drops_last(loader):
                continue
            names = ", ".join(f"`{k.arg}=`" for k in call.keywords)
            what = f"only non-tensor keyword arguments ({names}) next to the positional batch"
            if loader is not None and batch_of_one(loader):
                message = (f"{what}, and the loader on line {loader.lineno} has batch_size=1: DataParallel copies "
                           "the keywords to every GPU but cannot split one sample, so on two or more GPUs every "
                           "replica but the first runs forward with no positional input and raises TypeError")
                severity = Severity.ERROR
            else:
                message = (f"{what}: DataParallel copies the keywords to every GPU but splits the batch into at "
                           "most one chunk per sample, so on a batch with fewer samples than GPUs (the last one, "
                           "without drop_last=True) the extra replicas run forward with no positional input and "
                           "raise TypeError")
                severity = None
            # Batches handed in by the callers of the function around the call: only where some scanned
            # call of it may get them from a loader that keeps the last batch (another file's script
            # calling `net.module.train_step(...)` once per batch of a dropping loader).
            through = _fed_through(call, ctx) if loader is None else None
            feed = (frozenset({PARTIAL_FEED_CONDITION + through}),) if through else ()
            # A DataParallel subclass of another file: only where it keeps the stock scatter (neural_sp's
            # CustomDataParallel hands the keywords and its own split of the batch to every device).
            yield self.violation(call, message, severity=severity,
                                 requires=wrap.requires + wrap.keeps_stock("scatter") + feed)


def _constant(node, call, ctx, depth=0) -> bool:
    """A value that can never be a tensor: a literal, or a name whose binding reaching the call is one."""
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.UnaryOp) and isinstance(node.operand, ast.Constant):
        return True
    if isinstance(node, ast.Name) and depth == 0:
        binding = reaching_assignment(ctx, node.id, call, module_fallback=True)
        return binding is not None and _constant(binding.value, call, ctx, depth + 1)
    return False


def _never_binds(call, wrap, ctx) -> bool:
    """Can the call bind to no forward of the classes the wrapper holds (every one of them a class
    of this file whose forward it shows)? `self.encoder(mel, speaker, return_unsample=True)` on a
    `forward(self, x, return_unsample=False)` raises TypeError before DataParallel splits anything."""
    classes = classes_of(wrap.inner, wrap.call, ctx)
    if not classes:
        return False
    for name in classes:
        info = ctx.classes.get(ctx.local_name(name) or "")
        mro = ctx.in_file_mro(info) if info is not None else []
        forward = next((c.methods["forward"] for c in mro if "forward" in c.methods), None)
        if forward is None or any("__call__" in c.methods for c in mro) or binding_error(call, forward) is None:
            return False  # (an own `__call__` decides what a call takes)
    return True


def _loader_of(call, ctx):
    """The `DataLoader(...)` construction the `for` loop around ``call`` iterates, if this file shows it."""
    loop = ctx.enclosing(call, (ast.For, ast.AsyncFor))
    if loop is None:
        return None
    source = loop_source(loop, ctx)
    return source if is_loader(source, ctx) else None


def _fed_through(call, ctx) -> str | None:
    """The function or method whose callers hand ``call`` its batches, where this file does not show
    its loader: the one around it, where the call runs in its body in no loop (`train_step(self,
    images, ...)`) or in a loop over one of its parameters (`for batch in loader:`); None otherwise."""
    scope = ctx.enclosing(call, (ast.For, ast.AsyncFor, ast.While, ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
    if isinstance(scope, (ast.For, ast.AsyncFor)):
        source = loop_source(scope, ctx)
        scope = ctx.enclosing(scope, (ast.For, ast.AsyncFor, ast.While, ast.FunctionDef, ast.AsyncFunctionDef,
                                      ast.Lambda))
        if not (isinstance(source, ast.Name) and isinstance(scope, FUNCTION_DEFS)
                and source.id in {a.arg for a in (*scope.args.posonlyargs, *scope.args.args, *scope.args.kwonlyargs)}):
            return None
    return scope.name if isinstance(scope, FUNCTION_DEFS) else None
