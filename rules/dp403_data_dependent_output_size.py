"""
## What it does
Flags values with a data-dependent size that reach forward's return value:
`torch.unique`, `nonzero`, `argwhere`, one-argument `torch.where`, and `masked_select` or
boolean-mask indexing (`x[x > 0]`, `x[mask]`) of a tensor whose dim 0 is not the batch (a parameter,
a transposed value). A mask selection from a batch-major tensor is not flagged: it walks the tensor
sample by sample, so gather's concatenation of the replicas' selections is the whole batch's.

Also flags, in any module's forward (a layer's too), the longest length of the replica's own
chunk (`lengths.max()`, `torch.max(lengths)`, `max(lens)` over values computed from forward's
arguments) where it sizes a tensor forward returns: as a size (`torch.zeros(B, max_len, D)`,
`arange(max_len)`, `expand(B, max_len, -1)`), a slice bound (`x[:, :max_len]`) or an argument of
a call that builds from it (`make_mask(lengths, max_len)`), followed through local names and the
operations that keep sizes. Not a maximum over attributes of self or constants, nor a size a
reduction over dim 1 (or over everything) removes, nor a buffer of a fixed size it is copied into
(`out[:, :max_len] = x[:, :max_len]`). `pad_packed_sequence`'s `total_length` is DP405's.

## Why is this bad?
Each replica computes them on its own chunk and gather concatenates the pieces:
`unique` returns duplicates (`[1, 2, 3, 1, 2, 3]`), `nonzero` returns chunk-local
indices (`[1, 3, 1, 3]`), a mask selection of a transposed tensor interleaves the replicas'
pieces feature by feature, and 2-D results with different sizes per replica fail with
`Input tensor at index 1 has invalid shape`. Nothing warns in the 1-D case.
A tensor as long as the chunk's longest sample is as long on each replica as that replica's
longest sample: gather fails with `Gather got an input of invalid size` (Parallel-Tacotron2's
upsampled mel frames, sized by `mel_len.max().item()`) once the chunks' longest lengths differ.

## How to fix
Return the dense tensor (or a mask) from forward and compute these after gather. Size
outputs by a length every replica shares: the padded input's `x.size(1)`, a configured
maximum, or a `max_len` argument computed on the whole batch before the DataParallel call.
"""

from __future__ import annotations

import ast

from dpcheck.analysis.bindings import reaching_assignment
from dpcheck.analysis.dataflow import dim_argument, is_batch_tensor, is_true, keyword, parameters_of
from dpcheck.analysis.outputs import gathered_verdict, optional_severity, returned_leaves
from dpcheck.findings import ObservationKind as K
from dpcheck.findings import Severity
from dpcheck.rule import Rule

_OPS = frozenset({"unique", "unique_consecutive", "nonzero", "masked_select", "argwhere"})
_PASS_THROUGH = frozenset({"float", "long", "int", "view", "reshape", "flatten", "squeeze", "unsqueeze",
                           "detach", "clone", "contiguous", "to", "cpu", "sort", "t"})


class DataDependentOutputSize(Rule):
    code = "DP403"
    name = "data-dependent-output-size"
    severity = Severity.ERROR
    wrapper_method = "gather"
    forward_code_only = True
    confirms = frozenset({
        K.OUTPUT_SHAPE_DIFFERS, K.GATHER_FAILED, K.VALUES_DIFFER, K.INTEGER_VALUES_DIFFER, K.GRADS_DIFFER})
    summary = "unique/nonzero results, masks over non-batch dims, or sizes of the chunk's longest sample, returned from forward gather wrongly"
    fix_hint = "Return dense tensors or masks of sizes every replica shares; compute unique/nonzero after the forward pass"
    bad_example = """
        class Vocab(nn.Module):
            def forward(self, ids):
                return torch.unique(ids)
    """
    good_example = """
        class Vocab(nn.Module):
            def forward(self, ids):
                present = torch.zeros(ids.shape[0], 100, device=ids.device)
                present.scatter_(1, ids, 1.0)
                return present
    """

    def check_class(self, model):
        # What a layer computes from unique/nonzero is usually consumed inside its parent; a
        # length padded to the chunk's longest sample is not undone by it (see _chunk_sized).
        gathered, condition = gathered_verdict(model)
        requires = (frozenset({condition}),) if condition else ()
        if gathered:
            for leaf, fn, anchor in returned_leaves(model):
                why = _data_dependent(leaf, fn, model, 0)
                if why:
                    yield self.violation(anchor, f"forward returns {why}, whose size depends on the data: "
                                         "DataParallel concatenates per-replica results (duplicates, "
                                         "chunk-local indices, or a gather shape error)",
                                         severity=optional_severity(anchor, model, leaf), requires=requires)
        yield from self._sized_by_longest(model, gathered, requires)

    def _sized_by_longest(self, model, gathered, condition):
        """Outputs sized by the chunk's longest sample, at the maximum that sizes them. Reported in
        any module: as an error where the class is the gathered one (on the cross-file condition
        that decides it, a warning otherwise), as a warning in a layer, whose parent may reduce
        the length away before anything is gathered (attention over it, a pooled sum)."""
        if not _may_take_chunk_maximum(model):
            return
        resolve = model.ctx.resolve
        sized: dict[int, tuple[ast.AST, Severity]] = {}
        for leaf, fn, anchor in returned_leaves(model):
            longest = _chunk_sized(leaf, fn, resolve)
            if longest is None:
                continue
            severity = optional_severity(anchor, model, leaf) or Severity.ERROR
            if id(longest) not in sized or severity is Severity.ERROR:
                sized[id(longest)] = (longest, severity)
        for longest, severity in sized.values():
            error_if = ()
            if not gathered:
                severity = Severity.WARNING
            elif condition and severity is Severity.ERROR:
                severity, error_if = Severity.WARNING, condition
            yield self.violation(longest, f"forward returns a tensor sized by `{ast.unparse(longest)}`, the "
                                 "longest length in the replica's own chunk: DataParallel replicas return "
                                 "different sizes past the batch dim and gather fails",
                                 severity=severity, error_if=error_if)


def _data_dependent(node, fn, model, depth) -> str | None:
    if depth > 6:
        return None
    resolve = model.ctx.resolve
    if isinstance(node, ast.Name):
        for value in fn.local_values.get(node.id, ()):
            why = _data_dependent(value, fn, model, depth + 1)
            if why:
                return why
        return None
    if isinstance(node, ast.Call):
        func = node.func
        name = resolve(func) or ""
        last = name.rsplit(".", 1)[-1] if name.startswith("torch.") else (func.attr if isinstance(func, ast.Attribute) else "")
        if last == "masked_select" and _in_sample_order(
                node.args[0] if name.startswith("torch.") and node.args else func.value, fn):
            return None
        if last in _OPS:
            return f"`{last}`" + (" of a tensor whose dim 0 is not the batch" if last == "masked_select" else "")
        if name == "torch.where" and len(node.args) == 1:
            return "one-argument `torch.where`"
        if isinstance(func, ast.Attribute) and func.attr in _PASS_THROUGH:
            return _data_dependent(func.value, fn, model, depth + 1)
        return None
    if isinstance(node, ast.Subscript) and _is_mask(node.slice, fn) and not _in_sample_order(node.value, fn):
        return "a boolean-mask selection of a tensor whose dim 0 is not the batch"
    return None


def _in_sample_order(selected, fn) -> bool:
    """Is the tensor a boolean mask selects from batch-major (computed from forward's inputs with
    the batch kept in dim 0)? Then the selection walks it sample by sample, and gather's concatenation
    of the replicas' selections is the whole batch's selection, element for element (the harness
    finds `h[h > 0]` and `masked_select(h, m)` equal to the single-device run on uneven batches too).
    A parameter, a buffer, a transposed value or a time-major one (`pad_packed_sequence(out)` without
    `batch_first=True`) holds no samples in that order: still reported."""
    return is_batch_tensor(selected, fn) and not _time_major(selected, fn, 0)


def _time_major(node, fn, depth) -> bool:
    """Does ``node`` come (through the local names it is computed from) from `pad_packed_sequence`
    without `batch_first=True`, whose output is (T, B, ...)?"""
    if depth > 6:
        return False
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call) and (sub.func.attr if isinstance(sub.func, ast.Attribute) else
                                          getattr(sub.func, "id", "")) == "pad_packed_sequence" \
                and not is_true(keyword(sub, "batch_first")):
            return True
        if isinstance(sub, ast.Name):
            if any(_time_major(value, fn, depth + 1) for value in fn.local_values.get(sub.id, ())):
                return True
    return False


def _is_mask(index, fn) -> bool:
    if isinstance(index, ast.Compare):
        return True
    if isinstance(index, ast.UnaryOp) and isinstance(index.op, ast.Invert):
        return True
    if isinstance(index, ast.Name):
        values = fn.local_values.get(index.id, ())
        return bool(values) and all(isinstance(v, ast.Compare) or (
            isinstance(v, ast.UnaryOp) and isinstance(v.op, ast.Invert)) or (
            isinstance(v, ast.BinOp) and isinstance(v.op, (ast.BitAnd, ast.BitOr))) for v in values)
    return False




# --- Tensors sized by the longest sample of the replica's own chunk ---------------------------

# Calls whose arguments are sizes of the tensor they make (allocators, `arange`, and the
# reshapes and broadcasts that take sizes): a chunk's maximum among them sizes the result.
_SIZED_BY_ARGUMENTS = frozenset({
    "zeros", "ones", "empty", "full", "rand", "randn", "arange", "new_zeros", "new_ones", "new_empty",
    "new_full", "expand", "view", "reshape", "repeat", "one_hot", "pad"})
# Reductions that drop the dim they reduce: over dim 1 (a batch-first sequence's time) or over
# everything, the chunk's length does not survive them.
_REDUCTIONS = frozenset({"sum", "mean", "max", "min", "amax", "amin", "logsumexp", "norm", "prod", "any",
                         "all", "argmax", "argmin", "nansum", "nanmean"})
# Calls whose result is a Python number or a size, never a tensor sized by their argument.
_SCALAR_CALLS = frozenset({"int", "float", "round", "len", "range", "min", "max", "abs", "bool", "print",
                           "isinstance", "item", "tolist", "size", "dim", "numel", "ceil", "floor"})
# Steps that keep the chunk's maximum a number: `lengths.max().item()`, `int(m)`, `math.ceil(m / r)`.
_NUMBER_STEPS = frozenset({"item", "int", "long", "float", "cpu", "detach", "round", "ceil", "floor"})
# Callees named for a loss reduce what they are handed (`self.loss_function(logits=x[:, :m])`).
_LOSS_NAME = ("loss", "criterion")
_SIZE_DEPTH = 12
# How far back from an output a size is followed: each node is followed once per function
# (``_chunk_sized``), so this bounds the recursion, not the work.
_FLOW_DEPTH = 60


def _may_take_chunk_maximum(model) -> bool:
    """A cheap test before following any output: does forward's code take a maximum without a dim
    (`x.max()`, `torch.max(x)`, `max(lens)`)?"""
    return any(_takes_maximum(fn) for fn in model.reachable)


def _takes_maximum(fn) -> bool:
    """Does ``fn`` itself call `max`/`amax` without a dim? A size is followed back only within the
    function that returns it, so a function without one has no chunk maximum to find."""
    known = fn.__dict__.get("_takes_maximum")
    if known is None:
        known = fn._takes_maximum = any(_is_maximum_call(call) for call in fn.nodes(ast.Call))
    return known


def _is_maximum_call(call) -> bool:
    func = call.func
    if call.keywords:
        return False
    if func.__class__ is ast.Attribute:
        return func.attr in ("max", "amax") and len(call.args) <= 1
    return func.__class__ is ast.Name and func.id == "max" and len(call.args) == 1


def _remembered(fn, table: str, node, find):
    """``find()`` for ``node``, remembered per node in ``fn``'s table (a local is met on many paths
    back from the outputs); a node met again while it is being followed counts as none."""
    memo = fn.__dict__.get(table)
    if memo is None:
        memo = fn.__dict__[table] = {}
    key = id(node)
    if key in memo:
        return memo[key]
    memo[key] = None
    found = memo[key] = find()
    return found


def _bound_values(name, fn):
    """What the local ``name`` holds where it is read: the one assignment that reaches it, else
    every value the function binds to that name."""
    try:
        stmt = reaching_assignment(fn, name.id, name)
    except (KeyError, AttributeError):  # a node built on the fly (`x + y` for `x += y`)
        stmt = None
    if stmt is not None and stmt.__class__ is ast.Assign and any(
            t.__class__ is ast.Name and t.id == name.id for t in stmt.targets):
        return (stmt.value,)
    return fn.local_values.get(name.id, ())


def _chunk_maximum(node, fn, depth=0) -> ast.AST | None:
    """``_find_chunk_maximum``, remembered per node for the function."""
    if not _takes_maximum(fn):
        return None
    return _remembered(fn, "_chunk_maximum", node, lambda: _find_chunk_maximum(node, fn, depth))


def _find_chunk_maximum(node, fn, depth) -> ast.AST | None:
    """The expression that takes the longest length in the replica's chunk (`lengths.max()`,
    `torch.max(lengths)`, `max(lens)` over values computed from the function's arguments) that the
    number ``node`` is, or is computed from with numbers that are not (`max_len + 1`); None if it
    is none."""
    if depth > _SIZE_DEPTH:
        return None
    cls = node.__class__
    if cls is ast.Name:
        for value in _bound_values(node, fn):
            found = _chunk_maximum(value, fn, depth + 1)
            if found is not None:
                return found
        return None
    if cls is ast.BinOp:
        for side, other in ((node.left, node.right), (node.right, node.left)):
            found = _chunk_maximum(side, fn, depth + 1)
            # `x - x.max()` is a tensor of values, not a length: the other operand is data.
            if found is not None and (not _from_arguments(other, fn, 0) or _chunk_maximum(other, fn, depth + 1)):
                return found
        return None
    if cls is not ast.Call:
        return None
    func = node.func
    if func.__class__ is ast.Attribute:
        receiver = func.value
        on_torch = receiver.__class__ is ast.Name and receiver.id == "torch"
        if func.attr in ("max", "amax") and not node.keywords:
            if not node.args and not on_torch:
                return node if _from_arguments(receiver, fn, 0) else None
            if on_torch and len(node.args) == 1:
                return node if _from_arguments(node.args[0], fn, 0) else None
            return None
        if func.attr in _NUMBER_STEPS:
            return _chunk_maximum(receiver, fn, depth + 1) or next(
                (found for arg in node.args if (found := _chunk_maximum(arg, fn, depth + 1)) is not None), None)
        return None
    if func.__class__ is ast.Name:
        if func.id == "max" and len(node.args) == 1:
            return node if _from_arguments(node.args[0], fn, 0) else None
        if func.id in _NUMBER_STEPS or func.id in ("min", "max"):
            return next((found for arg in node.args if (found := _chunk_maximum(arg, fn, depth + 1)) is not None),
                        None)
    return None


def _from_arguments(node, fn, depth) -> bool:
    """Is ``node`` computed from the function's arguments (the scattered batch), not only from
    attributes of self, constants and globals?"""
    if depth > _SIZE_DEPTH:
        return False
    params = fn.__dict__.get("_parameter_names")
    if params is None:
        params = fn._parameter_names = frozenset(parameters_of(fn))
    for name in ast.walk(node):
        if name.__class__ is not ast.Name or name.id == fn.self_name:
            continue
        if name.id in params:
            return True
        if any(_from_arguments(value, fn, depth + 1) for value in fn.local_values.get(name.id, ())):
            return True
    return False


def _chunk_sized(node, fn, resolve, depth=0) -> ast.AST | None:
    """``_find_chunk_sized``, remembered per node for the function."""
    if not _takes_maximum(fn):
        return None
    return _remembered(fn, "_chunk_sized", node, lambda: _find_chunk_sized(node, fn, resolve, depth))


def _find_chunk_sized(node, fn, resolve, depth) -> ast.AST | None:
    """The chunk maximum (``_chunk_maximum``) that sizes the tensor ``node`` past its batch dim:
    one passed as a size (`torch.zeros(B, max_len)`, `arange(max_len)`, `expand(B, max_len, -1)`),
    as a slice bound (`x[:, :max_len]`) or to a function that builds from it (`make_mask(lens,
    max_len)`), followed through local names, arithmetic, torch functions, the tensor's own methods
    and this module's layers; a reduction over dim 1 or over everything, a slice of a fixed length
    (`x[:, s:s + n]`) and a loss end it. None if there is none."""
    if depth > _FLOW_DEPTH:
        return None
    cls = node.__class__
    if cls is ast.Name:
        return _first_sized(_bound_values(node, fn), fn, resolve, depth + 1)
    operands = _OPERANDS.get(cls)
    if operands is not None:
        return _first_sized(operands(node), fn, resolve, depth + 1)
    if cls is ast.Attribute:
        return None if node.attr in ("shape", "device", "dtype") else _chunk_sized(node.value, fn, resolve, depth + 1)
    if cls is ast.Subscript:
        parts = node.slice.elts if node.slice.__class__ is ast.Tuple else (node.slice,)
        for part in parts:
            if part.__class__ is not ast.Slice:
                continue
            if _fixed_length(part):
                return _chunk_maximum(part.upper.right if _same(part.upper.left, part.lower) else part.upper.left,
                                      fn)  # `x[:, s:s + n]` is n long
            for bound in (part.lower, part.upper):
                found = None if bound is None else _chunk_maximum(bound, fn)
                if found is not None:
                    return found
        return _chunk_sized(node.value, fn, resolve, depth + 1)
    if cls is not ast.Call:
        return None
    func = node.func
    method = func.attr if func.__class__ is ast.Attribute else None
    last = method or (func.id if func.__class__ is ast.Name else "")
    if last in _SCALAR_CALLS and (method is None or last not in _REDUCTIONS):
        return None
    if last == "pad_packed_sequence" or any(word in last.lower() for word in _LOSS_NAME):
        return None  # `total_length` is DP405's; a loss reduces
    receiver = func.value if method is not None else None
    callee = resolve(func) or ""
    on_torch = callee.startswith("torch.")
    if last in _REDUCTIONS:
        dim = dim_argument(node, 1 if on_torch and receiver is not None and receiver.__class__ is ast.Name else 0)
        if dim is None or (dim.__class__ is ast.Constant and dim.value == 1):
            return None  # the chunk's length is reduced away
    if last in _SIZED_BY_ARGUMENTS:
        for arg in node.args:
            for size in (arg.elts if arg.__class__ in (ast.Tuple, ast.List) else (arg,)):
                found = _chunk_maximum(size, fn)
                if found is not None:
                    return found
    if receiver is not None and not on_torch and not fn.is_self(receiver):
        found = _chunk_sized(receiver, fn, resolve, depth + 1)
        if found is not None:
            return found
    # A tensor handed on keeps its length through torch's functions and this module's layers; what
    # another function makes of it is not known. A chunk maximum handed to a project's function sizes
    # its result (`make_mask(lens, max_len)`); handed to any other of torch's (`torch.maximum(one, m)`,
    # `clamp(x, max=m)`) it is data, taken elementwise.
    passes_tensors = on_torch or (receiver is not None and (fn.is_self(receiver) or fn.self_attr(receiver)))
    for arg in (*node.args, *(kw.value for kw in node.keywords)):
        found = (passes_tensors and _chunk_sized(arg, fn, resolve, depth + 1)) \
            or (not on_torch and _chunk_maximum(arg, fn))
        if found:
            return found
    return None


# The operands of expressions whose result is as long as one of them (a broadcast, a choice).
_OPERANDS = {
    ast.BinOp: lambda node: (node.left, node.right),
    ast.Compare: lambda node: (node.left, *node.comparators),
    ast.UnaryOp: lambda node: (node.operand,),
    ast.IfExp: lambda node: (node.body, node.orelse),
    ast.Tuple: lambda node: node.elts,
    ast.List: lambda node: node.elts,
    ast.Starred: lambda node: (node.value,),
}


def _first_sized(nodes, fn, resolve, depth) -> ast.AST | None:
    return next((found for node in nodes if (found := _chunk_sized(node, fn, resolve, depth)) is not None), None)


def _fixed_length(part: ast.Slice) -> bool:
    """`s:s + n` (or `s:n + s`): a slice n long wherever it starts."""
    upper = part.upper
    return part.lower is not None and upper.__class__ is ast.BinOp and upper.op.__class__ is ast.Add \
        and (_same(upper.left, part.lower) or _same(upper.right, part.lower))


def _same(a, b) -> bool:
    return ast.dump(a) == ast.dump(b)
