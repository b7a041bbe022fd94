"""
## What it does
Flags a BatchNorm layer that normalises a globally pooled map:
- in one `nn.Sequential` (built with `nn.Sequential(...)`, or by `super().__init__(...)` in a
  subclass of it), an adaptive pool to size 1 (`nn.AdaptiveAvgPool2d(1)`,
  `nn.AdaptiveMaxPool2d((1, 1))`...) followed by `nn.BatchNorm1d/2d/3d`, with only layers between
  them that keep one value per channel (convolutions, `nn.Linear`, activations, dropout,
  `nn.Flatten`): the image-pooling branch of ASPP (DeepLabV3), the bin-1 stage of PSP pooling;
- the same where a layer is built from a parameter of the method that makes the Sequential (PSP's
  `_make_stages(in_channels, out_channels, bin_sz, norm_layer)`), read from what the parameter can
  hold: the arguments of each call of the method in the class, comprehension variables over a list
  (`for b_s in bin_sizes`), the arguments of each construction of the class in the file for a
  constructor parameter (`bin_sizes=[1, 2, 3, 6]`, `norm_layer=nn.BatchNorm2d`) and defaults. A pool
  size is 1 when one of its values is (that stage is built); the norm must be the same BatchNorm in
  every value;
- in forward's code, a BatchNorm attribute of the class called on a pool's output (a pool attribute
  to size 1, `F.adaptive_avg_pool2d(x, 1)`, or `F.avg_pool2d(x, x.size()[2:])`, a window as large as
  the map), followed through the assignments that reach the call, reshapes (`view(b, -1)`, `flatten(1)`,
  `torch.flatten(x, 1)`) and layer attributes of the kinds above: the BNNeck of re-ID heads
  (`feat = self.bottleneck(self.gap(x).view(b, -1))`), also one pooled stripe per iteration of a
  loop. A name that may hold other values at the call (bound in a branch the call is not in, or
  later in its loop) is not followed.

## Why is this bad?
The pooled map holds one value per channel per sample, so BatchNorm in training normalises over
the batch alone, and with one sample it raises `Expected more than 1 value per channel when
training`. Unwrapped, that needs a batch of one. Under DataParallel each replica gets a chunk of
`ceil(B/N)` samples and the last replica what is left, so an ordinary batch whose size leaves a
remainder of one (the last batch of an epoch: 9 samples on 8 GPUs, 7 split 2, 2, 2, 1 on 4) hands
a replica one sample and training stops there. Latent: it needs such a batch, so a warning; not
reported when every scanned script that wraps a model builds a DataLoader with `drop_last=True`
(the last, partial batch is then never run; evaluation runs BatchNorm on its running statistics)
or only evaluates it (a test script: it calls `.eval()`, holds no backward pass, optimizer step or
`.train(` call, and hands the wrapper to no function outside the file; its loaders feed BatchNorm
in eval mode). `torch.no_grad()` alone does not count: BatchNorm in training mode still raises.

## How to fix
Pass `drop_last=True` to the training DataLoader and use batches of at least twice the GPU count,
or normalise the pooled branch with something that does not need a batch (`nn.GroupNorm`, no norm).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import NamedTuple

from dpcheck.analysis.bindings import reaching_assignment
from dpcheck.analysis.context import code_names
from dpcheck.analysis.dataflow import parameter_defaults
from dpcheck.analysis.scripts import PARTIAL_BATCHES_CONDITION
from dpcheck.analysis.torch_api import BATCHNORM_LAYERS, FUNCTION_DEFS
from dpcheck.findings import Severity
from dpcheck.rule import Rule

_GLOBAL_POOLS = frozenset({"AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveAvgPool3d",
                           "AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "AdaptiveMaxPool3d"})
# Layers that map a (B, C, 1, ...) map to one of the same kind: one value per channel per sample.
_KEEPS_ONE_VALUE = frozenset({"Conv1d", "Conv2d", "Conv3d", "Linear", "Flatten", "Identity", "Dropout",
                              "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "ReLU", "ReLU6",
                              "LeakyReLU", "PReLU", "GELU", "SiLU", "Sigmoid", "Tanh", "ELU", "Mish",
                              "Hardswish", "Hardsigmoid", "Softplus"})


class BatchNormOnPooledMap(Rule):
    code = "DP604"
    name = "batchnorm-on-pooled-map"
    severity = Severity.WARNING
    summary = "BatchNorm after a pool to 1x1 raises in training on a replica given one sample"
    fix_hint = "Use drop_last=True with batches of at least twice the GPU count, or GroupNorm on the pooled branch"
    # BatchNorm's own error, raised by the DataParallel run at a batch other than the first (which ran).
    _RAISED = "more than 1 value per channel"
    bad_example = """
        class ImagePooling(nn.Module):
            def __init__(self, channels):
                super().__init__()
                self.branch = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(channels, 256, 1),
                                            nn.BatchNorm2d(256), nn.ReLU())

            def forward(self, x):
                return self.branch(x)
    """
    good_example = """
        class ImagePooling(nn.Module):
            def __init__(self, channels):
                super().__init__()
                self.branch = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(channels, 256, 1),
                                            nn.GroupNorm(32, 256), nn.ReLU())

            def forward(self, x):
                return self.branch(x)
    """

    def check_class(self, model):
        if not model.ctx.fact(_may_pool_into_batchnorm):
            return
        resolve = model.ctx.resolve
        sequential = any(base.rsplit(".", 1)[-1] == "Sequential" and base.startswith("torch.nn.")
                         for base in model.info.bases)
        for fn in model.all_methods:
            for call in fn.nodes(ast.Call):
                if resolve(call.func) == "torch.nn.Sequential" or (sequential and _super_init(call)):
                    found = _pooled_batchnorm(_layers(call, fn), fn, model)
                    if found is not None:
                        pool, norm = found
                        yield self._finding(norm, _as_built(norm, fn, model), _as_built(pool, fn, model), model)
        for norm, pool in forward_pooled_batchnorms(model):
            yield self._finding(norm, f"`{ast.unparse(norm.func)}` (BatchNorm)", f"`{pool}`", model)

    def _finding(self, norm: ast.Call, norm_text: str, pool_text: str, model):
        return self.violation(
            norm, f"{norm_text} normalises the output of {pool_text}, one value per channel per sample: in "
            "training, a DataParallel replica given one sample (a batch that leaves a remainder of one over the "
            "GPUs) raises 'Expected more than 1 value per channel when training'",
            requires=(frozenset({f"{PARTIAL_BATCHES_CONDITION}{model.info.qualname}"}),))

    def matches(self, finding, observation, ran):
        # The harness's uneven batches hand a replica one sample: BatchNorm raises in the class's forward.
        return super().matches(finding, observation, ran) or (
            ran and observation.raised and "first_batch_ran" in observation.details
            and self._RAISED in observation.evidence and self.matches_subject(finding, observation))


def _may_pool_into_batchnorm(ctx) -> bool:
    """Does the file name both a pool (an adaptive one, or a functional `*_pool*d`) and a BatchNorm? Most
    name neither, and then no method's calls need resolving."""
    names = ctx.fact(code_names)
    return "BatchNorm" in names and ("Adaptive" in names or "adaptive_" in names or "_pool" in names)


def _super_init(call: ast.Call) -> bool:
    """`super().__init__(...)` or `super(Cls, self).__init__(...)`."""
    func = call.func
    return isinstance(func, ast.Attribute) and func.attr == "__init__" and isinstance(func.value, ast.Call) \
        and isinstance(func.value.func, ast.Name) and func.value.func.id == "super"


def _layers(call: ast.Call, fn) -> list[ast.AST]:
    """The layers a Sequential call is given, in order: its arguments, a single `*name` read as the
    list literal `name` is bound to (when nothing else binds or mutates it), and each argument that
    is a name bound once in the function read as that value (`prior = nn.AdaptiveAvgPool2d(1)`)."""
    args = call.args
    if len(args) == 1 and isinstance(args[0], ast.Starred) and isinstance(args[0].value, ast.Name):
        value = _only_binding(args[0].value.id, fn)
        if not isinstance(value, ast.List) or _mutated(args[0].value.id, fn):
            return []
        args = value.elts
    layers = []
    for arg in args:
        if isinstance(arg, ast.Name):
            arg = _only_binding(arg.id, fn) or arg
        layers.append(arg)
    return layers


def _only_binding(name: str, fn):
    """The value of the one `name = value` in the function, else None (a parameter, a loop
    variable, or bound more than once)."""
    values = [node.value for node in fn.nodes(ast.Assign)
              if len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) and node.targets[0].id == name]
    if len(values) != 1:
        return None
    stores = [n for n in fn.nodes(ast.Name) if n.id == name and isinstance(n.ctx, ast.Store)]
    return values[0] if len(stores) == 1 else None


def _mutated(name: str, fn) -> bool:
    """Does the function change the list `name` after binding it (`name.append(...)`, `name += ...`)?"""
    for node in fn.nodes(ast.Attribute):
        if isinstance(node.value, ast.Name) and node.value.id == name \
                and node.attr in ("append", "extend", "insert", "pop", "remove", "reverse", "sort", "clear"):
            return True
    return any(isinstance(node.target, ast.Name) and node.target.id == name for node in fn.nodes(ast.AugAssign))


def _pooled_batchnorm(layers: list[ast.AST], fn, model) -> tuple[ast.AST, ast.Call] | None:
    """(the pool, the BatchNorm call) of the first BatchNorm that sees a pool's one value per channel."""
    pool = None
    for layer in layers:
        if not isinstance(layer, ast.Call):
            pool = None  # a layer not known here may reshape the map
            continue
        last = _layer_class(layer, fn, model)
        if last in _GLOBAL_POOLS:
            pool = layer if _size_one(layer, fn, model) else None
        elif pool is not None and last in BATCHNORM_LAYERS:
            return pool, layer
        elif last not in _KEEPS_ONE_VALUE:
            pool = None
    return None


def _as_built(layer: ast.Call, fn, model) -> str:
    """How a finding names a layer: as written, and what a builder's parameter stands for (`norm_layer`
    (nn.BatchNorm2d as passed), `nn.AdaptiveAvgPool2d(output_size=bin_sz)` (1 in one of its builds))."""
    kind = _layer_class(layer, fn, model)
    text = ast.unparse(layer) if kind in _GLOBAL_POOLS else ast.unparse(layer.func)
    if isinstance(layer.func, ast.Name) and not (model.ctx.resolve(layer.func) or "").startswith("torch.nn."):
        return f"`{text}` (`nn.{kind}` as its callers pass it)"
    size = layer.args[0] if layer.args else next((k.value for k in layer.keywords if k.arg == "output_size"), None)
    if kind in _GLOBAL_POOLS and isinstance(size, ast.Name):
        return f"`{text}` (`{size.id}` = 1 in one of its builds)"
    return f"`{text}`"


def _layer_class(layer: ast.Call, fn, model) -> str:
    """The torch.nn class a layer construction builds (its last name), also through a parameter of
    the builder every caller fills with the same class (`norm_layer(out_channels)`); "" otherwise."""
    resolve = model.ctx.resolve
    resolved = resolve(layer.func) or ""
    if not resolved.startswith("torch.nn.") and isinstance(layer.func, ast.Name):
        values = _possible_values(layer.func, fn, model)
        classes = {resolve(v) or "" for v in values or ()}
        resolved = classes.pop() if len(classes) == 1 else ""
    return resolved.rsplit(".", 1)[-1] if resolved.startswith("torch.nn.") else ""


def _size_one(pool: ast.Call, fn=None, model=None) -> bool:
    """`AdaptiveAvgPool2d(1)`, `(1, 1)` or `output_size=1`: every pooled dim of size 1; or a parameter
    of the builder one of whose passed values is (PSP's `output_size=bin_sz` over `bin_sizes=[1, 2, 3, 6]`:
    the bin-1 stage)."""
    size = pool.args[0] if pool.args else next((k.value for k in pool.keywords if k.arg == "output_size"), None)
    if isinstance(size, ast.Name) and fn is not None:
        return any(_size_one_value(value) for value in _possible_values(size, fn, model) or ())
    return size is not None and _size_one_value(size)


# --- in forward: a module's pooled output reaching a BatchNorm of the class ------------------------

# Functional pools to size 1 (`F.adaptive_avg_pool2d(x, 1)`), and pools whose kernel is the map's
# own size (`F.avg_pool2d(x, x.size()[2:])`, the older re-ID heads' global pool).
_FUNCTIONAL_GLOBAL_POOLS = frozenset({"adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d",
                                      "adaptive_max_pool1d", "adaptive_max_pool2d", "adaptive_max_pool3d"})
_FUNCTIONAL_WINDOW_POOLS = frozenset({"avg_pool1d", "avg_pool2d", "avg_pool3d", "max_pool1d", "max_pool2d",
                                      "max_pool3d"})
# Tensor methods and torch functions that only reshape a (B, C, 1, 1) map: (B, C) or (B, C, 1, 1) again.
_RESHAPES = frozenset({"view", "reshape", "flatten", "squeeze", "contiguous"})
# How many names and calls to follow back from the BatchNorm's argument to the pool.
_MAX_STEPS = 8


def forward_pooled_batchnorms(model) -> Iterator[tuple[ast.Call, str]]:
    """(the call of a BatchNorm of the class in forward's code, the pool it normalises) where the
    call's input is the output of a pool to size 1, through names, reshapes (`view(b, -1)`,
    `flatten(1)`, `torch.flatten(x, 1)`) and layers that keep one value per channel: the BNNeck of
    re-ID heads (`feat = self.bottleneck(self.gap(x).view(b, -1))`)."""
    norms = _attrs_built_as(model, BATCHNORM_LAYERS)
    if not norms:
        return
    pools = {name for name in _attrs_built_as(model, _GLOBAL_POOLS)
             if all(_size_one(value) for _, value, _ in model.attrs[name].assignments)}
    layers = _Layers(pools, _attrs_built_as(model, _KEEPS_ONE_VALUE))
    for fn in model.reachable:
        for call in fn.nodes(ast.Call):
            attr = fn.self_attr(call.func)
            if attr in norms and len(call.args) == 1 and not call.keywords:
                pool = _pooled(call.args[0], fn, model, layers, _MAX_STEPS, fn.enclosing(call, ast.stmt))
                if pool is not None:
                    yield call, pool


def _attrs_built_as(model, layers: frozenset[str]) -> set[str]:
    """`self.<name>` attributes every assignment of which builds one of ``layers`` (torch.nn)."""
    found = set()
    resolve = model.ctx.resolve
    for name, facts in model.attrs.items():
        values = [value for _, value, _ in facts.assignments]
        if values and all(isinstance(v, ast.Call) and (resolve(v.func) or "").startswith("torch.nn.")
                          and (resolve(v.func) or "").rsplit(".", 1)[-1] in layers for v in values):
            found.add(name)
    return found


class _Layers(NamedTuple):
    pools: set[str]  # `self.<name>` pools to size 1
    keeping: set[str]  # `self.<name>` layers that keep one value per channel (conv, linear, activations)


def _pooled(node: ast.AST, fn, model, layers: _Layers, steps: int, at: ast.stmt | None) -> str | None:
    """The pool (as written) whose one value per channel per sample ``node`` (read in statement
    ``at``) holds, or None."""
    if steps <= 0:
        return None
    if isinstance(node, ast.Name):
        binding = reaching_assignment(fn, node.id, at)
        if binding is None:
            return None
        return _pooled(binding.value, fn, model, layers, steps - 1, binding)
    if not isinstance(node, ast.Call):
        return None
    func = node.func
    resolved = model.ctx.resolve(func) or ""
    last = resolved.rsplit(".", 1)[-1]
    if resolved.startswith("torch.nn.functional.") and node.args:
        if last in _FUNCTIONAL_GLOBAL_POOLS and len(node.args) >= 2 and _size_one_value(node.args[1]):
            return ast.unparse(node)
        if last in _FUNCTIONAL_WINDOW_POOLS and len(node.args) >= 2 and _own_spatial_size(node.args[1], node.args[0]):
            return ast.unparse(node)
        return None
    if resolved in ("torch.flatten", "torch.squeeze") and node.args:
        return _pooled(node.args[0], fn, model, layers, steps - 1, at)
    if isinstance(func, ast.Attribute) and func.attr in _RESHAPES and not resolved.startswith("torch."):
        return _pooled(func.value, fn, model, layers, steps - 1, at)
    attr = fn.self_attr(func)
    if attr is None or len(node.args) != 1:
        return None
    if attr in layers.pools:
        return f"self.{attr}"
    if attr in layers.keeping:
        return _pooled(node.args[0], fn, model, layers, steps - 1, at)
    return None


def _size_one_value(size: ast.AST) -> bool:
    values = size.elts if isinstance(size, ast.Tuple | ast.List) else [size]
    return bool(values) and all(isinstance(v, ast.Constant) and v.value == 1 and not isinstance(v.value, bool)
                                for v in values)


def _own_spatial_size(kernel: ast.AST, pooled: ast.AST) -> bool:
    """`x.size()[2:]` or `x.shape[2:]` of the pooled tensor `x`: a window as large as the map."""
    if not (isinstance(kernel, ast.Subscript) and isinstance(kernel.slice, ast.Slice)
            and kernel.slice.upper is None and isinstance(kernel.slice.lower, ast.Constant)
            and kernel.slice.lower.value == 2):
        return False
    shape = kernel.value
    if isinstance(shape, ast.Call) and isinstance(shape.func, ast.Attribute) and shape.func.attr == "size" \
            and not shape.args:
        source = shape.func.value
    elif isinstance(shape, ast.Attribute) and shape.attr == "shape":
        source = shape.value
    else:
        return False
    return ast.dump(source) == ast.dump(pooled)


# --- a builder's parameters: the values its callers in the class, or the class's constructions
# in the file, pass (PSP's `_make_stages(in_channels, out_channels, bin_sz, norm_layer)`, called once
# per bin of `bin_sizes`, itself the constructor argument `bin_sizes=[1, 2, 3, 6]`) --------------

# How many names, parameters and call sites to follow back from a layer's argument.
_MAX_VALUE_STEPS = 6
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)


def _possible_values(node: ast.AST, fn, model, steps: int = _MAX_VALUE_STEPS) -> list[ast.AST] | None:
    """The expressions ``node`` (read in ``fn``) may hold: through local names, comprehension
    variables over a list, and parameters (what each call of the method in the class passes, or each
    construction of the class in the file for `__init__`, and the default). None where some value
    cannot be told (a call of another file, a star argument)."""
    if not isinstance(node, ast.Name):
        return [node]
    if steps <= 0:
        return None
    name = node.id
    generator = _comprehension_over(node, name, fn)
    if generator is not None:
        values = []
        for sequence in _possible_values(generator.iter, fn, model, steps - 1) or [None]:
            if not isinstance(sequence, ast.List | ast.Tuple) or any(isinstance(e, ast.Starred) for e in sequence.elts):
                return None
            for element in sequence.elts:
                found = _possible_values(element, fn, model, steps - 1)
                if found is None:
                    return None
                values.extend(found)
        return values
    parameters = _parameters(fn)
    if name in fn.local_values and name not in parameters:
        values = []
        for value in fn.local_values[name]:
            found = _possible_values(value, fn, model, steps - 1)
            if found is None:
                return None
            values.extend(found)
        return values
    if name not in parameters or name in fn.local_values:
        return None
    passed = _passed_to(fn, parameters.index(name), name, model)
    if passed is None:
        return None
    values = []
    for value, caller in passed:
        found = _possible_values(value, caller, model, steps - 1)
        if found is None:
            return None
        values.extend(found)
    return values


def _comprehension_over(node: ast.Name, name: str, fn):
    """The comprehension generator `for <name> in <iter>` whose element ``node`` is computed in."""
    cur = fn.parent(node)
    while cur is not None and cur is not fn.node:
        if isinstance(cur, _COMPREHENSIONS):
            for generator in cur.generators:
                if isinstance(generator.target, ast.Name) and generator.target.id == name and not generator.ifs:
                    return generator
        cur = fn.parent(cur)
    return None


def _parameters(fn) -> list[str]:
    """Positional parameters of ``fn`` as callers fill them (a method's `self` left out)."""
    node = fn.node
    names = [a.arg for a in (*node.args.posonlyargs, *node.args.args)]
    static = any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in node.decorator_list)
    return names if static or fn.owner is None else names[1:]


def _passed_to(fn, position: int, name: str, model) -> list[tuple[ast.AST, object]] | None:
    """(argument, the function it is read in) of each call that fills parameter ``name`` of ``fn``,
    with the default where a call leaves it out; None where a call's arguments cannot be told."""
    ctx = model.ctx
    calls = []  # (call, caller)
    if fn.node.name == "__init__" and fn.owner is not None:
        for call in ctx.nodes(ast.Call):
            if isinstance(call.func, ast.Name) and call.func.id == fn.owner.name:
                scope = ctx.enclosing(call, FUNCTION_DEFS)
                if scope is None:
                    return None  # built at module level: not followed
                holder = ctx.enclosing(scope, ast.ClassDef)
                owner = ctx.classes.get(holder.name) if holder is not None else None
                calls.append((call, ctx.function(scope, owner)))
    elif fn.owner is not None:
        for method in model.all_methods:
            for call in method.nodes(ast.Call):
                if method.self_attr(call.func) == fn.node.name:
                    calls.append((call, method))
    if not calls:
        return None
    default = parameter_defaults(fn.node.args).get(name)
    passed = []
    for call, caller in calls:
        if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
            return None
        keyword = next((k.value for k in call.keywords if k.arg == name), None)
        if keyword is not None:
            passed.append((keyword, caller))
        elif position < len(call.args):
            passed.append((call.args[position], caller))
        elif default is not None:
            passed.append((default, fn))
        else:
            return None
    return passed
