"""
## What it does
Flags forward and backward hooks that write shared state: a hook the module registers
on itself or its children (`self.layer.register_forward_hook(self._save)`), or one
registered anywhere in the file, whose body assigns to `self.x`, writes into a
container on `self`, or writes into a container from an enclosing scope
(`features[name] = output`, `activations.append(output)`).

A hook that only resets state to a constant (`self._linearized_weight = None`, clearing an inference
cache in a backward hook: nnsvs's wavenet convolution) is not reported: every replica writes the same
value, so no chunk of the batch is kept.

A hook that a method registers and removes again before returning (its handle's `.remove()`
called there, or the handle used as a `with` context), in a method forward does not reach, is
not reported: an attention or Grad-CAM probe that runs the module itself in between fires only
inside that method, on the module it is called on (a DataParallel wrapper has no such method).
A module-level function that registers hooks on a model it is handed and removes them before
returning (a `torchsummary`-style `summary(model, *inputs)`) is a warning: its hooks fire under
DataParallel only if a caller hands it a wrapper, which its own file does not show.

## Why is this bad?
Hooks are shared by reference with every DataParallel replica, so they run once per
GPU, in threads, each with that replica's chunk of the batch. The last writer wins:
a feature dict ends up holding B/N rows from an arbitrary GPU, and a list gets N
entries per call in any order. Grad-CAM, feature extraction and distillation code
silently use a fraction of the batch.

## How to fix
Return the features from forward, or key the store by `output.device` and concatenate
the pieces in device order after the call.
"""

from __future__ import annotations

import ast
import re

from dpcheck.analysis.torch_api import FUNCTION_DEFS
from dpcheck.findings import ObservationKind as K
from dpcheck.findings import Severity, Subject
from dpcheck.rule import Rule

_MUTATORS = frozenset({"append", "extend", "insert", "update", "add", "setdefault", "__setitem__"})


class HookWritesSharedState(Rule):
    code = "DP104"
    name = "hook-writes-shared-state"
    severity = Severity.ERROR
    forward_code_only = True
    confirms = frozenset({K.STATE_LOST_ON_REPLICA, K.STATE_MUTATED_PER_REPLICA, K.STATE_DIFFERS})
    summary = "A hook that writes shared state runs once per replica: the last replica's chunk wins"
    fix_hint = "Return the features from forward, or key the store by output.device and concatenate"
    bad_example = """
        class Extractor(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Linear(4, 4)
                self.features = {}
                self.body.register_forward_hook(self._save)

            def _save(self, module, inputs, output):
                self.features["body"] = output

            def forward(self, x):
                return self.body(x)
    """
    good_example = """
        class Extractor(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Linear(4, 4)

            def forward(self, x):
                feats = self.body(x)
                return feats, {"body": feats}
    """

    def check_class(self, model):
        for hook in model.hooks:
            # Lambdas and nested hooks see the enclosing method's `self`.
            yield from self._writes(hook, "self")

    def check_file(self, ctx):
        """Hooks registered outside nn.Module classes (feature extraction in scripts and helpers)."""
        from dpcheck.analysis.tree import FunctionInfo

        if "hook" not in ctx.source.text:
            return
        registrations = [c for c in ctx.nodes(ast.Call) if self._is_registration(c)]
        if not registrations:
            return
        in_modules: set[int] = set()
        owner_of: dict[int, ast.ClassDef] = {}
        for name, info in ctx.classes.items():
            sure, needs = ctx.class_is_module(name)
            for method in info.methods.values():
                for n in ast.walk(method):
                    if sure or needs:
                        in_modules.add(id(n))
                    owner_of.setdefault(id(n), info)
        defs: dict[str, list] = {}
        for n in ctx.nodes(*FUNCTION_DEFS):
            defs.setdefault(n.name, []).append(n)
        for call in registrations:
            if id(call) in in_modules:
                continue
            probe = _probe_function(call, ctx)
            target = call.args[0]
            hooks, self_name = [], None
            if isinstance(target, ast.Lambda):
                hooks = [target]
            elif isinstance(target, ast.Name):
                hooks = defs.get(target.id, [])[:1]
            elif isinstance(target, ast.Call) and isinstance(target.func, ast.Name):
                hooks = [n for f in defs.get(target.func.id, [])[:1] for n in ast.walk(f)
                         if isinstance(n, (ast.FunctionDef, ast.Lambda)) and n is not f]
            elif isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) \
                    and id(call) in owner_of and target.attr in owner_of[id(call)].methods:
                hooks = [owner_of[id(call)].methods[target.attr]]
                self_name = target.value.id
            for hook in hooks:
                for found in self._writes(FunctionInfo(hook, None, ctx.tree_index), self_name):
                    if probe is not None:
                        found.severity = Severity.WARNING
                        found.message += (f"; latent: `{probe.name}()` registers these hooks on the model it is "
                                          "handed and removes them before it returns, so they run on replicas "
                                          "only if a caller hands it a DataParallel wrapper")
                    yield found

    @staticmethod
    def _is_registration(call) -> bool:
        func = call.func
        return isinstance(func, ast.Attribute) and func.attr.startswith("register_") \
            and func.attr.endswith("hook") and bool(call.args)

    def _writes(self, hook, self_name):
        local = _locals(hook) - ({self_name} if self_name else set())
        for sub in hook.nodes(ast.Assign, ast.AugAssign, ast.Call):
            if isinstance(sub, ast.Call):
                func = sub.func
                if isinstance(func, ast.Attribute) and func.attr in _MUTATORS:
                    root = _root_name(func.value)
                    if root is not None and (root == self_name or root not in local):
                        if func.attr == "append" and len(sub.args) == 1 and _shape_count(sub.args[0], hook):
                            continue  # one count per replica's chunk: together, the batch's (FLOP counters)
                        yield self._finding(sub, ast.unparse(func.value))
                elif isinstance(func, ast.Name) and func.id == "setattr" and sub.args \
                        and isinstance(sub.args[0], ast.Name) and sub.args[0].id == self_name:
                    yield self._finding(sub, self_name)
                continue
            if isinstance(sub, ast.Assign) and isinstance(sub.value, ast.Constant):
                continue  # a reset to a constant (`self._cache = None`): every replica writes the same value
            targets = sub.targets if isinstance(sub, ast.Assign) else [sub.target]
            for target in targets:
                if isinstance(target, (ast.Attribute, ast.Subscript)):
                    root = _root_name(target)
                    if root is not None and (root == self_name or (root not in local and isinstance(target, ast.Subscript))):
                        yield self._finding(target, ast.unparse(target), counter=isinstance(sub, ast.AugAssign))

    def _finding(self, node, what, counter=False):
        if counter:
            # `n += 1` is not a last-writer-wins store: every replica adds, or adds to a copy.
            return self.violation(node, f"Hook increments `{what}`: under DataParallel it runs once per replica, in "
                                  "parallel threads, so each call is counted once per GPU (or on a replica's copy, "
                                  "which is discarded), and unsynchronised increments from the threads can be lost",
                                  subject=Subject(attr=_self_attr(what)))
        return self.violation(node, f"Hook writes `{what}`: under DataParallel it runs once per replica "
                              "thread and the last writer wins, keeping one replica's chunk of the batch",
                              subject=Subject(attr=_self_attr(what)))


def _probe_function(call: ast.Call, ctx) -> ast.FunctionDef | None:
    """The module-level function a registration runs in (through functions nested in it: the
    `register_hook` that `model.apply` runs), where that function removes hooks before it returns
    (a `.remove()` call in it) and takes the model as a parameter; None otherwise (a script's
    top level, a function that leaves its hooks in place)."""
    outer = None
    node = ctx.enclosing(call, FUNCTION_DEFS)
    while node is not None:
        outer = node
        node = ctx.enclosing(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        if isinstance(node, ast.ClassDef):
            return None
    if outer is None or not (outer.args.args or outer.args.posonlyargs):
        return None
    removes = any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "remove"
                  and not n.args for n in ast.walk(outer))
    return outer if removes else None


def _self_attr(written: str) -> str | None:
    """`self.counts[...]` -> `counts`: the module attribute a hook writes, when it writes one."""
    match = re.match(r"self\.(\w+)", written)
    return match.group(1) if match else None


_SIZE_METHODS = frozenset({"size", "numel", "nelement", "dim"})


def _shape_count(node, hook, depth=0) -> bool:
    """Is ``node`` a Python number counted from the sizes of the hook's tensors (`batch * params *
    h * w` with `batch, c, h, w = input[0].size()`, `input[0].nelement() * 2`), with configuration of
    the hooked module (`module.kernel_size[0]`) and constants? Each replica then appends the count
    of its own chunk, and the entries sum to the whole batch's, as on one device."""
    return _number(node, hook, depth) and any(_size_call(n) for n in _expanded(node, hook, depth))


def _number(node, hook, depth) -> bool:
    if depth > 4:
        return False
    if isinstance(node, ast.Constant):
        return isinstance(node.value, (int, float))
    if _size_call(node):
        return True
    if isinstance(node, ast.Subscript):
        inner = node.value
        return _size_call(inner) or (isinstance(inner, ast.Attribute) and _module_config(inner, hook))
    if isinstance(node, ast.Attribute):
        return _module_config(node, hook)
    if isinstance(node, ast.Name):
        values = hook.local_values.get(node.id)
        return bool(values) and all(_number(v, hook, depth + 1) for v in values)
    if isinstance(node, ast.BinOp):
        return _number(node.left, hook, depth) and _number(node.right, hook, depth)
    if isinstance(node, ast.UnaryOp):
        return _number(node.operand, hook, depth)
    if isinstance(node, ast.IfExp):
        return _number(node.body, hook, depth) and _number(node.orelse, hook, depth)
    return False


def _size_call(node) -> bool:
    """`x.size()`, `x.size(0)`, `x.numel()`, `x.nelement()`, `x.dim()` (a Python int)."""
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _SIZE_METHODS


def _module_config(node, hook) -> bool:
    """`module.kernel_size`, `module.in_channels` on the hooked module: its configuration, not a tensor."""
    return isinstance(node.value, ast.Name) and node.value.id == _hooked_module(hook) \
        and node.attr not in ("weight", "bias")


def _hooked_module(hook) -> str | None:
    """The parameter the hooked module comes in: the hook's first, or for a method of a class (a bound
    hook, `layer.register_forward_hook(self.count)`) the first after the instance's own."""
    params = [*hook.node.args.posonlyargs, *hook.node.args.args]
    if isinstance(hook.parent(hook.node), ast.ClassDef) and not any(
            isinstance(d, ast.Name) and d.id == "staticmethod" for d in hook.node.decorator_list):
        params = params[1:]
    return params[0].arg if params else None


def _expanded(node, hook, depth):
    """``node``'s subtree with the values of the locals it reads, recursively."""
    if depth > 4:
        return
    for sub in ast.walk(node):
        yield sub
        if isinstance(sub, ast.Name):
            for value in hook.local_values.get(sub.id, ()):
                yield from _expanded(value, hook, depth + 1)


def _root_name(node):
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _locals(hook) -> set[str]:
    names = set()
    args = hook.node.args
    for a in args.posonlyargs + args.args + args.kwonlyargs:
        names.add(a.arg)
    names |= set(hook.local_values)
    return names
