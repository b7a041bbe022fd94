"""Checkpoint facts: where a state dict comes from, and which loaders take the `module.` prefix
that a DataParallel wrapper's `state_dict()` writes off the keys.

A checkpoint saved from the wrapper only breaks where something loads it into the bare model as
it is. A script that strips the prefix itself when it resumes (`k[7:]` in a loop over
`state_dict.items()`, `k.replace("module.", "")`, `remove_prefix(sd, "module.")`), or that resumes
through a loader function that does (`utils.load_checkpoint(model, path)`, defined in another
file), reads its own wrapper checkpoints back. Each file records the simple names of its functions
that strip the prefix (``FileResult.prefix_strippers``); a finding that holds only if a loader the
script calls keeps the prefix carries ``prefix_kept:<dotted name>`` for each such call, which the
project index answers (no function of that simple name strips it, in the scanned files or the
module the name points to).

A checkpoint written from the wrapper and read back, as it is, only by scripts that wrap the model
before loading it (a `test.py` that does `model = nn.DataParallel(net).cuda();
model.load_state_dict(torch.load(path))`) round-trips the prefix too. Each file records how it
loads checkpoints as they are (``FileResult.checkpoint_loads``: WRAPPED_LOAD, into a name that holds
a wrapper on no condition; BARE_LOAD, into anything else that may be a model); a save from the
wrapper that its own file never loads carries ``unresumed:<package>`` (UNRESUMED_CONDITION, the
package of the saving file), which the index answers False only where some scanned file of that
package loads a checkpoint into a wrapper and none into anything else. (The package, not the run:
one run may lint several projects, and a project's scripts sit side by side.)

A checkpoint that another file of the package loads with the prefix taken off (an evaluation script's
`{k.replace("module.", ""): v ...}`, or a loader that retries with the keys stripped after a load
as it is fails) reads the wrapper's keys back too, for the class it loads into. Such a load is
recorded as ``stripped:<Class>`` (STRIPPED_LOAD, the simple name of the class the model is built
from, where the file shows it); a save from the wrapper of that class carries the class in its
condition (``unresumed:<package>:<Class>``), which the index answers False where the package loads
that class's checkpoints only so (or only into wrappers) and none into a bare model as it is. The
class keeps apart the scripts of one folder that save different models (potsawee's hierarchical
model, whose loader strips, beside its BART, whose loaders do not).
"""

from __future__ import annotations

import ast
from itertools import compress, repeat
from operator import eq

from dpcheck.analysis.bare_calls import may_name_class
from dpcheck.analysis.bindings import reaching_assignment
from dpcheck.analysis.context import FileContext
from dpcheck.analysis.scripts import mentions_dataparallel, script_facts, target_text
from dpcheck.analysis.torch_api import ALTERNATE_CONSTRUCTORS, FUNCTION_DEFS
from dpcheck.analysis.tree import value_of
from dpcheck.analysis.wrapping import without_conversions

PREFIX_KEPT = "prefix_kept"  # the condition's kind: `prefix_kept:<the loader's dotted name>`
# The condition of a save from the wrapper: the scanned files of its package do not show every load of
# a checkpoint, as it is, into a wrapper (ClassIndex settles it from each file's `checkpoint_loads`).
UNRESUMED_CONDITION = "unresumed:"
WRAPPED_LOAD = "wrapped"
BARE_LOAD = "bare"
STRIPPED_LOAD = "stripped"  # `stripped:<Class>`: a load with the prefix taken off, into that class
# What holds no model's weights: `optimizer.load_state_dict(ckpt["optimizer"])` beside a model's load.
_NOT_MODEL_WORDS = ("optim", "sched", "scaler")

_PREFIX = "module."
_KEY_ITERATORS = frozenset({"items", "keys"})
# Calls that read a checkpoint but are not a project's loader helper.
_NOT_HELPERS = frozenset({"load", "load_state_dict", "load_url", "load_state_dict_from_url", "load_file"})
# How many names bound to one another (`model = model.cuda()`) to follow back to a construction.
_FOLLOW_DEPTH = 3


def from_checkpoint(node: ast.AST, ctx: FileContext, depth: int = 0) -> bool:
    """Is the state dict read from a file (torch.load), directly or through a name or subscript?"""
    if depth > 3:
        return False
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call) and (ctx.resolve(sub.func) or "").endswith(("torch.load", "load_file")):
            return True
        if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load):
            for value in ctx.module_level_values.get(sub.id, ()) or _local_values(sub, ctx):
                if from_checkpoint(value, ctx, depth + 1):
                    return True
    return False


def _local_values(name: ast.Name, ctx: FileContext) -> list[ast.AST]:
    """Values assigned to a name in its function (or anywhere at module level, `if` blocks too)."""
    scope = ctx.enclosing(name, FUNCTION_DEFS)
    # The assignments of the scope sliced from the file's list of them, not its whole subtree filtered.
    nodes = ctx.tree_index.nodes_within(scope, ast.Assign) if scope is not None else ctx.nodes(ast.Assign)
    return [n.value for n in nodes if any(isinstance(t, ast.Name) and t.id == name.id for t in n.targets)]


def prefix_strips(ctx: FileContext) -> list[ast.AST]:
    """The nodes where the file takes the `module.` prefix off state-dict keys (or puts it on): a
    `"module."` string (`k.replace("module.", "")`, `k[:7] == "module."`, `remove_prefix(sd,
    "module.")`), or `k[7:]` of a key bound by a loop over `.items()` / `.keys()` (`name = k[7:]  #
    remove module.`)."""
    return ctx.fact(_prefix_strips)


def _prefix_strips(ctx: FileContext) -> list[ast.AST]:
    constants = ctx.nodes(ast.Constant)
    # (compress() and map() compare every constant of the file in C.)
    found: list[ast.AST] = list(compress(constants, map(eq, map(value_of, constants), repeat(_PREFIX))))
    keys: set[str] = set()
    for loop in (*ctx.nodes(ast.For), *ctx.nodes(ast.comprehension)):
        iterator = loop.iter
        if isinstance(iterator, ast.Call) and isinstance(iterator.func, ast.Attribute) \
                and iterator.func.attr in _KEY_ITERATORS:
            target = loop.target
            first = target.elts[0] if isinstance(target, ast.Tuple) and target.elts else target
            if isinstance(first, ast.Name):
                keys.add(first.id)
    if keys:
        for node in ctx.nodes(ast.Subscript):
            cut = node.slice
            if isinstance(node.value, ast.Name) and node.value.id in keys and isinstance(cut, ast.Slice) \
                    and cut.upper is None and cut.step is None and isinstance(cut.lower, ast.Constant) \
                    and cut.lower.value == len(_PREFIX):
                found.append(node)
    return found


def strips_prefix(node: ast.AST, ctx: FileContext) -> bool:
    """Is the state dict ``node`` built with the `module.` prefix taken off its keys: a prefix strip
    (see ``prefix_strips``) within it (`{k[7:]: v for k, v in sd.items()}`) or in a value assigned
    to a name it reads (`state_dict = {k[7:]: ...}`, as ``from_checkpoint`` follows names)? Such a
    dict loads into the bare model."""
    strips = prefix_strips(ctx)
    if not strips:
        return False
    inside = {id(n) for n in strips}
    return any(id(sub) in inside for value in [node, *(
        value for name in ast.walk(node) if isinstance(name, ast.Name) and isinstance(name.ctx, ast.Load)
        for value in _local_values(name, ctx))] for sub in ast.walk(value))


def keys_taken_off(node: ast.AST, ctx: FileContext, depth: int = 0) -> bool:
    """Is the state dict ``node`` one whose keys lost the `module.` prefix, and nothing there puts it
    back: a strip that only takes it off (`k.replace("module.", "")`, `k[7:]` of a key of `.items()`,
    `remove_prefix(sd, "module.")`) within it, or a call of a function of this file (`fix_state(sd)`,
    `self._fix_state(sd)`) whose body takes it off; for a name, every value its function assigns to
    it is one (`trained_dict` bound as it is in one branch and stripped in another may hold either).
    Such a dict holds the bare model's keys: a DataParallel wrapper rejects them (or, with
    `strict=False`, loads none of them)."""
    strips = prefix_strips(ctx)
    if not strips:
        return False
    if isinstance(node, ast.Name):
        values = _local_values(node, ctx) if depth < _FOLLOW_DEPTH else []
        return bool(values) and all(keys_taken_off(value, ctx, depth + 1) for value in values)
    off = {id(n) for n in strips if _takes_off(n, ctx)}
    if not off:
        return False
    on = {id(n) for n in strips if _puts_on(n, ctx)}
    inside = {id(sub) for sub in ast.walk(node)}
    if inside & off:
        return not inside & on
    helpers = set()
    for func in (*ctx.nodes(ast.FunctionDef), *ctx.nodes(ast.AsyncFunctionDef)):
        body = {id(sub) for sub in ctx.tree_index.subtree(func)}
        if body & off and not body & on:
            helpers.add(func.name)
    return bool(helpers) and any(isinstance(sub, ast.Call) and (
        isinstance(sub.func, ast.Name) and sub.func.id in helpers
        or isinstance(sub.func, ast.Attribute) and isinstance(sub.func.value, ast.Name)
        and sub.func.value.id == "self" and sub.func.attr in helpers)
        for sub in ast.walk(node))


# Calls that take a prefix off a key or a dict's keys, given the prefix (`remove_prefix(sd, "module.")`).
_STRIP_CALL_WORDS = ("remove", "strip")


def _takes_off(node: ast.AST, ctx: FileContext) -> bool:
    """Does the prefix strip ``node`` take the prefix off: `k[7:]`, `"module."` as what `.replace(...,
    "")` replaces, or handed to a call named to remove or strip it (`k.removeprefix("module.")`)? A
    `"module."` in a test (`k.startswith("module.")`) or put before a key is no strip."""
    if isinstance(node, ast.Subscript):
        return True
    call = ctx.parent(node)
    if not isinstance(call, ast.Call) or node not in call.args:
        return False
    name = call.func.attr if isinstance(call.func, ast.Attribute) else call.func.id if isinstance(
        call.func, ast.Name) else ""
    if name == "replace":
        return call.args[0] is node and len(call.args) > 1 and value_of(call.args[1]) == ""
    return any(word in name.lower() for word in _STRIP_CALL_WORDS)


def _puts_on(node: ast.AST, ctx: FileContext) -> bool:
    """Does the `"module."` constant ``node`` go before a key (`"module." + k`, `f"module.{k}"`,
    `.replace("", "module.")`)?"""
    parent = ctx.parent(node)
    if isinstance(parent, ast.BinOp) and isinstance(parent.op, ast.Add) and parent.left is node:
        return True
    return isinstance(parent, ast.JoinedStr) or isinstance(parent, ast.Call) and isinstance(
        parent.func, ast.Attribute) and parent.func.attr == "replace" and len(parent.args) > 1 and parent.args[1] is node


def loader_calls(ctx: FileContext) -> list[str]:
    """Dotted names (or simple names, where they do not resolve) of the functions this file calls
    that may load a checkpoint for it: a name that says `load` (`load_checkpoint`,
    `utils.load_network`), not torch's own readers."""
    names = []
    for call in ctx.nodes(ast.Call):
        func = call.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        dotted = ctx.resolve(func) or name
        if "load" in name.lower() and name not in _NOT_HELPERS \
                and not dotted.startswith(("torch.", "numpy.", "json.", "pickle.", "yaml.")):
            names.append(dotted)
    return sorted(set(names))


def summarize_checkpoints(ctx: FileContext, result) -> None:
    """Fill ``result.prefix_strippers``: the simple names of the file's functions that strip the
    prefix (only files that name `state_dict`)."""
    if "state_dict" not in ctx.source.text:
        return
    names = set()
    for node in prefix_strips(ctx):
        cur = ctx.parent(node)
        while cur is not None and not isinstance(cur, FUNCTION_DEFS):
            cur = ctx.parent(cur)
        if cur is not None:
            names.add(cur.name)
    result.prefix_strippers = sorted(names)


def summarize_checkpoint_loads(ctx: FileContext, result) -> None:
    """Fill ``result.checkpoint_loads``: WRAPPED_LOAD if the file loads a checkpoint read from a file,
    as it is (see ``strips_prefix``), into a name that holds a DataParallel wrapper on no condition;
    BARE_LOAD if it loads one into anything else (the bare model, `model.module`, a model of a file
    that never wraps), other than an optimizer, scheduler or scaler."""
    if "load_state_dict" not in ctx.source.text:
        return
    facts = script_facts(ctx) if mentions_dataparallel(ctx) else None
    kinds = set()
    for call in ctx.nodes(ast.Call):
        func = call.func
        if not (isinstance(func, ast.Attribute) and func.attr == "load_state_dict" and call.args) \
                or not from_checkpoint(call.args[0], ctx):
            continue
        if prefix_handled(call, ctx):
            built = model_class(func.value, call, ctx)
            if built is not None:
                kinds.add(f"{STRIPPED_LOAD}:{built}")
            continue
        wrap = facts.wrap_for(func.value) if facts is not None else None
        if wrap is not None and not wrap.requires:
            kinds.add(WRAPPED_LOAD)
        elif not _not_a_model(func.value):
            kinds.add(BARE_LOAD)
    result.checkpoint_loads = " ".join(sorted(kinds))


def prefix_handled(call: ast.Call, ctx: FileContext) -> bool:
    """Does the `load_state_dict(sd)` call ``call`` read the wrapper's keys into a bare model: ``sd``
    is built with the prefix taken off (``strips_prefix``, or by a function of this file:
    ``keys_taken_off``), or the call sits in a `try` whose `except`
    arm strips it (a load as it is, retried with the keys stripped when it fails: potsawee's
    `load_model`)?"""
    if strips_prefix(call.args[0], ctx) or keys_taken_off(call.args[0], ctx):
        return True
    strips = prefix_strips(ctx)
    if not strips:
        return False
    inside = {id(n) for n in strips}
    child, cur = call, ctx.parent(call)
    while cur is not None and not isinstance(cur, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Module)):
        if isinstance(cur, ast.Try) and any(child is stmt for stmt in cur.body) and any(
                id(n) in inside for handler in cur.handlers for n in ast.walk(handler)):
            return True
        child, cur = cur, ctx.parent(cur)
    return False


def model_class(owner: ast.AST, at: ast.AST, ctx: FileContext) -> str | None:
    """The simple name of the class the model ``owner`` holds at ``at`` is built from, where the file
    shows one: a name's assignment reaching ``at``, or every assignment of `self.<attr>` in the class
    around it, is a construction (`net.EmotionRegression(...)`, `EncoderDecoder(args).cuda()`,
    `AutoModel.from_pretrained(path)`). None otherwise (a parameter, a model a function returns,
    several classes)."""
    if isinstance(owner, (ast.Call, ast.Name)):
        return _constructed(owner, at, ctx)
    values: list[ast.AST] = []
    if isinstance(owner, ast.Attribute) and isinstance(owner.value, ast.Name) and owner.value.id == "self":
        holder = ctx.enclosing(at, ast.ClassDef)
        if holder is None:
            return None
        values = [node.value for node in ctx.tree_index.nodes_within(holder, ast.Assign)
                  if any(isinstance(t, ast.Attribute) and t.attr == owner.attr and isinstance(t.value, ast.Name)
                         and t.value.id == "self" for t in node.targets)]
    names = {_constructed(value, value, ctx) for value in values}
    return names.pop() if len(names) == 1 else None


def _constructed(value: ast.AST, at: ast.AST, ctx: FileContext, depth: int = 0) -> str | None:
    """The simple name of the class ``value`` builds (after `.cuda()`/`.to(...)`, through a name bound
    to it: `model = model.cuda()`), where it reads as one."""
    value = without_conversions(value)
    if isinstance(value, ast.Name) and depth < _FOLLOW_DEPTH:
        binding = reaching_assignment(ctx, value.id, at, module_fallback=True)
        return _constructed(binding.value, binding, ctx, depth + 1) if binding is not None else None
    if not isinstance(value, ast.Call):
        return None
    func = value.func
    if isinstance(func, ast.Attribute) and func.attr in ALTERNATE_CONSTRUCTORS:
        func = func.value
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    return name if may_name_class(name) else None


def _not_a_model(owner: ast.AST) -> bool:
    """Does the name say it holds an optimizer, a scheduler or a gradient scaler?"""
    text = target_text(owner) if not isinstance(owner, ast.Attribute) or owner.attr != "module" else None
    last = (text or "").rpartition(".")[2].lower()
    return any(word in last for word in _NOT_MODEL_WORDS)
