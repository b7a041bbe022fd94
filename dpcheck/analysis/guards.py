"""Branches of forward that do not run when the model is wrapped, and the call-site facts they need.

Code that a rule finds in forward-reachable code may sit behind a guard that no run under
DataParallel takes:

* ``if lengths is not None:`` (or ``if lengths:``) on a parameter of ``forward`` that defaults to
  None/False and that no call of the module in the scanned files passes. Whether any call passes
  it is a cross-file question: each file summarises how it calls the modules it holds in
  ``self.<attr>`` (``module_calls``), and the project index settles the condition
  ``passed:<class>:<param>@<position>`` (some call passes it, or a caller is not known).
* ``if isinstance(x, PackedSequence):`` on a parameter of the forward of the model a script of
  this file wraps in DataParallel: scatter cannot split a PackedSequence, so the wrapped model's
  own inputs are never one. Nor, in a file that packs no sequence (no `pack_padded_sequence`,
  `pack_sequence` or new `PackedSequence`), are a layer's: a replica's layer receives a
  PackedSequence only from forward code that packs one (seq2seq.pytorch's encoder and decoder
  accept both forms; their models feed them padded tensors). A layer fed from another file's
  packing code is not seen: the check is the file's own, as the wrap evidence is.

``branch_requires`` answers for one node; rules that report code behind such guards ask it.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from dpcheck.analysis.bindings import statements_before
from dpcheck.analysis.dataflow import parameter_defaults
from dpcheck.analysis.names import self_attr
from dpcheck.analysis.scripts import (
    BUILDER_CONDITION,
    EVALUATED_CONDITION,
    mentions_dataparallel,
    script_facts,
    target_text,
)
from dpcheck.analysis.torch_api import ALTERNATE_CONSTRUCTORS, FUNCTION_DEFS
from dpcheck.analysis.wrapping import WRAPPED, classes_of, wrap_evidence
from dpcheck.constants import DATAPARALLEL_CLASSES, DISTRIBUTED_DATAPARALLEL_CLASSES
from dpcheck.findings import Severity

if TYPE_CHECKING:
    from dpcheck.analysis.context import FileContext
    from dpcheck.analysis.model_class import ModelClass
    from dpcheck.analysis.tree import FunctionInfo

PASSED_CONDITION = "passed:"
# `unpassed:<class>:<param>@<k>` in a finding's ``advice_if``: advice only where no call passes that
# parameter (the ``passed:`` question answered no, see ClassIndex.advice).
UNPASSED_CONDITION = "unpassed:"
# `wrapper_passes:<class>:<param>@<k>`: some call through a DataParallel wrapper of the class in the
# scanned files passes that parameter of its forward (ClassIndex.wrapper_passes).
WRAPPER_PASSES_CONDITION = "wrapper_passes:"
# Marker in a call summary: some use of the module is not a call whose arguments can be read.
UNKNOWN_CALLER = "*"
# Suffix of a call summary's marker for an argument that is the constant False (`use_stereoshape=False`,
# `@2=False`), and of a ``passed:`` condition whose parameter defaults to False: such a call passes that
# parameter nothing it does not already hold (ClassIndex.passed), while a None default tells False apart.
FALSE_PASSED = "=False"
# Marker in a call summary: an instance built where every use of it is read (its calls, if any, are
# the other markers; one handed to a DataParallel wrapper is called through it, see wrapper_calls).
BUILT_HERE = "~"
_PACKED_SEQUENCE = "torch.nn.utils.rnn.PackedSequence"
_NEVER = None  # branch_requires: the node does not run when the model is wrapped


def branch_requires(model: ModelClass, fn: FunctionInfo, node: ast.AST) -> tuple[frozenset[str], ...] | None:
    """The cross-file conditions (a ``Finding.requires`` tuple, empty when there are none) under which
    ``node`` of ``fn`` runs when ``model`` is wrapped; None when it does not run then."""
    if fn.name != "forward" or fn.owner is None:  # (a lambda hook has no ``node.name``)
        return ()
    params = _forward_params(fn)
    if not params:
        return ()
    requires: list[frozenset[str]] = []
    parent = fn.parent(node)
    child = node
    while parent is not None and parent is not fn.node:
        if isinstance(parent, ast.If) and child is not parent.test:
            taken = child in parent.body
            for name in _required_params(parent.test, taken, params):
                position, off_by_default = params[name]
                if off_by_default and _callers_value_at(fn, name, parent):
                    false_default = FALSE_PASSED if _is_false(parameter_defaults(fn.node.args).get(name)) else ""
                    requires.append(frozenset({f"{PASSED_CONDITION}{fn.owner.qualname}:{name}@{position}"
                                               f"{false_default}"}))
            if taken and _tests_packed(parent.test, params, model):
                return _NEVER
        child, parent = parent, fn.parent(parent)
    return tuple(requires)


def _callers_value_at(fn: FunctionInfo, name: str, branch: ast.If) -> bool:
    """Does forward's parameter ``name`` still hold what the caller passed when ``branch``'s test
    reads it: forward never rebinds it, or only inside that `if` or after it, and the `if` is in no
    loop (`if head_mask is not None: head_mask = head_mask.to(dtype) else: head_mask = [None] * n`)?
    A parameter rebound before the test tells nothing of what the caller passed."""
    if name not in fn.local_values:
        return True
    cur = fn.parent(branch)
    while cur is not None and cur is not fn.node:
        if isinstance(cur, (ast.For, ast.AsyncFor, ast.While)):
            return False
        cur = fn.parent(cur)
    test_end = (branch.test.end_lineno, branch.test.end_col_offset)
    return all((node.lineno, node.col_offset) > test_end for node in fn.nodes(ast.Name)
               if node.id == name and not isinstance(node.ctx, ast.Load))


def eval_mode_only(fn: FunctionInfo, node: ast.AST) -> bool:
    """Does ``node`` run only in eval mode: in the body of `if not self.training:` (or an `and` with
    it), in the `else:` of `if self.training:` (or an `or` with it), either arm of a conditional
    expression alike, or after `if self.training: return ...` in a block around it? A rule reports
    it with ``EVAL_MODE_LATENT`` and ``EVAL_MODE_NOTE``."""
    child, parent = node, fn.parent(node)
    while parent is not None:
        if isinstance(parent, (ast.If, ast.IfExp)) and child is not parent.test:
            taken = child in parent.body if isinstance(parent, ast.If) else child is parent.body
            if _training_decides(fn, parent.test) is (not taken):
                return True
        if isinstance(child, ast.stmt) and any(
                isinstance(before, ast.If) and not before.orelse and _training_decides(fn, before.test) is True
                and isinstance(before.body[-1], (ast.Return, ast.Raise)) for before in statements_before(parent, child)):
            return True  # `if self.training: return loss`, then the eval path
        if parent is fn.node:
            break
        child, parent = parent, fn.parent(parent)
    return False


# How a finding on a path that runs only in eval mode is reported: a warning, an error where the
# scanned program may evaluate a model (ClassIndex.may_evaluate).
EVAL_MODE_LATENT = {"severity": Severity.WARNING, "error_if": (frozenset({EVALUATED_CONDITION}),)}
EVAL_MODE_NOTE = (" (only in eval mode, where `self.training` is False: latent unless some scanned file "
                  "puts a model in eval mode)")


def _training_decides(fn: FunctionInfo, test: ast.AST) -> bool | None:
    """True where ``test`` holds whenever the module is in training mode (`self.training`, an `or`
    with it), False where it holds only in eval mode (`not self.training`, an `and` with it), else
    None."""
    if fn.self_attr(test) == "training":
        return True
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) and fn.self_attr(test.operand) == "training":
        return False
    if isinstance(test, ast.BoolOp):
        parts = [_training_decides(fn, value) for value in test.values]
        wanted = True if isinstance(test.op, ast.Or) else False
        return wanted if wanted in parts else None
    return None


def optional_argument_guard(model: ModelClass, fn: FunctionInfo, node: ast.AST) -> dict | None:
    """For a finding at ``node`` of ``fn``: None when the node does not run when ``model`` is wrapped
    (see ``branch_requires``); else the ``Violation`` keywords that make it advice (info) where no
    call passes an optional argument of forward that its branch needs (`if mask is not None:`,
    `if has_mask:`, with a None or False default): ``UNPASSED_CONDITION`` for each; empty for none."""
    requires = branch_requires(model, fn, node)
    if not requires:
        return None if requires is _NEVER else {}
    return {"advice_if": tuple(UNPASSED_CONDITION + condition.removeprefix(PASSED_CONDITION)
                               for names in requires for condition in sorted(names))}


def wrapper_passes_condition(model, param: str) -> tuple[frozenset[str], ...] | None:
    """For a forward parameter defaulting to None, the condition that a call through a DataParallel
    wrapper of the class passes it (``WRAPPER_PASSES_CONDITION``); None for any other parameter."""
    args = model.forward.node.args
    default = parameter_defaults(args).get(param)
    if not (isinstance(default, ast.Constant) and default.value is None):
        return None
    positional = [a.arg for a in (*args.posonlyargs, *args.args)][1:]
    position = positional.index(param) if param in positional else -1
    return (frozenset({f"{WRAPPER_PASSES_CONDITION}{model.info.qualname}:{param}@{position}"}),)


def required_options(fn: FunctionInfo, test: ast.AST, taken: bool) -> list[tuple[str, int]]:
    """(name, position) of the parameters of forward ``fn`` defaulting to None that the branch of
    ``test`` (``taken``: its body) needs given: `labels is not None`, `labels`, an `and` of such."""
    params = _forward_params(fn)
    defaults = parameter_defaults(fn.node.args)
    return [(name, params[name][0]) for name in _required_params(test, taken, params)
            if isinstance(defaults.get(name), ast.Constant) and defaults[name].value is None
            and name not in fn.local_values]


def _forward_params(fn: FunctionInfo) -> dict[str, tuple[int, bool]]:
    """Parameter name -> (position after self, -1 for keyword-only; defaults to None/False)."""
    args = fn.node.args
    defaults = parameter_defaults(args)
    found = {arg.arg: (i, _is_off(defaults.get(arg.arg))) for i, arg in enumerate([*args.posonlyargs, *args.args][1:])}
    found.update((arg.arg, (-1, _is_off(defaults.get(arg.arg)))) for arg in args.kwonlyargs)
    return found


def _is_off(default: ast.AST | None) -> bool:
    return isinstance(default, ast.Constant) and (default.value is None or default.value is False)


def _required_params(test: ast.AST, taken: bool, params: dict) -> list[str]:
    """Parameters the branch (``taken``: the body, else the orelse) runs only when given:
    `p is not None`, `p`, or either in an `and` for the body; `p is None`, `not p` for the orelse."""
    if taken and isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return [name for value in test.values for name in _required_params(value, True, params)]
    if taken and isinstance(test, ast.Name) and test.id in params:
        return [test.id]
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.left, ast.Name) \
            and test.left.id in params and isinstance(test.comparators[0], ast.Constant) \
            and test.comparators[0].value is None \
            and isinstance(test.ops[0], ast.IsNot if taken else ast.Is):
        return [test.left.id]
    if not taken and isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) \
            and isinstance(test.operand, ast.Name) and test.operand.id in params:
        return [test.operand.id]
    return []


def _tests_packed(test: ast.AST, params: dict, model: ModelClass) -> bool:
    """`isinstance(<forward parameter>, PackedSequence)` (alone or in an `and`) in the forward of the
    class a script of this file wraps, or of any class of a file that packs no sequence:
    DataParallel's scatter never hands it a PackedSequence, and nothing in the file packs one."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return any(_tests_packed(value, params, model) for value in test.values)
    if not (isinstance(test, ast.Call) and isinstance(test.func, ast.Name) and test.func.id == "isinstance"
            and len(test.args) == 2 and isinstance(test.args[0], ast.Name) and test.args[0].id in params):
        return False
    types = test.args[1].elts if isinstance(test.args[1], ast.Tuple) else [test.args[1]]
    if not all(model.ctx.resolve(t) == _PACKED_SEQUENCE for t in types):
        return False
    return wrap_evidence(model) == WRAPPED or not model.ctx.fact(packs_sequences)


_PACKING = ("torch.nn.utils.rnn.pack_padded_sequence", "torch.nn.utils.rnn.pack_sequence")
_PACKING_NAMES = frozenset({"pack_padded_sequence", "pack_sequence", "PackedSequence"})


def packs_sequences(ctx: FileContext) -> bool:
    """Does the file pack a sequence anywhere: call `pack_padded_sequence` or `pack_sequence`, or
    build a `PackedSequence`, other than inside an `if isinstance(x, PackedSequence):` branch (a
    re-wrap of a packed input's transformed data, `PackedSequence(f(x.data), x.batch_sizes)`, runs
    only when a packed sequence already came in)? A name it cannot resolve counts when spelled like
    one of them."""
    for call in ctx.nodes(ast.Call):
        name = ctx.resolve(call.func) or ""
        last = name.rpartition(".")[2]
        if (name in _PACKING or name == _PACKED_SEQUENCE or last in _PACKING_NAMES) \
                and not _inside_packed_branch(ctx, call):
            return True
    return False


def _inside_packed_branch(ctx: FileContext, node: ast.AST) -> bool:
    child, parent = node, ctx.parent(node)
    while parent is not None and not isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Module)):
        if isinstance(parent, ast.If) and child in parent.body and _isinstance_packed(ctx, parent.test):
            return True
        child, parent = parent, ctx.parent(parent)
    return False


def _isinstance_packed(ctx: FileContext, test: ast.AST) -> bool:
    """`isinstance(<anything>, PackedSequence)`, alone or in an `and`."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return any(_isinstance_packed(ctx, value) for value in test.values)
    return isinstance(test, ast.Call) and isinstance(test.func, ast.Name) and test.func.id == "isinstance" \
        and len(test.args) == 2 and all(ctx.resolve(t) == _PACKED_SEQUENCE for t in (
            test.args[1].elts if isinstance(test.args[1], ast.Tuple) else [test.args[1]]))


def module_calls(ctx: FileContext) -> dict[str, list[str]]:
    """How this file calls the modules its classes hold: resolved class name -> markers of what
    the calls pass (``#n``: the most positional arguments of one call; keyword names;
    ``UNKNOWN_CALLER`` when an instance is used otherwise than called with readable arguments,
    or built other than into `self.<attr>`, a local name (``_local_instance_markers``) or a
    DataParallel wrap; ``BUILT_HERE`` for one of the last two). Only classes the file builds appear."""
    calls: dict[str, set[str]] = {}
    held: dict[tuple[int, str], set[str]] = {}  # (class node id, attr) -> classes built into it
    for call in ctx.nodes(ast.Call):
        func = call.func
        last = func.id if type(func) is ast.Name else func.attr if type(func) is ast.Attribute else ""
        if (last.startswith("from_") or last in ALTERNATE_CONSTRUCTORS) and type(func) is ast.Attribute:
            func = func.value  # `Net.from_pretrained(...)`: a classmethod that builds the class
            last = func.id if type(func) is ast.Name else func.attr if type(func) is ast.Attribute else ""
        if not last[:1].isupper():
            continue
        name = ctx.resolve(func)
        if not name or name.startswith(("torch.", "builtins.", "collections.", "typing.")):
            continue
        built, parent = call, ctx.parent(call)
        while isinstance(parent, ast.Attribute) and parent.attr in _RETURNS_ITSELF:
            outer = ctx.parent(parent)  # `Net().to(device)`: still the instance
            if not (isinstance(outer, ast.Call) and outer.func is parent):
                break
            built, parent = outer, ctx.parent(outer)
        target = parent.targets[0] if isinstance(parent, ast.Assign) and len(parent.targets) == 1 else None
        owner = ctx.enclosing(call, ast.ClassDef) if target is not None else None
        attr = self_attr(target) if owner is not None else None
        if attr is not None:
            held.setdefault((id(owner), attr), set()).add(name)
            calls.setdefault(name, set())
        elif isinstance(target, ast.Name):
            calls.setdefault(name, set()).update({BUILT_HERE, *_local_instance_markers(
                ctx, call, target.id, _in_own_factory(ctx, call, last))})
        elif isinstance(parent, ast.Call) and parent.func is not built and _never_calls(parent, ctx):
            calls.setdefault(name, set()).add(BUILT_HERE)  # `nn.DataParallel(Net())`: see wrapper_calls
        else:
            calls.setdefault(name, set()).add(UNKNOWN_CALLER)
    if not held:
        return {name: sorted(markers) for name, markers in calls.items()}
    for info in ctx.classes.values():
        attrs = {attr for (owner, attr) in held if owner == id(info.node)}
        if not attrs:
            continue
        for node in ctx.tree_index.nodes_within(info.node, ast.Attribute):
            if node.attr not in attrs or self_attr(node) is None or not isinstance(node.ctx, ast.Load):
                continue
            markers = _call_markers(ctx, node)
            for name in held[(id(info.node), node.attr)]:
                calls[name].update(markers)
    return {name: sorted(markers) for name, markers in calls.items()}


def _call_markers(ctx: FileContext, node: ast.Attribute) -> set[str]:
    """What a use of `self.<attr>` tells of the calls of the module it holds."""
    parent = ctx.parent(node)
    if isinstance(parent, ast.Attribute):
        return set()  # `self.postnet.gru`: a member of it, not a call of it
    if not (isinstance(parent, ast.Call) and parent.func is node):
        if isinstance(parent, ast.Call) and _never_calls(parent, ctx):
            return set()  # `nn.DataParallel(self.model)`: the wrapper's calls are wrapper_calls
        return {UNKNOWN_CALLER}  # passed on, stored, iterated: its callers are not known
    return _arguments_passed(ctx, parent)


def _arguments_passed(ctx: FileContext, call: ast.Call) -> set[str]:
    """The markers of one readable call: ``#n`` (positional arguments 0..n-1 passed), ``@i`` (a
    positional argument past n passed), keyword names; an argument that is the constant None passes
    nothing, and one that forwards an optional parameter of the caller's own forward (see
    ``_forwarded_from``) passes only when that is passed: ``@i<source`` and ``name<source``.
    ``UNKNOWN_CALLER`` for `*args`, or `**kwargs` other than a dict of known keys (``_keywords_read``)."""
    keywords = _keywords_read(ctx, call)
    if keywords is None or any(isinstance(a, ast.Starred) for a in call.args):
        return {UNKNOWN_CALLER}
    sources = [FALSE_PASSED if _is_false(a) else _forwarded_from(ctx, call, a) for a in call.args]
    first = next((i for i, source in enumerate(sources) if source is not None), len(sources))
    markers = {f"#{first}"}
    markers.update(f"@{i}" if source is None else f"@{i}{source}" if source == FALSE_PASSED else f"@{i}<{source}"
                   for i, source in enumerate(sources[first:], first) if source != "")
    for name, value in keywords:
        source = FALSE_PASSED if _is_false(value) else _forwarded_from(ctx, call, value)
        if source != "":
            markers.add(name if source is None else name + source if source == FALSE_PASSED else f"{name}<{source}")
    return markers


def _keywords_read(ctx: FileContext, call: ast.Call) -> list[tuple[str, ast.AST]] | None:
    """(name, value) of each keyword argument of ``call``; for `**inputs`, the entries of the dict
    literals `inputs` is bound to in its function, where their keys are all strings and every other
    use of the name reads an entry (`inputs["labels"]`) or unpacks it into a call (a script's
    `inputs = {"input_ids": batch[0], ...}; outputs = model(**inputs)`). None where a `**` is
    anything else: an entry stored or updated, the dict handed on, a parameter, another binding."""
    found = []
    for keyword in call.keywords:
        if keyword.arg is not None:
            found.append((keyword.arg, keyword.value))
            continue
        entries = _dict_entries(ctx, keyword.value)
        if entries is None:
            return None
        found.extend(entries)
    return found


def _dict_entries(ctx: FileContext, value: ast.AST) -> list[tuple[str, ast.AST]] | None:
    if not isinstance(value, ast.Name):
        return None
    scope = ctx.enclosing(value, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
    names = ctx.tree_index.nodes_within(scope, ast.Name) if scope is not None else ctx.nodes(ast.Name)
    entries: list[tuple[str, ast.AST]] = []
    for node in names:
        if node.id != value.id:
            continue
        parent = ctx.parent(node)
        if isinstance(node.ctx, ast.Store):
            bound = parent.value if isinstance(parent, ast.Assign) and parent.targets == [node] else None
            if not (isinstance(bound, ast.Dict) and all(
                    isinstance(key, ast.Constant) and isinstance(key.value, str) for key in bound.keys)):
                return None  # `{**other, ...}`, a loop target, a call's result: its keys are not known
            entries.extend((key.value, entry) for key, entry in zip(bound.keys, bound.values))
        elif not (isinstance(node.ctx, ast.Load) and (
                isinstance(parent, ast.keyword) and parent.arg is None
                or isinstance(parent, ast.Subscript) and parent.value is node and isinstance(parent.ctx, ast.Load))):
            return None
    if scope is not None and any(a is not None and a.arg == value.id for a in (
            *scope.args.posonlyargs, *scope.args.args, *scope.args.kwonlyargs, scope.args.vararg, scope.args.kwarg)):
        return None  # handed in: what the caller put in it is not known
    return entries or None


def _forwarded_from(ctx: FileContext, call: ast.Call, value: ast.AST) -> str | None:
    """"" when ``value`` passes nothing (the constant None); ``<class>:<param>@<k>`` (the form of
    the ``passed:`` condition) when it is a parameter of the enclosing class's forward that
    defaults to None or False and that forward never rebinds (`self.layer(x, head_mask=head_mask)`
    passes head_mask only when forward's own caller did); None when it is passed."""
    if _is_none(value):
        return ""
    if not isinstance(value, ast.Name):
        return None
    optional = ctx.fact(_forward_optionals)
    if not optional:
        return None
    forward = ctx.enclosing(call, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef))
    return optional.get(forward, {}).get(value.id)


def _forward_optionals(ctx: FileContext) -> dict[ast.AST, dict[str, str]]:
    """For the forward of each class of the file: its parameters that default to None or False and
    that it never rebinds -> their ``<class>:<param>@<k>``."""
    found: dict[ast.AST, dict[str, str]] = {}
    for info in ctx.classes.values():
        forward = next((n for n in info.node.body if isinstance(n, FUNCTION_DEFS)
                        and n.name == "forward"), None)
        if forward is None:
            continue
        args = forward.args
        defaults = parameter_defaults(args)
        positions = {a.arg: i for i, a in enumerate([*args.posonlyargs, *args.args][1:])}
        positions.update((a.arg, -1) for a in args.kwonlyargs)
        optional = {name: position for name, position in positions.items() if _is_off(defaults.get(name))}
        if not optional:
            continue
        for node in ctx.tree_index.nodes_within(forward, ast.Name):
            if not isinstance(node.ctx, ast.Load):
                optional.pop(node.id, None)  # rebound: what it holds then is forward's own
        found[forward] = {name: f"{info.qualname}:{name}@{position}" for name, position in optional.items()}
    return found


_FUNCTION_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
# Methods of a module that return the module itself (`model = model.to(device)`).
_RETURNS_ITSELF = frozenset({"to", "cuda", "cpu", "half", "float", "double", "bfloat16", "train", "eval",
                             "requires_grad_", "type", "apply", "share_memory", "to_empty"})


def _in_own_factory(ctx: FileContext, construction: ast.Call, built: str) -> bool:
    """Is ``construction`` (of the class named ``built``) in a `from_*` method of that class itself
    (minGPT's `GPT.from_pretrained`: `model = GPT(config)` ... `return model`)? Its callers build the
    class through `GPT.from_pretrained(...)`, which ``module_calls`` reads as a construction where
    they call it, so the instance it returns is followed there."""
    method = ctx.enclosing(construction, FUNCTION_DEFS)
    if method is None or not method.name.startswith("from_"):
        return False
    owner = ctx.enclosing(method, ast.ClassDef)
    return owner is not None and owner.name == built and owner.body.count(method) == 1


def _local_instance_markers(ctx: FileContext, construction: ast.Call, name: str, factory: bool = False) -> set[str]:
    """What the uses of a local name bound to a module's construction (`model = Net(...)` in a
    script) tell of its calls: the markers of each direct call, nothing for a member read
    (`model.parameters()`, `model = model.to(device)`, `model.eval()`), a wrap in DataParallel or
    another torch function or inspection (``_inspects``: a wrapper's own calls are ``wrapper_calls``);
    ``UNKNOWN_CALLER`` where any use hands it on (returned, stored, passed to a call, `net =
    model.cuda()`), but for an argument of a function of this file, whose uses of that parameter are
    read the same way (`evaluate(model, loader)`, ``_handed_parameter``), as are those of another local
    name it is bound to (`model_to_save = model.module if hasattr(model, "module") else model`,
    ``_alias_binding``), and but for its return from
    the class's own factory (``factory``, see ``_in_own_factory``). Every load of the name in the
    scope counts, whatever it holds then."""
    scope = ctx.enclosing(construction, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) or ctx.tree
    return _instance_markers(ctx, scope, name, frozenset(), factory)


def _instance_markers(ctx: FileContext, scope: ast.AST, name: str, trail: frozenset[int],
                      factory: bool = False) -> set[str]:
    """``_local_instance_markers`` of the loads of ``name`` in ``scope``; ``trail``: the functions of
    this file already followed into (a cycle adds nothing new)."""
    markers: set[str] = set()
    for node in ctx.tree_index.nodes_within(scope, ast.Name):
        if node.id != name or not isinstance(node.ctx, ast.Load):
            continue
        parent = ctx.parent(node)
        if isinstance(parent, ast.Call) and parent.func is node:
            markers |= _arguments_passed(ctx, parent)
        elif isinstance(parent, ast.Attribute):
            call = ctx.parent(parent)
            if parent.attr in _RETURNS_ITSELF and isinstance(call, ast.Call) and call.func is parent:
                outer = ctx.parent(call)
                if not (isinstance(outer, ast.Expr) or isinstance(outer, ast.Assign) and len(outer.targets) == 1
                        and isinstance(outer.targets[0], ast.Name) and outer.targets[0].id == name):
                    return {UNKNOWN_CALLER}
        elif factory and isinstance(parent, ast.Return) and ctx.enclosing(parent, _FUNCTION_SCOPES) is scope:
            continue
        elif not (isinstance(parent, ast.Call) and _never_calls(parent, ctx)):
            # Handed to a function of this file, or bound to another local name of this scope (`model_to_save
            # = model.module if hasattr(model, "module") else model`): that name's uses are read the same way.
            alias = _alias_binding(ctx, node)
            handed = (scope, alias.targets[0].id) if alias is not None else _handed_parameter(ctx, parent, node)
            if handed is None:
                return {UNKNOWN_CALLER}
            followed = id(alias if alias is not None else handed[0])
            if followed not in trail:
                found = _instance_markers(ctx, handed[0], handed[1], trail | {followed})
                if UNKNOWN_CALLER in found:
                    return found
                markers |= found
    return markers


def _alias_binding(ctx: FileContext, node: ast.Name) -> ast.Assign | None:
    """The statement binding ``node``'s value to one other plain name, directly or as a branch of a
    conditional expression (`net = model`, `m = model.module if parallel else model`); None otherwise.
    (A `.module` branch is a member read of the name, which tells nothing of its calls.)"""
    child, parent = node, ctx.parent(node)
    while isinstance(parent, ast.IfExp) and child is not parent.test:
        child, parent = parent, ctx.parent(parent)
    if isinstance(parent, ast.Assign) and parent.value is child and len(parent.targets) == 1 \
            and isinstance(parent.targets[0], ast.Name):
        return parent
    return None


def _handed_parameter(ctx: FileContext, call: ast.AST, node: ast.AST) -> tuple[ast.AST, str] | None:
    """(function, parameter) where ``call`` hands ``node`` to a module-level function of this file
    (`evaluate(model, loader)`, `run(net=model)`), as a positional argument before any `*` or by
    keyword; None for any other use. A function that rebinds the parameter or hands on `*args`
    or `**kwargs` of its own is not followed."""
    if isinstance(call, ast.keyword):
        keyword, call = call, ctx.parent(call)
    else:
        keyword = None
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)):
        return None
    fn = ctx.module_functions.get(call.func.id)
    if fn is None:
        return None
    args = fn.args
    if keyword is not None:
        param = keyword.arg if keyword.arg in {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)} else None
    else:
        index = next((i for i, arg in enumerate(call.args) if arg is node), None)
        positional = [*args.posonlyargs, *args.args]
        param = positional[index].arg if index is not None and index < len(positional) and not any(
            isinstance(arg, ast.Starred) for arg in call.args[:index]) else None
    if param is None or any(isinstance(n, ast.Name) and n.id == param and not isinstance(n.ctx, ast.Load)
                            for n in ctx.tree_index.nodes_within(fn, ast.Name)):
        return None
    return fn, param


# What a module may be handed to without that call or what it returns calling it outside a
# DataParallel wrapper: the wrappers (whose own calls are ``wrapper_calls``), saving it.
_WRAPS_OR_SAVES = DATAPARALLEL_CLASSES | DISTRIBUTED_DATAPARALLEL_CLASSES | {"torch.save"}


def _never_calls(call: ast.Call, ctx: FileContext) -> bool:
    """A call a module may be handed to without being called but through a wrapper: an inspection
    (`hasattr`, `print`, a logger's `logger.info(model)`), a DataParallel or DistributedDataParallel
    wrap, `torch.save`. (A container, `nn.Sequential(model)`, or `torch.compile` calls it.)"""
    func = call.func
    if isinstance(func, ast.Name) and func.id in _INSPECTIONS:
        return True
    if isinstance(func, ast.Attribute) and func.attr in _LOGGING and "log" in ast.unparse(func.value).lower():
        return True
    return ctx.resolve(func) in _WRAPS_OR_SAVES


# Builtins a wrapper may be handed to without being called (`hasattr(model, "module")`).
_INSPECTIONS = frozenset({"hasattr", "isinstance", "getattr", "type", "id", "len", "print", "str", "repr"})


def wrapper_calls(ctx: FileContext) -> dict[str, list[str]]:
    """How this file calls the DataParallel wrappers it builds: resolved class wrapped -> the
    markers of each call of a name holding its wrapper (``#n``, ``-k`` for a positional argument k
    that is the constant None, and keyword names not passed as None; comma-joined, one entry per
    call), or ``UNKNOWN_CALLER`` where the wrapper is returned or handed to a call (which may call
    it otherwise). A wrapper handed to a function of this file (`evaluate(model, loader)`) is called
    as that function calls its parameter (``_handed_to``)."""
    if not mentions_dataparallel(ctx):
        return {}
    facts = script_facts(ctx)
    found: dict[str, list[str]] = {}
    for wrap in facts.wraps:
        if wrap.parameter:
            continue  # a wrapper handed in: which class it wraps is the caller's
        owners = set(classes_of(wrap.inner, wrap.call, ctx)) - {""}
        if not owners:
            continue
        markers = _wrapper_call_markers(wrap, ctx, facts, frozenset())
        if not markers and not _every_load_read(wrap, ctx, facts):
            markers = [UNKNOWN_CALLER]
        for owner in owners:
            found.setdefault(owner, []).extend(markers)
    # A wrapper whose class is not known here: its calls are not read. One that a builder of another
    # file returns only if it returns a wrapper at all (`config = GPT.get_default_config()`) is
    # unknown only where the index finds that it does: the entry is that ``builder:`` condition.
    unknown = {_unknown_wrapper_entry(wrap) for wrap in facts.wraps if (
        not _handed_traced(wrap, ctx, facts, frozenset()) if wrap.parameter
        else not set(classes_of(wrap.inner, wrap.call, ctx)) - {""})}
    if unknown:
        found[UNKNOWN_CALLER] = sorted(unknown)
    return found


def _unknown_wrapper_entry(wrap) -> str:
    """``UNKNOWN_CALLER``, or the one ``builder:`` condition under which ``wrap`` holds a wrapper."""
    requires = wrap.source.requires
    if not wrap.parameter and len(requires) == 1 and next(iter(requires)).startswith(BUILDER_CONDITION):
        return next(iter(requires))
    return UNKNOWN_CALLER


def _wrapper_call_markers(wrap, ctx: FileContext, facts, trail: frozenset) -> list[str]:
    """The markers of each use of the name that holds ``wrap`` (see wrapper_calls); ``trail``: the
    functions already followed into."""
    markers = []
    for node in _wrapper_uses(wrap, ctx, facts):
        parent = ctx.parent(node)
        if isinstance(parent, ast.Call) and parent.func is node:
            keywords = _keywords_read(ctx, parent)
            if keywords is None or any(isinstance(a, ast.Starred) for a in parent.args):
                markers.append(UNKNOWN_CALLER)
            else:
                sources = [_forwarded_from(ctx, parent, a) for a in parent.args]
                markers.append(",".join([f"#{len(parent.args)}", *(
                    f"-{i}" if source == "" else f"-{i}<{source}"
                    for i, source in enumerate(sources) if source is not None), *(
                    name if source is None else f"{name}<{source}" for name, value in keywords
                    if (source := _forwarded_from(ctx, parent, value)) != "")]))
            continue
        call = ctx.parent(parent) if isinstance(parent, ast.keyword) else parent
        if isinstance(call, ast.Return):
            markers.append(UNKNOWN_CALLER)
        elif isinstance(call, ast.Call) and call.func is not node and not _inspects(call, ctx):
            handed = _handed_to(call, node, facts, trail)
            markers.extend(_wrapper_call_markers(handed, ctx, facts, trail | {handed.scope}) or [UNKNOWN_CALLER]
                           if handed is not None else [UNKNOWN_CALLER])
    return markers


def _every_load_read(wrap, ctx: FileContext, facts) -> bool:
    """Are the uses ``_wrapper_uses`` reads of a local (or module-level) name that holds ``wrap`` all
    there is: every load of the name elsewhere in the file is in a function that binds a name of its
    own so spelled? Then a wrapper none of them calls (`model2 = DataParallel(GPT(...)).cuda()`,
    then only `model2.eval()`) is called by nothing here, not by callers unknown. (A wrapper kept in
    `self.<attr>` may be called by a subclass of another file.)"""
    if wrap.name.startswith("self."):
        return False
    for node in ctx.nodes(ast.Name):
        if node.id != wrap.name or not isinstance(node.ctx, ast.Load):
            continue
        scope = facts.scope_of(node)
        if scope is not wrap.scope and not _binds_own(scope, wrap.name):
            return False
    return True


def _binds_own(scope: ast.AST, name: str) -> bool:
    """Does a function bind ``name`` as a parameter or by an assignment in its own body?"""
    if not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        return False
    args = scope.args
    return any(a is not None and a.arg == name for a in (*args.posonlyargs, *args.args, *args.kwonlyargs,
                                                         args.vararg, args.kwarg)) \
        or any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store) for n in ast.walk(scope))


def _handed_to(call: ast.Call, node: ast.AST, facts, trail: frozenset):
    """The parameter wrap (a parameter of a function of this file that a call site hands a wrapper,
    scripts) that ``call`` binds ``node`` to; None where it hands it to anything else, or to a
    function in ``trail``."""
    for wrap in facts.wraps:
        if wrap.parameter and wrap.scope not in trail and any(
                site is call and any(arg is node for arg in _handed_arguments(wrap, site, skip))
                for site, skip in wrap.sites):
            return wrap
    return None


def _handed_arguments(wrap, call: ast.Call, skip: int) -> list[ast.AST]:
    """What ``call`` (a site of the parameter wrap ``wrap``) passes for that parameter."""
    params = [a.arg for a in wrap.scope.args.posonlyargs + wrap.scope.args.args][skip:]
    return [arg for i, arg in enumerate(call.args) if i < len(params) and params[i] == wrap.name] + [
        k.value for k in call.keywords if k.arg == wrap.name]


def _handed_traced(wrap, ctx: FileContext, facts, trail: frozenset) -> bool:
    """Does every call site of this file hand the parameter ``wrap`` a wrapper that this file traces
    to its class, through a use ``_wrapper_call_markers`` follows (then the function's calls of the
    parameter are read as that wrapper's)?"""
    for site, skip in wrap.sites:
        for arg in _handed_arguments(wrap, site, skip):
            source = facts.wrap_for(arg)
            if source is None or not any(use is arg for use in _wrapper_uses(source, ctx, facts)):
                return False
            if not (source.scope not in trail | {wrap.scope} and _handed_traced(source, ctx, facts, trail | {wrap.scope})
                    if source.parameter else set(classes_of(source.inner, source.call, ctx)) - {""}):
                return False
    return True


def _is_none(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _is_false(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and node.value is False


def _wrapper_uses(wrap, ctx: FileContext, facts) -> list[ast.AST]:
    """The loads of the name that holds ``wrap``: where ``facts.wrap_for`` says they are the wrapper,
    and, for a local name, on until it is rebound to something other than itself wrapped or moved
    again (`model = DistributedDataParallel(model)` on another launch path calls the same forward)."""
    if wrap.name.startswith("self."):
        return [n for n in ctx.tree_index.nodes_within(wrap.scope, ast.Attribute)
                if target_text(n) == wrap.name and isinstance(n.ctx, ast.Load) and facts.wrap_for(n) is wrap]
    names = [n for n in ctx.tree_index.nodes_within(wrap.scope, ast.Name) if n.id == wrap.name]
    # (A rebinding or a use on the other arm of the `if` that wrapped, `else: model = GPT(...)`, is
    # not this wrapper's: scripts.exclusive.)
    other_arm = (lambda node: facts.exclusive(wrap.origin, node)) if wrap.origin is not None else (lambda node: False)
    end = float("inf")
    for node in names:
        parent = ctx.parent(node)
        if isinstance(node.ctx, ast.Store) and node.lineno > wrap.start and isinstance(parent, ast.Assign) \
                and not any(isinstance(n, ast.Name) and n.id == wrap.name for n in ast.walk(parent.value)) \
                and not other_arm(node):
            end = min(end, node.lineno)
    return [n for n in names if isinstance(n.ctx, ast.Load) and wrap.start < n.lineno < end
            and facts.scope_of(n) is wrap.scope and not other_arm(n)]


# Methods of a logger (`logger.info(model)` prints the module; it never calls it).
_LOGGING = frozenset({"debug", "info", "warning", "warn", "error", "critical", "exception", "log"})


def _inspects(call: ast.Call, ctx: FileContext) -> bool:
    """A call a wrapper may be handed to without being called through it: `hasattr(model, "module")`,
    a logger's `logger.info(model)`, torch's own functions (`DistributedDataParallel(model)` on
    another launch path, `torch.save`)."""
    if _never_calls(call, ctx):
        return True
    return (ctx.resolve(call.func) or "").startswith("torch.")


def summarize_calls(ctx: FileContext, result) -> None:
    """Fill ``result.module_calls`` and ``result.wrapper_calls`` for the project index."""
    result.module_calls = ctx.fact(module_calls)
    result.wrapper_calls = ctx.fact(wrapper_calls)
