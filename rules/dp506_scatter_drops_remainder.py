"""
## What it does
Flags a `scatter` override of a DataParallel subclass that splits the batch into per-device
chunks of `B // N` samples and never hands out the rest:
- chunks sliced as `x[s * i : s * (i + 1)]` (or `x[i * s : (i + 1) * s]`) for each device `i`, with
  `s = <batch size> // <device count>` (the `CustomDataParallel` of Yet-Another-EfficientDet and its
  copies), when the method has no `%` and no slice from a multiple of `s` to the end (a last chunk
  that takes the rest);
- groups built with `zip(*[iter(batch)] * n)` (the itertools "grouper" idiom, which stops at the
  last full group), as neural_sp's `CustomDataParallel` splits each list of its batch dict.

## Why is this bad?
DataParallel calls its own `scatter` to cut the inputs into one chunk per device; an override
decides alone what each replica sees. With chunks of `B // N` samples the last `B % N` samples
of every batch whose size the device count does not divide reach no replica: forward, the loss
and the gradients see fewer samples than one device would, silently (12 samples on 8 GPUs train
on 8). The grouper drops them the same way, and gives every device an empty list when the batch
is smaller than the device count. Latent: it needs such a batch (a batch size that is not a
multiple of the GPU count, or the short last batch of an epoch), so a warning.

## How to fix
Split with `torch.tensor_split(x, n)` / `torch.chunk`, or the stock `scatter_kwargs`, which hand
out every sample; or give the last device the rest (`x[s * i:]` for `i == n - 1`).
"""

from __future__ import annotations

import ast

from dpcheck.constants import DATAPARALLEL_CLASSES
from dpcheck.findings import Severity
from dpcheck.rule import Rule


class ScatterDropsRemainder(Rule):
    code = "DP506"
    name = "scatter-drops-remainder"
    severity = Severity.WARNING
    # The harness wraps an example model in torch's own DataParallel: a project subclass's scatter
    # never runs there.
    not_confirmable = "the harness scatters with torch's stock scatter, not a DataParallel subclass's own"
    summary = "A scatter override that cuts chunks of B // N samples drops the last B % N of each batch"
    fix_hint = "Split with torch.tensor_split / torch.chunk, or let the last device take the rest"
    bad_example = """
        class CustomDataParallel(nn.DataParallel):
            def scatter(self, inputs, kwargs, device_ids):
                splits = inputs[0].shape[0] // len(device_ids)
                return [(inputs[0][splits * i: splits * (i + 1)].to(f'cuda:{d}'),)
                        for i, d in enumerate(device_ids)], [kwargs] * len(device_ids)
    """
    good_example = """
        class CustomDataParallel(nn.DataParallel):
            def scatter(self, inputs, kwargs, device_ids):
                chunks = torch.tensor_split(inputs[0], len(device_ids))
                return [(c.to(f'cuda:{d}'),) for c, d in zip(chunks, device_ids)], [kwargs] * len(device_ids)
    """

    def check_file(self, ctx):
        for info in ctx.classes.values():
            scatter = info.methods.get("scatter")
            if scatter is None or not _on_dataparallel(info):
                continue
            for node, what in _dropping_splits(scatter):
                yield self.violation(node, f"`{info.node.name}.scatter` {what}: the last B % N samples of a batch "
                                     "whose size the device count does not divide reach no replica (forward, "
                                     "the loss and the gradients see fewer samples than on one device)")


def _on_dataparallel(info) -> bool:
    """A class on a DataParallel base: torch's, or one named like it (a project subclass of another
    file, DataParallelWithCallback), not DistributedDataParallel (one device per process)."""
    return any(base in DATAPARALLEL_CLASSES or ("DataParallel" in base.rsplit(".", 1)[-1] and "Distributed" not in base)
               for base in info.bases)


def _dropping_splits(method: ast.FunctionDef) -> list[tuple[ast.AST, str]]:
    """The nodes of ``method`` that cut a batch into per-device chunks leaving out the remainder,
    each with what it does."""
    found = []
    nodes = list(ast.walk(method))
    quotients = {}  # name -> the `a // b` bound to it (a name bound once, to a floor division)
    bound: dict[str, int] = {}
    for node in nodes:
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            bound[node.id] = bound.get(node.id, 0) + 1
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                and isinstance(node.value, ast.BinOp) and isinstance(node.value.op, ast.FloorDiv):
            quotients[node.targets[0].id] = node.value
        if isinstance(node, ast.Call) and _grouper(node):
            what = (f"groups the batch with `{ast.unparse(node)}`, which stops at the last full group (and gives "
                    "every device an empty list when the batch is smaller than the count)")
            found.append((node, what))
    quotients = {name: value for name, value in quotients.items() if bound[name] == 1}
    if quotients and not any(isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod) for node in nodes):
        slices = [node.slice for node in nodes if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice)]
        for name, value in quotients.items():
            chunk = next((s for s in slices if _per_device_chunk(s, name)), None)
            rest = any(s.upper is None and s.lower is not None and _multiple_of(s.lower, name) is not None
                       for s in slices)
            if chunk is not None and not rest:
                what = f"cuts each device's chunk `[{ast.unparse(chunk)}]` of `{name} = {ast.unparse(value)}` samples"
                found.append((value, what))
    return found


def _grouper(call: ast.Call) -> bool:
    """`zip(*[iter(x)] * n)` or `zip(*(n * [iter(x)]))`."""
    if not (isinstance(call.func, ast.Name) and call.func.id == "zip" and len(call.args) == 1
            and isinstance(call.args[0], ast.Starred)):
        return False
    product = call.args[0].value
    if not (isinstance(product, ast.BinOp) and isinstance(product.op, ast.Mult)):
        return False
    return any(isinstance(side, ast.List | ast.Tuple) and len(side.elts) == 1 and isinstance(side.elts[0], ast.Call)
               and isinstance(side.elts[0].func, ast.Name) and side.elts[0].func.id == "iter"
               for side in (product.left, product.right))


def _multiple_of(expr: ast.AST, name: str) -> str | None:
    """`name * k` or `k * name`: the dump of k, else None."""
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Mult):
        for this, other in ((expr.left, expr.right), (expr.right, expr.left)):
            if isinstance(this, ast.Name) and this.id == name:
                return ast.dump(other)
    return None


def _per_device_chunk(piece: ast.Slice, name: str) -> bool:
    """`[name * i : name * (i + 1)]` (either operand order; `i + 1` or `1 + i`)."""
    if piece.lower is None or piece.upper is None or piece.step is not None:
        return False
    start, stop = _multiple_of(piece.lower, name), _multiple_of(piece.upper, name)
    if start is None or stop is None:
        return False
    index = next(other for this, other in ((piece.upper.left, piece.upper.right), (piece.upper.right, piece.upper.left))
                 if _is_name(this, name))
    return isinstance(index, ast.BinOp) and isinstance(index.op, ast.Add) and any(
        ast.dump(term) == start and isinstance(other, ast.Constant) and other.value == 1
        for term, other in ((index.left, index.right), (index.right, index.left)))


def _is_name(node: ast.AST, name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == name
