"""
## What it does
Flags bound methods and compiled callables kept on the module and called in forward:
`self.f = self.layer.forward`, `self.op = self._helper`,
`self.act = functools.partial(self._gelu, approximate=True)`, `self.fn = torch.compile(self.block)`,
a `forward` replaced on an instance, and `module.compile()` / `self.compile()` inside
the model.

## Why is this bad?
A bound method carries the object it was bound to. Replicas share the attribute by
reference, so every replica calls the *original* module's method, with the original's
parameters on `cuda:0`: replica 1 fails with a device mismatch, or silently computes
with the wrong weights. `Module.compile()` stores a compiled wrapper of the original's
`_call_impl` that replicas copy the same way.

A bound method whose body reads nothing of the module (an activation, a pure function) is
harmless today, whichever module it is bound to: info (advice), in case it later reads the
module. So is one that reads of the module only plain attributes, as values (`self.kernel_size == 1`
in nnsvs's `_same_padding`), none of them a layer, parameter, buffer or tensor and none stored by
forward's code: `replicate` copies those by reference, so the method computes the same on either. An opt-in path is lighter too: a constructor option away from its default (also when the layer's
builder in the same file passes its own default down) is a warning; compiling inside a method
the user must call (`task.compile()`) is info, since it matters only where torch.compile and
DataParallel are combined (see DP706).

## How to fix
Store the name and dispatch at call time (`getattr(self, self.op_name)(x)`), or call
the submodule directly (`self.layer(x)`); compile the whole model after wrapping, or
use DistributedDataParallel.
"""

from __future__ import annotations

import ast

from dpcheck.analysis.context import code_names
from dpcheck.analysis.dataflow import option_constructions
from dpcheck.analysis.torch_api import parameter_free
from dpcheck.findings import ObservationKind as K
from dpcheck.findings import Severity
from dpcheck.rule import Rule


class BoundMethodStored(Rule):
    code = "DP106"
    name = "bound-method-stored"
    severity = Severity.ERROR
    confirms = frozenset({K.DEVICE_MISMATCH})
    summary = "A bound method or compiled callable stored on self makes every replica call the original"
    fix_hint = "Store a name and dispatch with getattr(self, name), or call the submodule directly"
    bad_example = """
        class Gated(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
                self.f = self.fc.forward

            def forward(self, x):
                return self.f(x)
    """
    good_example = """
        class Gated(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
                self.f_name = "fc"

            def forward(self, x):
                return getattr(self, self.f_name)(x)
    """

    def check_class(self, model):
        called = set()
        for fn in model.reachable:
            for call in fn.nodes(ast.Call):
                attr = fn.self_attr(call.func)
                if attr is not None:
                    called.add(attr)
        for name, facts in model.attrs.items():
            if facts.registered:
                continue
            if name not in called and name != "forward":
                continue  # a stored callable forward never calls through `self.<name>` is harmless
            for target, value, fn in facts.assignments:
                why = _bound(value, fn, model)
                if why:
                    if why.startswith(_SHARED_READS):
                        yield self.violation(target, f"`self.{name}` stores {why[len(_SHARED_READS):]}, bound to "
                                             "the original module: harmless while that method reads only plain "
                                             "attributes of the module, which DataParallel replicas share with the "
                                             "original, but once it reads a layer, parameter or buffer they use the "
                                             "original's", severity=Severity.INFO)
                        continue
                    if why.startswith(_STATELESS):
                        yield self.violation(target, f"`self.{name}` stores {why[len(_STATELESS):]}, bound to the "
                                             "original module: harmless while that method reads nothing of the "
                                             "module, but DataParallel replicas share it, so once it does they "
                                             "use the original's state", severity=Severity.INFO)
                        continue
                    message = f"`self.{name}` stores {why}: DataParallel replicas share it, so each " \
                              "replica calls the original module on its original device"
                    yield self._report(model, fn, target, message, compiled=why.startswith("a compiled"))
        if not model.ctx.fact(_may_compile):
            return
        for fn in model.all_methods:
            for call in fn.nodes(ast.Call):
                func = call.func
                if isinstance(func, ast.Attribute) and func.attr == "compile" and (
                        fn.is_self(func.value) or fn.self_attr(func.value) is not None):
                    message = f"`{ast.unparse(func)}()` inside the model stores a compiled wrapper of the " \
                              "original module that DataParallel replicas copy: replicas run the original's weights"
                    yield self._report(model, fn, call, message, compiled=True)

    def _report(self, model, fn, node, message, compiled=False):
        """An error where it happens when the model is built; a warning where it needs an opt-in:
        a method the user must call or a non-default constructor option. Compiling through an
        opt-in method matters only where torch.compile and DataParallel are combined, which
        fails on its own (DP706): info."""
        if fn.name != "__init__" and not model.is_reachable(fn):
            return self.violation(node, f"{message} (only once `{fn.name}()` has been called on the model "
                                  "before it is wrapped)", severity=Severity.INFO if compiled else Severity.WARNING)
        if (settled := option_constructions(model, fn, node)) is not None:
            return self.violation(node, f"{message} (on a path behind a non-default option)",
                                  severity=Severity.WARNING, **settled)
        return self.violation(node, message)


# Marks a bound method whose body never reads the module: latent, not broken.
_STATELESS = "stateless:"
# A method that reads of the module only plain attributes (not layers, parameters or buffers) that
# forward's code never stores: see _reads_shared_attributes_only.
_SHARED_READS = "shared-reads:"


def _bound(value, fn, model) -> str | None:
    ctx = model.ctx
    if isinstance(value, ast.IfExp):
        # `self.f = self.fast if fused else self.slow`: either branch may be the one stored
        branches = [why for why in (_bound(value.body, fn, model), _bound(value.orelse, fn, model)) if why]
        return min(branches, key=lambda why: why.startswith(_STATELESS), default=None)
    if isinstance(value, ast.Attribute):
        attr = fn.self_attr(value)
        method = model.find_method(attr) if attr is not None else None
        if method is not None and not model.has_property(attr) and not any(
                ast.unparse(d) in ("staticmethod", "classmethod") for d in method.node.decorator_list):
            if _uses_self(method) and _reads_shared_attributes_only(method, model):
                return f"{_SHARED_READS}the bound method `self.{attr}`"
            return f"{'' if _uses_self(method) else _STATELESS}the bound method `self.{attr}`"
        owner = fn.self_attr(value.value)
        if value.attr in ("forward", "__call__") and owner is not None and not _weightless(model, owner):
            return f"the bound method `{ast.unparse(value)}`"
    if isinstance(value, ast.Call):
        name = ctx.resolve(value.func) or ""
        if name in ("functools.partial", "torch.compile") and value.args:
            inner = value.args[0]
            method = model.find_method(fn.self_attr(inner)) if fn.self_attr(inner) is not None else None
            what = "a partial of" if name == "functools.partial" else "a compiled"
            if method is not None and not _uses_self(method):
                static = any(ast.unparse(d) == "staticmethod" for d in method.node.decorator_list)
                return None if static else f"{_STATELESS}{what} `{ast.unparse(inner)}`"
            if fn.self_attr(inner) is not None or (isinstance(inner, ast.Attribute) and fn.self_attr(inner.value)):
                return f"{what} `{ast.unparse(inner)}`"
    return None


def _may_compile(ctx) -> bool:
    """Can any call of the file be a `.compile()`?"""
    return "compile" in ctx.fact(code_names)


def _uses_self(method) -> bool:
    """Does the method read anything of the module? One that does not (an activation, a pure
    function) behaves the same whichever module it is bound to."""
    if any(ast.unparse(d) in ("staticmethod", "classmethod") for d in method.node.decorator_list):
        return False
    return any(method.is_self(n) for n in method.nodes(ast.Name))


def _reads_shared_attributes_only(method, model) -> bool:
    """Does the method use the module only to read plain attributes (`self.kernel_size == 1`,
    `(self.kernel_size - 1) // 2`: nnsvs's `_same_padding`) as values, none of them a parameter,
    buffer or layer, none stored by forward's code, none called or read into? `replicate` copies a
    module's plain attributes by reference, so such a method computes the same bound to the original
    as bound to a replica."""
    reachable = {id(fn.node) for fn in model.reachable}
    for node in method.nodes(ast.Name):
        if not method.is_self(node):
            continue
        read = method.parent(node)
        if not (isinstance(read, ast.Attribute) and isinstance(read.ctx, ast.Load)) \
                or isinstance(method.parent(read), (ast.Attribute, ast.Call, ast.Subscript)):
            return False  # `self` handed on, `self.fc(x)`, `self.fc.weight`, `self.table[i]`
        facts = model.attrs.get(read.attr)
        if facts is None or not facts.assignments or facts.kinds & _HELD_PER_REPLICA:
            return False
        stores = model.self_stores.get(read.attr)
        if stores is None or any(id(store.fn.node) in reachable for store in stores):
            return False
    return True


# What `replicate` gives each replica its own copy of (or may: a class not known to be no module).
_HELD_PER_REPLICA = frozenset({"parameter", "buffer", "module", "maybe_module", "tensor", "scalar_tensor",
                               "container"})


def _weightless(model, attr: str) -> bool:
    """Is ``self.<attr>`` only ever a torch.nn layer without weights (ReLU, Dropout, pooling)?"""
    facts = model.attrs.get(attr)
    if facts is None or not facts.assignments:
        return False
    for _, value, _ in facts.assignments:
        name = model.ctx.resolve(value.func) if isinstance(value, ast.Call) else None
        if not (name and name.startswith("torch.nn.") and parameter_free(name)):
            return False
    return True
