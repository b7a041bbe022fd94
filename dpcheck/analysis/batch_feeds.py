"""Which functions only ever run on batches of a loader that drops its partial last batch.

A batch with fewer samples than GPUs needs a loader that keeps the partial last batch. A call of a
DataParallel wrapper inside a loop over a `DataLoader(..., drop_last=True)` of the same file never
sees one. Neither does a call in a method that gets its batch from its callers: `train_step(self,
images, ...)` called by the training script once per batch of its dropping loader (Sketch2PointCloud's
`net.module.train_step(...)`), a helper that such a method calls in its own body
(`self.generator_backward(...)`), or a loop over a parameter the callers fill with a dropping loader
(`model.train_network(epoch, loader=train_loader)`). Where the method's callers live is another
file's business, so each file records its calls and the project index answers for a method name.

Each file records (``FileResult``): ``called``, the simple names of every function and method it
calls (`train_step` for `net.module.train_step(...)`); ``batch_feeds``, for the calls that are fed
(files that name `drop_last` or a DataParallel form, the only ones where a call can be):
`<name>:dropped` for a call inside a loop over a dropping loader of this file, or handed such a
loader (and no loader that keeps the last batch), and `<name><<function>` for a call that runs once
per call of the named function around it (in its body, in no loop). A file read as text only
records every word followed by `(`. ``ClassIndex.feeds_partial_batches`` settles
PARTIAL_FEED_CONDITION from them: a name is fed where every call of it is one of those two, the
second through a function that is fed in turn.
"""

from __future__ import annotations

import ast
import re
from itertools import compress, repeat
from operator import attrgetter, is_
from typing import TYPE_CHECKING

from dpcheck.analysis.bindings import reaching_assignment
from dpcheck.analysis.dataflow import is_true, keyword
from dpcheck.analysis.names import callee_name
from dpcheck.analysis.torch_api import FUNCTION_DEFS
from dpcheck.analysis.tree import attr_of as _attr_of
from dpcheck.analysis.tree import id_of as _id_of

if TYPE_CHECKING:
    from dpcheck.analysis.context import FileContext

# `partial_feed:<name>` in a finding's ``requires``: some scanned call of the function or method
# `name` (whose body makes the finding's call) may hand it a batch from a loader that keeps the
# partial last batch (ClassIndex.feeds_partial_batches).
PARTIAL_FEED_CONDITION = "partial_feed:"
# `<name>:dropped` in ``batch_feeds``: a call fed by a loader of its file that drops the last batch.
DROPPED = ":dropped"
# `<name><<function>` in ``batch_feeds``: a call that runs once per call of the function around it.
CALLED_IN = "<"

# Iterating one of these over a loader still yields its batches (`list(loader)` keeps them too).
_LOOP_WRAPPERS = frozenset({"enumerate", "tqdm", "iter", "zip", "list", "tuple"})
# How many wrappers, comprehensions and names to follow from a loop back to its loader.
_FOLLOW_STEPS = 6
# The text of a file that can feed a call: a dropping loader, or a wrapper whose methods call each other.
_FEED_TOKENS = ("drop_last", "Parallel", "data_parallel")
_CALLED_WORD = re.compile(r"\b(\w+)\(")  # (`f (x)` with a space is rare; `\s*` tripled the scan)
_func_of = attrgetter("func")


def loop_source(loop: ast.For | ast.AsyncFor, ctx: FileContext) -> ast.AST:
    """What a `for` loop iterates, followed back through `enumerate(...)`, `tqdm(...)`, `iter(...)`,
    `list(...)`, `[batch for batch in loader]` and names bound to these: a `DataLoader(...)` call
    where the file shows it, else the last node reached (a parameter's name, an attribute, a call)."""
    source, at = loop.iter, loop
    for _ in range(_FOLLOW_STEPS):
        if isinstance(source, ast.Call) and isinstance(source.func, ast.Name) and source.func.id in _LOOP_WRAPPERS \
                and source.args:
            source = source.args[0]
        elif isinstance(source, (ast.ListComp, ast.GeneratorExp)) and len(source.generators) == 1:
            source = source.generators[0].iter  # `[batch for batch in loader]`: one item per batch
        elif isinstance(source, ast.Name):
            binding = reaching_assignment(ctx, source.id, at, module_fallback=True)
            if binding is None:
                return source
            source, at = binding.value, binding
        else:
            break
    return source


def is_loader(node: ast.AST, ctx: FileContext) -> bool:
    return isinstance(node, ast.Call) and (ctx.resolve(node.func) or "").endswith("DataLoader")


def batch_of_one(loader: ast.Call) -> bool:
    size = keyword(loader, "batch_size")
    if size is None and len(loader.args) > 1:
        size = loader.args[1]
    return isinstance(size, ast.Constant) and size.value == 1


def drops_last(loader: ast.Call) -> bool:
    """Does the loader drop its partial last batch, with batches of more than one sample?"""
    return is_true(keyword(loader, "drop_last")) and not batch_of_one(loader)


def summarize_batch_feeds(ctx: FileContext, result) -> None:
    """Fill ``result.called`` and ``result.batch_feeds`` (see the module's docstring)."""
    calls = ctx.nodes(ast.Call)
    if not calls:
        return
    text = ctx.source.text
    fed: dict[int, str] = {}
    if any(token in text for token in _FEED_TOKENS):
        handed = "DataLoader" in text  # (a loader handed to a call needs one built here)
        for call in calls:
            name = callee_name(call)
            marker = _feed(call, ctx, handed) if name else ""
            if marker:
                fed[id(call)] = name + marker
    if fed:  # (a script: few calls)
        names = {name for call in calls if id(call) not in fed for name in [callee_name(call)] if name}
    else:  # (every file pays this: map and compress keep the per-call work in C)
        funcs = list(map(_func_of, calls))
        kinds = list(map(type, funcs))
        names = set(map(_id_of, compress(funcs, map(is_, kinds, repeat(ast.Name)))))
        names.update(map(_attr_of, compress(funcs, map(is_, kinds, repeat(ast.Attribute)))))
    result.called = sorted(names)
    result.batch_feeds = sorted(set(fed.values()))


def summarize_text_calls(text: str, result) -> None:
    """``result.called`` of a file read as text only: every word followed by `(`."""
    result.called = sorted(set(_CALLED_WORD.findall(text)))


def _feed(call: ast.Call, ctx: FileContext, handed: bool) -> str:
    """DROPPED where every loader this file shows feeding ``call`` (the loop around it, the loaders
    handed to it, looked for where ``handed``) drops the last batch, and there is one; CALLED_IN +
    the function around it where the call runs in its body, in no loop; "" otherwise."""
    loaders = [loader for value in (*call.args, *(k.value for k in call.keywords))
               for loader in [_bound_loader(value, call, ctx)] if loader is not None] if handed else []
    loop = ctx.enclosing(call, (ast.For, ast.AsyncFor, ast.While, ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
    if isinstance(loop, (ast.For, ast.AsyncFor)):
        source = loop_source(loop, ctx)
        if is_loader(source, ctx):
            loaders.append(source)
    if loaders:
        return DROPPED if all(map(drops_last, loaders)) else ""
    if isinstance(loop, FUNCTION_DEFS):
        return CALLED_IN + loop.name
    return ""


def _bound_loader(value: ast.AST, at: ast.AST, ctx: FileContext) -> ast.Call | None:
    """The `DataLoader(...)` an argument is, directly or through the name it is bound to."""
    if isinstance(value, ast.Name):
        binding = reaching_assignment(ctx, value.id, at, module_fallback=True)
        value = binding.value if binding is not None else None
    return value if value is not None and is_loader(value, ctx) else None
