"""
## What it does
Flags a `functools.lru_cache` / `functools.cache` (or a project wrapper named `*lru_cache*`)
whose key holds the module, when forward-reachable code calls it: a decorated method of an
`nn.Module` (`self` is part of the key), or a decorated function called with `self` or a
submodule (`self.encoder`) as an argument.

## Why is this bad?
DataParallel builds new replicas on every call, and each replica is a new object, so
every call adds new keys and never hits. Each entry keeps its replica alive, with the
replica's copies of the weights on its GPU and whatever tensors the function returned:
an unbounded cache (`maxsize=None`, `functools.cache`) grows by one model copy per GPU
per step until it runs out of memory, and the default `maxsize=128` holds up to 128 of
them. On one device (or under DistributedDataParallel) the key is always the same
module and the cache works as meant.

A bounded cache that holds at most a few replicas (`maxsize` of 8 or less), or replicas of a
class without weights, never hits but cannot leak: still a warning (cost-only), with a
message that says it is bounded.

## How to fix
Key the cache on what the value depends on (shapes, dtype, device), not on the module:
move the work into a module-level function of those values, or keep the cached tensors
in a non-persistent buffer, or in a dict keyed by device that you clear yourself.
"""

from __future__ import annotations

import ast

from dpcheck.analysis.dataflow import argument
from dpcheck.analysis.torch_api import FUNCTION_DEFS
from dpcheck.findings import Severity
from dpcheck.rule import Rule

# Bounded caches this small hold few replicas: a wasted cache, not a leak.
_SMALL = 8


class CacheKeyedOnModule(Rule):
    code = "DP107"
    name = "cache-keyed-on-module"
    # Growth that costs memory (and ends in an out-of-memory error only after many steps):
    # cost-only by the severity policy. Measured at error on the zoos, 3 of 7 were bounded
    # caches or caches behind non-default options.
    severity = Severity.WARNING
    summary = "An lru_cache keyed on the module grows by one replica per GPU per DataParallel call"
    fix_hint = "Cache on shapes/dtype/device in a module-level function, not on self or a submodule"
    bad_example = """
        class Rope(nn.Module):
            def __init__(self):
                super().__init__()
                self.register_buffer("inv_freq", torch.rand(8))

            @functools.lru_cache(maxsize=None)
            def table(self, n, device):
                return torch.outer(torch.arange(n, device=device), self.inv_freq.to(device))

            def forward(self, x):
                return x * self.table(x.shape[1], x.device).sum(-1)
    """
    good_example = """
        @functools.lru_cache(maxsize=None)
        def positions(n):
            return tuple(range(n))

        class Rope(nn.Module):
            def __init__(self):
                super().__init__()
                self.register_buffer("inv_freq", torch.rand(8))

            def forward(self, x):
                t = torch.tensor(positions(x.shape[1]), device=x.device, dtype=x.dtype)
                return x * torch.outer(t, self.inv_freq).sum(-1)
    """

    def check_class(self, model):
        called = _called_self_methods(model)
        for fn in model.all_methods:
            if fn.name not in called or any(_is_name(d, ("staticmethod", "classmethod")) for d in fn.node.decorator_list):
                continue  # a static or class method's key holds no instance
            for decorator in fn.node.decorator_list:
                size = _cache_size(model.ctx, decorator)
                if size is not _NOT_A_CACHE:
                    yield self._report(decorator, f"`{fn.name}` caches on `self`", size, _holds_weights(model))
        functions = _cached_functions(model.ctx)
        if not functions:
            return
        for fn in model.reachable:
            for call in fn.nodes(ast.Call):
                if not (isinstance(call.func, ast.Name) and call.func.id in functions):
                    continue
                args = [*call.args, *(k.value for k in call.keywords)]
                held = next((a for a in args if fn.is_self(a) or _is_submodule(model, fn, a)), None)
                if held is not None:
                    yield self._report(call, f"`{call.func.id}` caches on `{ast.unparse(held)}`",
                                       functions[call.func.id])

    def _report(self, node, what, size, holds_weights=True):
        if size is not None and (size <= _SMALL or not holds_weights):
            held = "1 replica and its outputs" if size == 1 else f"{size} replicas and their outputs"
            return self.violation(node, f"{what}, a new DataParallel replica on every call: the cache never hits "
                                  f"and holds up to {held} alive (a speed and memory cost, bounded)",
                                  severity=Severity.WARNING)
        bound = "without bound" if size is None else f"up to {size} entries"
        return self.violation(node, f"{what}, a new DataParallel replica on every call: it never hits and grows "
                              f"{bound}, each entry keeping a replica's weights and outputs on its GPU "
                              "(a GPU memory leak)")


_NOT_A_CACHE = object()


def _cache_size(ctx, decorator):
    """None for an unbounded cache, the maxsize for a bounded one, _NOT_A_CACHE otherwise."""
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    name = ctx.resolve(target) or ""
    last = name.rsplit(".", 1)[-1]
    if name == "functools.cache":
        return None
    if "lru_cache" not in last:
        return _NOT_A_CACHE
    if not isinstance(decorator, ast.Call):
        return 128
    size = argument(decorator, 0, "maxsize")
    if size is None:
        return 128
    if isinstance(size, ast.Constant):
        return size.value if isinstance(size.value, int) and not isinstance(size.value, bool) else None
    return 128  # a computed size: assume the default


def _is_name(node, names) -> bool:
    return isinstance(node, ast.Name) and node.id in names or isinstance(node, ast.Attribute) and node.attr in names


def _called_self_methods(model) -> set[str]:
    names = set()
    for fn in model.reachable:
        names.add(fn.name)
        for call in fn.nodes(ast.Call):
            attr = fn.self_attr(call.func)
            if attr is not None:
                names.add(attr)
    return names


def _cached_functions(ctx) -> dict[str, int | None]:
    """Module-level functions of this file wrapped in a cache: name -> maxsize."""
    return ctx.fact(_find_cached_functions)


def _find_cached_functions(ctx) -> dict[str, int | None]:
    found = {}
    for stmt in ctx.tree.body:
        if isinstance(stmt, FUNCTION_DEFS):
            for decorator in stmt.decorator_list:
                size = _cache_size(ctx, decorator)
                if size is not _NOT_A_CACHE:
                    found[stmt.name] = size
    return found


def _holds_weights(model) -> bool:
    """Does a replica of this class carry tensors of its own (Parameters, buffers, submodules)?"""
    return any(facts.kinds & {"parameter", "buffer", "module"} for facts in model.attrs.values())


def _is_submodule(model, fn, node) -> bool:
    attr = fn.self_attr(node)
    facts = model.attrs.get(attr) if attr is not None else None
    return facts is not None and "module" in facts.kinds
