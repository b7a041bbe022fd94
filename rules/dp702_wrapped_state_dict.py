"""
## What it does
In training scripts, flags checkpoints whose two ends disagree on the `module.` prefix:
saving the `state_dict()` of a name that holds an `nn.DataParallel` wrapper (directly, in a
dict, or through a helper that calls `torch.save`), unless the same file loads its
checkpoints back into the wrapper and never into the bare model, or the other scanned files
of its package load checkpoints, as they are, only into wrappers (a `test.py` that wraps the model before
`model.load_state_dict(torch.load(path))`, and no file loading one into a bare model; an
optimizer's or scheduler's load is not a model's); and loading into the
wrapper (`model.load_state_dict(...)`) a state dict in the bare format (pretrained weights
from a URL, or a file that this script saves only as `model.module.state_dict()`, also through
a name bound to the bare model, `model_to_save = model.module if hasattr(model, "module") else
model`, or whose payload a method of it returns that way for a logger or helper to write).
Saving from the wrapper and resuming into the wrapper is consistent and not reported; so is
a load whose source this file does not show, and a save or load through a helper that returns
the wrapper's `.module` on its wrapped path (`return self.model.module if n_gpu > 1 else
self.model`): that is the bare model. A save from the wrapper is not reported either when the
script takes the prefix off when it loads (`k[7:]` in a loop over `state_dict.items()`,
`k.replace("module.", "")`, `remove_prefix(sd, "module.")`), itself or through a loader function
it calls that does, in any scanned file (`utils.load_checkpoint(model, path)`), unless it also
loads checkpoints into the bare model as they are (a dict built with the prefix taken off,
`state_dict = {k[7:]: v for k, v in ckpt.items()}`, is not as they are). Nor when the other scanned files of its
package load checkpoints into bare models of the saved model's class (the class the wrapped name is
built from, where the file shows it: `net.Encoder(...)`, `AutoModel.from_pretrained(...)`) only with
the prefix taken off, in the dict or in an `except` arm that retries a load as it is, and none into
any model as they are. The `except`
arm of `try: sd = net.module.state_dict() except AttributeError: sd = net.state_dict()` runs
only without a wrapper: it saves the bare keys. A resume into what a function of another file
returns (`model = get_model(); model.load_state_dict(torch.load(path))`, wrapped only afterwards)
is a load into the wrapper only where that function returns one: where the scanned files show it
does not (or do not hold it), the save is reported against that load.

The same disagreement with whole pickled models: a file that saves the bare model behind a
wrapper (`torch.save(model.module, "{0}/net_{1}.pth".format(...))`) and reads `.module` off what
`torch.load` returns for a path of the same template (its string parts, `.format`, f-string or
`os.path.join`) is reported there, unless the file also saves a wrapper whole to that template.

## Why is this bad?
The wrapper's state dict prefixes every key with `module.`. A checkpoint saved that way
does not load into the bare model (`Missing key(s) in state_dict: "conv1.weight" ...
Unexpected key(s) in state_dict: "module.conv1.weight"`), and a plain checkpoint does
not load into the wrapper. A pickled bare model has no `.module` (`AttributeError: 'Net'
object has no attribute 'module'`). It shows up later, at evaluation, fine-tuning or deployment.

## How to fix
Save and load the inner model: `torch.save(model.module.state_dict(), path)` and
`model.module.load_state_dict(...)`.
"""

from __future__ import annotations

import ast

from dpcheck.analysis.bindings import reaching_assignment
from dpcheck.analysis.checkpoints import (
    PREFIX_KEPT,
    UNRESUMED_CONDITION,
    from_checkpoint,
    keys_taken_off,
    loader_calls,
    model_class,
    prefix_handled,
    prefix_strips,
)
from dpcheck.analysis.dataflow import argument
from dpcheck.analysis.scripts import ARGUMENTS_MARK, mentions_dataparallel, script_facts, unless_wrapped
from dpcheck.analysis.torch_api import FUNCTION_DEFS
from dpcheck.findings import Applicability, Severity
from dpcheck.rule import TRAINING_SCRIPT, Rule


class WrappedStateDict(Rule):
    code = "DP702"
    name = "wrapped-state-dict"
    severity = Severity.WARNING
    not_confirmable = TRAINING_SCRIPT
    summary = "state_dict() of the DataParallel wrapper has `module.` prefixes that plain models reject"
    fix_hint = "Save and load model.module.state_dict() instead"
    bad_example = """
        model = nn.DataParallel(Net().cuda())
        loss = model(x).mean()
        torch.save(model.state_dict(), "checkpoint.pt")
    """
    good_example = """
        model = nn.DataParallel(Net().cuda())
        torch.save(model.state_dict(), "resume.pt")
        model.load_state_dict(torch.load("resume.pt"))
    """

    def check_file(self, ctx):
        if not mentions_dataparallel(ctx):
            return
        facts = script_facts(ctx)
        saves_wrapped, saves_bare, loads_bare, loads_wrapped = [], [], [], []
        for node in ctx.nodes(ast.Call):
            if not isinstance(node.func, ast.Attribute) or node.func.attr not in ("state_dict", "load_state_dict"):
                continue
            owner = node.func.value
            wrap = facts.wrap_for(owner)
            through_module = isinstance(owner, ast.Attribute) and owner.attr == "module" \
                and facts.wrap_for(owner.value) is not None or _unwrapped_alias(owner, node, facts, ctx)
            if node.func.attr == "state_dict":
                if wrap is not None and _saved(node, facts, ctx):
                    if _unwrapped_here(node, owner, facts):
                        saves_bare.append(node)  # `except AttributeError:` after reading `.module`
                    else:
                        saves_wrapped.append((node, wrap))
                elif through_module and (_saved(node, facts, ctx) or _returned(node, facts)):
                    saves_bare.append(node)
            elif wrap is not None:
                loads_wrapped.append((node, wrap))
            elif node.args and (through_module or _bare_model(owner, facts)) and from_checkpoint(node.args[0], ctx) \
                    and not prefix_handled(node, ctx):
                loads_bare.append(node)  # as they are: a dict with the prefix taken off loads
        # A file that also loads its checkpoints back into the wrapper (resume) round-trips the prefix;
        # so does one that strips it from the keys when it loads, itself or through a loader it calls
        # (in another file: the index settles `prefix_kept:<loader>`). A load into what a builder of
        # another file returns is into the wrapper only if that builder wraps (`model = get_model()`,
        # loaded, then `model = nn.DataParallel(model)`): where none does, it is a load into the bare
        # model, which the save must be reported against (on that condition, `bare_builder:`).
        resumes = [(node, unless_wrapped(wrap.requires) if wrap.requires else None)
                   for node, wrap in loads_wrapped if node.args and from_checkpoint(node.args[0], ctx)]
        round_trip = any(unless is None for _, unless in resumes) or bool(saves_wrapped and prefix_strips(ctx))
        # Left when no resume is surely into the wrapper: each is into the bare model on its condition.
        maybe_bare = [] if round_trip else resumes
        loaders = tuple(frozenset({f"{PREFIX_KEPT}:{name}"}) for name in loader_calls(ctx)) if saves_wrapped else ()
        # A wrapper that is never called was made to write the prefix on purpose (a conversion script).
        called = {id(w.source.call) for c in ctx.nodes(ast.Call) for w in [facts.called_wrap(c)] if w is not None}
        for node, wrap in saves_wrapped:
            if (loads_bare or not round_trip) and id(wrap.source.call) in called:
                if loads_bare:
                    why = (f"and this file loads checkpoints into the bare model (line {loads_bare[0].lineno}): "
                           "Missing/Unexpected key(s)")
                    requires = wrap.requires
                elif maybe_bare:
                    load, unless = maybe_bare[0]
                    builder = next(iter(unless[0])).partition(ARGUMENTS_MARK)[0].rsplit(".", 1)[-1]
                    why = (f"and this file loads checkpoints (line {load.lineno}) into what `{builder}(...)` returns, "
                           "the bare model unless that function wraps it: Missing/Unexpected key(s)")
                    requires = (*wrap.requires, *dict.fromkeys(c for _, unless in maybe_bare for c in unless))
                else:
                    why = "that the bare model will not load"
                    # Not where every scanned file that loads a checkpoint as it is loads it into a
                    # wrapper (a test script that wraps before it loads): the prefix round-trips.
                    # Or, for the class the wrapper holds, load them with the prefix taken off (an
                    # evaluation script's `k.replace("module.", "")`).
                    package = ctx.module.rpartition(".")[0]
                    built = model_class(wrap.inner, wrap.source.call, ctx) if wrap.inner is not None else None
                    resumed = UNRESUMED_CONDITION + package + (f":{built}" if built else "")
                    requires = (*wrap.requires, *loaders, frozenset({resumed}))
                yield self.violation(node, f"Saving `{wrap.name}.state_dict()` of the DataParallel wrapper writes "
                                     f"`module.`-prefixed keys {why}",
                                     requires=requires, fix=self.offer_fix(
                                         f"Save `{wrap.name}.module.state_dict()`", _applicability(wrap, node, facts)))
        for node, wrap in loads_wrapped:
            source = node.args[0] if node.args else None
            pretrained = source is not None and _pretrained(source, ctx)
            checkpoint = source is not None and from_checkpoint(source, ctx)
            stripped = checkpoint and keys_taken_off(source, ctx)
            if pretrained or stripped or (saves_bare and not saves_wrapped and checkpoint):
                what = "pretrained weights (no `module.` prefix)" if pretrained else \
                    "a checkpoint whose keys this file takes the `module.` prefix off" + (
                        " (with `strict=False` nothing loads, silently)" if _not_strict(node) else "") \
                    if stripped else f"a checkpoint this file saves from the bare model (line {saves_bare[0].lineno})"
                yield self.violation(node, f"`{wrap.name}.load_state_dict(...)` on the DataParallel wrapper expects "
                                     f"`module.`-prefixed keys but gets {what}: load into `{wrap.name}.module`",
                                     requires=wrap.requires, fix=self.offer_fix(
                                         f"Load into `{wrap.name}.module`", _applicability(wrap, node, facts)))
        yield from self._whole_module_read_as_wrapper(ctx, facts)

    def _whole_module_read_as_wrapper(self, ctx, facts):
        """`torch.save(model.module, path)` pickles the bare model; `torch.load(path).module` of a
        path built from the same template reads a wrapper's attribute off it: AttributeError."""
        text = ctx.source.text
        if ".module," not in text or "torch.load" not in text:
            return
        bare_saves: dict[tuple[str, ...], ast.Call] = {}
        wrapper_saved: set[tuple[str, ...]] = set()
        for call in ctx.nodes(ast.Call):
            if not (ctx.resolve(call.func) or "").endswith("torch.save"):
                continue
            saved, template = argument(call, 0, "obj"), _path_template(argument(call, 1, "f"), ctx)
            if saved is None or template is None:
                continue
            if isinstance(saved, ast.Attribute) and saved.attr == "module" and facts.wrap_for(saved.value) is not None:
                bare_saves.setdefault(template, call)
            elif facts.wrap_for(saved) is not None:
                wrapper_saved.add(template)  # (this template also holds wrappers: which one a load reads is open)
        for template in wrapper_saved:
            bare_saves.pop(template, None)
        if not bare_saves:
            return
        for node in ctx.nodes(ast.Attribute):
            if node.attr != "module" or not isinstance(node.ctx, ast.Load):
                continue
            if _tested_first(node, ctx):
                continue
            load = _loaded_from(node.value, ctx)
            save = bare_saves.get(_path_template(argument(load, 0, "f"), ctx)) if load is not None else None
            if save is not None:
                yield self.violation(node, f"`.module` of a checkpoint this file saves as the bare model "
                                     f"(`torch.save({ast.unparse(save.args[0])}, ...)`, line "
                                     f"{save.lineno}): the loaded object is no DataParallel wrapper (AttributeError)")

    def fix(self, finding, editor):
        import libcst as cst

        call = editor.node  # `<wrapper>.state_dict()` or `<wrapper>.load_state_dict(...)`
        if isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute):
            inner = cst.Attribute(value=call.func.value, attr=cst.Name("module"))
            editor.replace(call, call.with_changes(func=call.func.with_changes(value=inner)))


_SAVERS = ("torch.save", "save_file")
# Tests of what an object is, before reading `.module` off it.
_TYPE_TESTS = frozenset({"hasattr", "isinstance", "getattr"})


def _applicability(wrap, node, facts) -> Applicability:
    """Safe where the name holds the wrapper whenever ``node`` runs. Where it is wrapped only under an
    `if` that does not enclose ``node`` (`if n_gpu > 1: model = nn.DataParallel(model)`, also where a
    rebinding keeps it), or by one arm of a conditional expression, the bare model may reach ``node``
    and `.module` would raise: unsafe."""
    # A rebinding (`self.model = model.cuda()` after `if n_gpu > 1: model = nn.DataParallel(model)`)
    # holds a wrapper only where the wrap it keeps ran.
    for origin in (wrap.origin, *wrap.roots):
        if origin is None:
            continue
        if isinstance(origin, ast.Assign) and isinstance(origin.value, ast.IfExp) or facts.guarded_apart(origin, node):
            return Applicability.UNSAFE
    return Applicability.SAFE


def _saved(node, facts, ctx) -> bool:
    """Does the state dict reach a file: an enclosing `torch.save(...)` or a save helper (a function
    of this file that calls torch.save, or one named *save*), or a name that later does?"""
    cur = facts.parent(node)
    while cur is not None and not isinstance(cur, ast.stmt):
        if isinstance(cur, ast.Call) and _saver(cur, ctx):
            return True
        cur = facts.parent(cur)
    target = cur.targets[0] if isinstance(cur, ast.Assign) and len(cur.targets) == 1 else None
    if isinstance(target, ast.Subscript):  # `save_dict["model_state_dict"] = net.state_dict()`
        target = target.value
    if isinstance(target, ast.Name):
        name = target.id
        scope = facts.scope_of(cur)
        nodes = ctx.tree_index.subtree(scope) if scope is not ctx.tree else ctx.nodes(ast.Call)
        return any(isinstance(c, ast.Call) and c.lineno >= cur.lineno and _saver(c, ctx) and any(
            isinstance(a, ast.Name) and a.id == name for arg in [*c.args, *(k.value for k in c.keywords)]
            for a in ast.walk(arg)) for c in nodes)
    return False


def _returned(node, facts) -> bool:
    """Is the state dict returned from a function, alone or in a dict, tuple or conditional
    expression (`return {"model": self.model.module.state_dict() if parallel else ...}`)? A
    method that returns the model's weights hands a checkpoint's payload to the code that writes
    it (a logger or checkpoint helper in another file)."""
    cur = facts.parent(node)
    while isinstance(cur, (ast.Dict, ast.Tuple, ast.List, ast.IfExp)):
        cur = facts.parent(cur)
    return isinstance(cur, ast.Return)


def _saver(call, ctx) -> bool:
    name = ctx.resolve(call.func) or ""
    if name.endswith(_SAVERS):
        return True
    last = name.rsplit(".", 1)[-1]
    if isinstance(call.func, ast.Name) and last in ctx.fact(_save_helpers):
        return True
    return "save" in last.lower() and "checkpoint" in last.lower()


def _save_helpers(ctx) -> frozenset[str]:
    """Module-level functions of this file that call torch.save."""
    found = set()
    for stmt in ctx.tree.body:
        if isinstance(stmt, FUNCTION_DEFS) and any(
                isinstance(n, ast.Call) and (ctx.resolve(n.func) or "").endswith(_SAVERS)
                for n in ctx.tree_index.subtree(stmt)):
            found.add(stmt.name)
    return frozenset(found)


def _unwrapped_here(node, owner, facts) -> bool:
    """Is ``node`` in the `except` arm of a `try` whose body reads `<owner>.module`? That arm runs
    when the name holds no wrapper (`try: sd = net.module.state_dict() except: sd =
    net.state_dict()`)."""
    if not isinstance(owner, ast.Name):
        return False
    child, cur = node, facts.parent(node)
    while cur is not None and not isinstance(cur, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Module)):
        if isinstance(cur, ast.Try) and any(child is handler for handler in cur.handlers):
            return any(isinstance(n, ast.Attribute) and n.attr == "module" and isinstance(n.value, ast.Name)
                       and n.value.id == owner.id for stmt in cur.body for n in ast.walk(stmt))
        child, cur = cur, facts.parent(cur)
    return False


def _unwrapped_alias(owner, node, facts, ctx) -> bool:
    """Is ``owner`` a name whose binding reaching ``node`` (in its scope) is the bare model behind a
    name this file wraps: `model_to_save = model.module if hasattr(model, "module") else model` (the
    transformers example scripts' idiom), `getattr(model, "module", model)`, `model.module`?"""
    if not isinstance(owner, ast.Name):
        return False
    binding = reaching_assignment(ctx, owner.id, node)
    if binding is None:
        return False
    inner = _unwrapped_model(binding.value)
    return inner is not None and _bare_model(inner, facts)


def _unwrapped_model(value) -> ast.Name | None:
    """The name whose bare model ``value`` is: `m.module if <test> else m`, `getattr(m, "module", m)`,
    `m.module`; None for anything else."""
    if isinstance(value, ast.IfExp):
        body, orelse = value.body, value.orelse
        if isinstance(orelse, ast.Attribute):  # `m if not hasattr(m, "module") else m.module`
            body, orelse = orelse, body
        inner = _unwrapped_model(body)
        return inner if inner is not None and isinstance(orelse, ast.Name) and orelse.id == inner.id else None
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "getattr" \
            and len(value.args) == 3 and isinstance(value.args[1], ast.Constant) and value.args[1].value == "module" \
            and isinstance(value.args[0], ast.Name) and isinstance(value.args[2], ast.Name) \
            and value.args[0].id == value.args[2].id:
        return value.args[0]
    if isinstance(value, ast.Attribute) and value.attr == "module" and isinstance(value.value, ast.Name):
        return value.value
    return None


def _bare_model(owner, facts) -> bool:
    """A name that holds a wrapper elsewhere in this file, but not here (before wrapping, other arm)."""
    return isinstance(owner, ast.Name) and any(w.name == owner.id for w in facts.wraps)


def _tested_first(node, ctx) -> bool:
    """Is ``node`` read only after a test of what the object is (an `if`/conditional expression on
    `hasattr`/`isinstance`/`getattr`), or inside a `try` that handles the error?"""
    child, cur = node, ctx.parent(node)
    while cur is not None and not isinstance(cur, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Module)):
        if isinstance(cur, (ast.If, ast.IfExp, ast.While)) and child is not cur.test and any(
                isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name) and sub.func.id in _TYPE_TESTS
                for sub in ast.walk(cur.test)):
            return True
        if isinstance(cur, ast.Try) and cur.handlers and any(child is stmt for stmt in cur.body):
            return True
        child, cur = cur, ctx.parent(cur)
    return False


def _loaded_from(node, ctx) -> ast.Call | None:
    """The `torch.load(...)` call ``node`` is, directly or as the value a name holds where it is read."""
    if isinstance(node, ast.Name):
        binding = reaching_assignment(ctx, node.id, node)
        node = binding.value if binding is not None else None
    if isinstance(node, ast.Call) and (ctx.resolve(node.func) or "").endswith("torch.load"):
        return node
    return None


def _path_template(node, ctx) -> tuple[str, ...] | None:
    """The string constants a checkpoint path is built from (`'{0}/encoder{1}_{2}.pth'.format(...)`,
    an f-string's text, `os.path.join(root, "best.pth")`), through the name it is bound to; None for
    a path with none. Two paths of one template name the same checkpoint series."""
    if isinstance(node, ast.Name):
        binding = reaching_assignment(ctx, node.id, node)
        node = binding.value if binding is not None else None
    if node is None:
        return None
    parts = tuple(sub.value for sub in ast.walk(node) if isinstance(sub, ast.Constant) and isinstance(sub.value, str))
    return parts or None


def _not_strict(call) -> bool:
    """Does the `load_state_dict(...)` call pass `strict=False` (missing and unexpected keys are only returned)?"""
    strict = next((k.value for k in call.keywords if k.arg == "strict"), None)
    return isinstance(strict, ast.Constant) and strict.value is False


def _pretrained(node, ctx) -> bool:
    return any(isinstance(sub, ast.Call) and any(w in (ctx.resolve(sub.func) or "") for w in (
        "load_url", "load_state_dict_from_url", "hub.load")) for sub in ast.walk(node))
