"""
## What it does
Flags `pad_packed_sequence(...)` in code that runs during `forward` without
`total_length`, or with a `total_length` taken from the lengths of the chunk
(`total_length=lengths[0]`, `lengths.max()`). Code behind a guard no run of the wrapped model
takes is left out: an optional argument no caller passes, and `if isinstance(x, PackedSequence):`
on a forward input of the wrapped model, or of a layer in a file that packs no sequence
(DataParallel's scatter never hands in a PackedSequence; a layer gets one only from code that packs).
Nor is an unpacking whose packed lengths were first shifted so that their longest spans the padded
input (`lens = lens + x.size(1) - lens.max()`, then perhaps halved or cast): every replica's longest
sequence is then the full padded width, and every replica pads to it. Nor is an unpacking whose padded
length never leaves the replica: the output padded up to an
argument's time length (`torch.cat` with padding up to `x_mask.size(1)`, or copied into
`torch.zeros([B, C, m.shape[-1]])`: the argument is scattered whole along time), or used only as the
input of a submodule of the file whose forward sums over the time dim, with any softmax weights
masked where the padding is (attention pooling), before forward returns.

## Why is this bad?
Each replica pads to the longest sequence *in its own chunk*, so replicas return
different time dimensions and gather fails with `Input tensor at index 1 has invalid
shape [4, 3, 8], but expected [4, 10, 8]`, or silently pads differently per GPU.
`total_length` was added for exactly this case; a value derived from the chunk's
lengths is still per-chunk.

## How to fix
`pad_packed_sequence(packed, batch_first=True, total_length=padded_input.size(1))`,
using the size of the padded input that every replica received whole along time.
"""

from __future__ import annotations

import ast

from dpcheck.analysis.bindings import reaching_binding
from dpcheck.analysis.dataflow import argument, dim_argument, is_true, keyword, parameters_of
from dpcheck.analysis.guards import branch_requires
from dpcheck.findings import Applicability, Severity
from dpcheck.findings import ObservationKind as K
from dpcheck.rule import Rule

_FUNCTION = ("torch.nn.utils.rnn.pad_packed_sequence",)


class PadPackedWithoutTotalLength(Rule):
    code = "DP405"
    name = "pad-packed-without-total-length"
    severity = Severity.ERROR
    forward_code_only = True
    confirms = frozenset({K.OUTPUT_SHAPE_DIFFERS, K.GATHER_FAILED})
    summary = "pad_packed_sequence without total_length pads each replica to its own length"
    fix_hint = "Pass total_length=padded_input.size(1) (the full padded length)"
    bad_example = """
        from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

        class Tagger(nn.Module):
            def __init__(self):
                super().__init__()
                self.rnn = nn.LSTM(8, 8, batch_first=True)

            def forward(self, x, lengths):
                packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
                out, _ = self.rnn(packed)
                out, _ = pad_packed_sequence(out, batch_first=True)
                return out
    """
    good_example = """
        from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

        class Tagger(nn.Module):
            def __init__(self):
                super().__init__()
                self.rnn = nn.LSTM(8, 8, batch_first=True)

            def forward(self, x, lengths):
                packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
                out, _ = self.rnn(packed)
                out, _ = pad_packed_sequence(out, batch_first=True, total_length=x.size(1))
                return out
    """

    def check_class(self, model):
        resolve = model.ctx.resolve
        for fn in model.reachable:
            for call, name in model.ctx.named_calls(fn):
                if not (name in _FUNCTION or name.endswith(".pad_packed_sequence")):
                    continue
                requires = branch_requires(model, fn, call)
                if requires is None:
                    continue  # behind a guard no run of the wrapped model takes
                total = argument(call, 3, "total_length")
                if total is None:
                    if _repadded_to_argument(fn, call) or _copied_into_argument_sized_buffer(fn, call):
                        continue  # padded up to the length every replica's argument shares
                    if _pooled_over_time_before_return(model, fn, call):
                        continue  # the padded time axis never leaves forward
                    if _lengths_fill_the_width(fn, call, resolve):
                        continue  # every replica's longest sequence spans the padded input's width
                    padded = _padded_input(fn, call, resolve)
                    fix = None if padded is None else self.offer_fix(
                        f"Pad to the input's length: `total_length={padded}`", Applicability.SAFE, total=padded)
                    yield self.violation(call, "`pad_packed_sequence` without `total_length`: each "
                                         "DataParallel replica pads to its own chunk's longest sequence", fix=fix,
                                         requires=requires)
                elif _from_lengths(total, fn, 0):
                    yield self.violation(total, f"`total_length={ast.unparse(total)}` comes from the chunk's "
                                         "lengths, so it still differs between DataParallel replicas",
                                         requires=requires)

    def fix(self, finding, editor):
        import libcst as cst

        call, total = editor.node, finding.fix.get("total")
        if not isinstance(call, cst.Call) or not total:
            return
        extra = cst.parse_expression(f"f(total_length={total})").args[0]
        args = list(call.args)
        if args:
            last = args[-1]
            args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
            extra = extra.with_changes(comma=last.comma)
        editor.replace(call, call.with_changes(args=[*args, extra]))


def _padded_input(fn, pad_call, resolve) -> str | None:
    """`x.size(1)` (batch_first) or `x.size(0)` for the padded tensor `x` that the function packs
    with the pack_padded_sequence whose output ``pad_call`` unpacks (traced back through names,
    tuple elements and the recurrent call; where the trace ends elsewhere, the function's packs);
    None when those packs disagree (a function that packs a question and a context), or when it is
    not a plain name that still holds the padded tensor where ``pad_call`` reads it."""
    packs = _packs_feeding(argument(pad_call, 0, "sequence"), fn, resolve, set()) or {
        call for call in fn.nodes(ast.Call) if (resolve(call.func) or "").endswith("pack_padded_sequence")}
    sizes = {_padded_size(call, fn, pad_call, resolve) for call in packs}
    return sizes.pop() if len(sizes) == 1 else None


def _packs_feeding(node, fn, resolve, seen: set[str]) -> set[ast.Call]:
    """The pack_padded_sequence calls whose output reaches ``node``: through local names (each
    followed once), `out[0]` / `out, h = ...`, and calls (a recurrent layer) through their first
    argument."""
    if isinstance(node, ast.Subscript):
        return _packs_feeding(node.value, fn, resolve, seen)
    if isinstance(node, ast.Name):
        if node.id in seen:
            return set()
        seen.add(node.id)
        return {call for value in fn.local_values.get(node.id, ()) for call in _packs_feeding(value, fn, resolve, seen)}
    if isinstance(node, ast.Call):
        if (resolve(node.func) or "").endswith("pack_padded_sequence"):
            return {node}
        if node.args:
            return _packs_feeding(node.args[0], fn, resolve, seen)
    return set()


def _padded_size(pack_call, fn, pad_call, resolve) -> str | None:
    """`x.size(dim)` for the tensor ``pack_call`` packs, its time dim by `batch_first`."""
    if not (pack_call.args and isinstance(pack_call.args[0], ast.Name)):
        return None
    batch_first = keyword(pack_call, "batch_first")
    if batch_first is None and len(pack_call.args) > 2:
        batch_first = pack_call.args[2]
    dim = 1 if isinstance(batch_first, ast.Constant) and batch_first.value is True else 0
    padded = _still_padded(pack_call.args[0].id, fn, pack_call, pad_call, resolve)
    return None if padded is None else f"{padded}.size({dim})"


def _still_padded(name, fn, pack_call, pad_call, resolve) -> str | None:
    """A name that holds the padded tensor where ``pad_call`` reads it: `name` itself unless the
    function rebinds it after packing (`x = pack_padded_sequence(x, ...)`, or `x, _ = self.rnn(packed)`,
    where `x` is a PackedSequence and `x.size(1)` would raise); then the one plain name it was copied
    from (`x = inputs`), if the same binding of that name reaches the packing and the unpacking;
    else None (no fix is offered)."""
    def packed(values):
        return any(isinstance(v, ast.Call) and (resolve(v.func) or "").endswith("pack_padded_sequence")
                   for v in values)

    if _unchanged_between(name, fn, pack_call, pad_call):
        return name
    values = fn.local_values.get(name) or []
    if not packed(values):
        return None
    sources = [v for v in values if not packed([v])]
    if len(sources) == 1 and isinstance(sources[0], ast.Name) \
            and _unchanged_between(sources[0].id, fn, pack_call, pad_call):
        return sources[0].id
    return None


def _unchanged_between(name, fn, first, later) -> bool:
    """Does ``name`` hold at ``later`` the value it held at ``first``: the function never binds it
    (a parameter kept as passed), or one and the same binding of it reaches both."""
    if not any(node.id == name and not isinstance(node.ctx, ast.Load) for node in fn.nodes(ast.Name)):
        return name in parameters_of(fn)
    binding = reaching_binding(fn, name, later)
    return binding is not None and binding is reaching_binding(fn, name, first)


def _lengths_fill_the_width(fn, pad_call, resolve) -> bool:
    """Do the packs whose output ``pad_call`` unpacks (where the trace ends elsewhere, the function's
    packs) all take lengths rebased to the padded width (``_rebased_lengths``)? pad_packed_sequence
    pads to the longest packed length, which is then the same on every replica."""
    packs = _packs_feeding(argument(pad_call, 0, "sequence"), fn, resolve, set()) or {
        call for call in fn.nodes(ast.Call) if (resolve(call.func) or "").endswith("pack_padded_sequence")}
    return bool(packs) and all(_rebased_lengths(fn, pack) for pack in packs)


# Monotone steps a length may take after its rebasing (a cast, a move, a division by a constant
# such as a pyramidal layer's halving): the longest stays the longest, mapped the same on every replica.
_SAME_ORDER_METHODS = frozenset({"cpu", "cuda", "to", "long", "int", "float", "double", "detach", "clone"})
_SAME_ORDER_OPS = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv)


def _rebased_lengths(fn, pack) -> bool:
    """Kids-reading-verification's pyramidal LSTM layers: the lengths a pack takes were bound by
    `lens = lens + x.size(1) - lens.max()` (the time dim of the pack's layout), so the chunk's longest
    sequence spans the padded width on every replica, followed back through rebindings of the same
    name that keep the order of lengths (`lens = (lens / 2).long()`, `lens.cpu()`)."""
    batch_first = keyword(pack, "batch_first")
    if batch_first is None and len(pack.args) > 2:
        batch_first = pack.args[2]
    time_dim = 1 if is_true(batch_first) else 0
    node, at = argument(pack, 1, "lengths"), pack
    for _ in range(8):
        name = _order_kept(node)
        if name is None:
            return False
        binding = reaching_binding(fn, name, at)
        if not isinstance(binding, ast.Assign):
            return False  # a parameter, or several bindings may reach
        if _shifted_to_width(binding.value, name, time_dim):
            return True
        node, at = binding.value, binding.value
        if _order_kept(node) != name:
            return False
    return False


def _order_kept(node) -> str | None:
    """The name ``node`` computes from through ``_SAME_ORDER_METHODS`` and arithmetic with a
    positive constant (`(lens / 2).long()`: `lens`), or None."""
    while True:
        if isinstance(node, ast.Name):
            return node.id
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in _SAME_ORDER_METHODS:
            node = node.func.value
        elif isinstance(node, ast.BinOp) and isinstance(node.op, _SAME_ORDER_OPS) \
                and _positive_constant(node.right):
            node = node.left
        elif isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mult)) \
                and _positive_constant(node.left):
            node = node.right
        else:
            return None


def _positive_constant(node) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) in (int, float) and node.value > 0


def _shifted_to_width(value, name: str, time_dim: int) -> bool:
    """`name + x.size(d) - name.max()` in any order of its terms (`.max()`, `max(name)`,
    `torch.max(name)`, `.item()` after it), with d the time dim of the packed layout."""
    terms = list(_signed_terms(value, 1))
    if len(terms) != 3:
        return False
    kinds = sorted((sign, _term_kind(node, name, time_dim)) for sign, node in terms)
    return kinds == [(-1, "max"), (1, "name"), (1, "width")]


def _signed_terms(node, sign: int):
    """(sign, term) of a sum (`a + b - c`: (1, a), (1, b), (-1, c))."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
        yield from _signed_terms(node.left, sign)
        yield from _signed_terms(node.right, sign if isinstance(node.op, ast.Add) else -sign)
    else:
        yield sign, node


def _term_kind(node, name: str, time_dim: int) -> str | None:
    if isinstance(node, ast.Name):
        return "name" if node.id == name else None
    if _size_owner(node) is not None:  # `x.size(d)`, `x.shape[d]`
        index = node.slice if isinstance(node, ast.Subscript) else node.args[0] if len(node.args) == 1 else None
        return "width" if isinstance(index, ast.Constant) and index.value == time_dim else None
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "item" \
            and not node.args:
        node = node.func.value
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "max" \
            and not node.args and not node.keywords and isinstance(node.func.value, ast.Name) \
            and node.func.value.id == name:
        return "max"  # `name.max()`
    if isinstance(node, ast.Call) and len(node.args) == 1 and not node.keywords \
            and isinstance(node.args[0], ast.Name) and node.args[0].id == name \
            and (isinstance(node.func, ast.Name) and node.func.id == "max"
                 or isinstance(node.func, ast.Attribute) and node.func.attr == "max"
                 and isinstance(node.func.value, ast.Name) and node.func.value.id == "torch"):
        return "max"  # `max(name)`, `torch.max(name)`
    return None


def _from_lengths(node, fn, depth) -> bool:
    """Is the value computed from a lengths tensor (`lengths[0]`, `lengths.max()`, `max(lens)`)?

    Local names are followed to what they are bound to, so `total_length = x.size(1)` is the
    padded size it is (the same on every replica), whatever the local is called.
    """
    if depth > 4:
        return False
    if isinstance(node, ast.Name):
        values = fn.local_values.get(node.id)
        if values:
            return any(_from_lengths(v, fn, depth + 1) for v in values)
        return "len" in node.id.lower()  # a parameter or global named like a lengths tensor
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("size", "dim"):
        return False  # a padded tensor's size
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "shape":
        return False
    return any(_from_lengths(child, fn, depth) for child in ast.iter_child_nodes(node)
               if isinstance(child, ast.expr))


def _repadded_to_argument(fn, call) -> bool:
    """After unpacking, `if out.size(1) != x_mask.size(1): out = torch.cat([out, padding], 1)`
    (DrQA's StackedBRNN): the output is padded up to the time length of an argument of this
    function, which DataParallel scattered whole along time, so every replica returns the same
    length."""
    params = {a.arg for a in (*fn.node.args.posonlyargs, *fn.node.args.args, *fn.node.args.kwonlyargs)}
    for node in fn.nodes(ast.If):
        if node.lineno <= call.lineno or not isinstance(node.test, ast.Compare) or len(node.test.ops) != 1 \
                or not isinstance(node.test.ops[0], (ast.NotEq, ast.Lt, ast.Gt)):
            continue
        sides = [node.test.left, node.test.comparators[0]]
        owners = [_size_owner(side) for side in sides]
        if None in owners:
            continue
        for out, other in (owners, owners[::-1]):
            if other in params and out not in params and any(
                    isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == out for t in stmt.targets)
                    for stmt in node.body):
                return True
    return False


# Reductions over the time dim to which the zero steps of the padding add nothing (a mean
# divides by the padded length, a max can pick a padded zero: neither).
_REDUCTIONS = frozenset({"sum", "nansum"})


def _pooled_over_time_before_return(model, fn, call) -> bool:
    """CookGAN's SentEncoder: the unpacked batch-first output (and what is computed from it) is used
    only as the argument of a submodule of this file whose forward returns a sum over dim 1
    (attention pooling with the padded steps masked), so the per-replica padded length never reaches forward's result.
    Any other use of it (returned, stored, handed to anything else) keeps the finding."""
    if not is_true(keyword(call, "batch_first")) and not (len(call.args) > 1 and is_true(call.args[1])):
        return False
    statement = next((s for s in fn.nodes(ast.Assign) if call in ast.walk(s.value)), None)
    if statement is None or len(statement.targets) != 1:
        return False
    target = statement.targets[0]
    first = target.elts[0] if target.__class__ in (ast.Tuple, ast.List) and target.elts else target
    if first.__class__ is not ast.Name:
        return False
    flow = _PaddedFlow(model, statement, first.id)
    try:
        flow.run(fn.node.body, frozenset())
    except _Escapes:
        return False
    return any(flow.pools(node) for node in fn.nodes(ast.Call))


class _PaddedFlow:
    """Where the value an unpacking statement binds to ``name`` goes in its function. (A class,
    not nested closures: a recursive closure is a reference cycle that outlives the analysis.)"""

    def __init__(self, model, statement, name):
        self.model, self.statement, self.name = model, statement, name
        self.poolers = {}

    def pools(self, node) -> bool:
        """`self.<attr>(...)` of a pooling submodule (``_pooling_submodule``)."""
        func = node.func if node.__class__ is ast.Call else None
        if func.__class__ is not ast.Attribute or func.value.__class__ is not ast.Name or func.value.id != "self":
            return False
        if func.attr not in self.poolers:
            self.poolers[func.attr] = _pooling_submodule(self.model, func.attr)
        return self.poolers[func.attr]

    def mentions(self, node, tainted) -> bool:
        if node.__class__ is ast.Name:
            return node.id in tainted
        if self.pools(node):
            return False
        return any(self.mentions(child, tainted) for child in ast.iter_child_nodes(node))

    def run(self, block, tainted):
        """The names holding the padded output after `block`, path by path (a branch's rebinding
        holds only on its own path); raises _Escapes where another use of it is met."""
        for stmt in block:
            cls = stmt.__class__
            if stmt is self.statement:
                tainted = tainted | {self.name}
            elif cls is ast.Assign and all(t.__class__ is ast.Name for t in stmt.targets):
                names = {t.id for t in stmt.targets}
                tainted = tainted | names if self.mentions(stmt.value, tainted) else tainted - names
            elif cls is ast.If:
                tainted = self.run(stmt.body, tainted) | self.run(stmt.orelse, tainted)
            elif cls in (ast.For, ast.While):
                once = self.run(stmt.body, tainted)
                tainted = tainted | once | self.run(stmt.body, once) | self.run(stmt.orelse, tainted | once)
            elif cls in (ast.With, ast.AsyncWith):
                tainted = self.run(stmt.body, tainted)
            elif cls is ast.Try:
                body = self.run(stmt.body, tainted)
                tainted = body | self.run(stmt.orelse, body)
                for handler in stmt.handlers:
                    tainted |= self.run(handler.body, tainted)
                tainted = self.run(stmt.finalbody, tainted)
            elif cls in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef):
                continue
            elif self.mentions(stmt, tainted):
                raise _Escapes  # returned, stored or used elsewhere
        return tainted


class _Escapes(Exception):
    """The padded output reaches something other than a pooling submodule."""


def _pooling_submodule(model, attr) -> bool:
    """Is self.<attr> built from a class of this file whose forward returns only a sum over dim 1
    (`out.sum(dim=1)`, directly or through one local), with any softmax over it masked
    (`masked_fill`, CookGAN's AttentionLayer masks the zero steps)?"""
    facts = model.attrs.get(attr)
    if facts is None:
        return False
    classes = {value.func.id for _, value, _ in facts.assignments
               if value.__class__ is ast.Call and value.func.__class__ is ast.Name}
    if len(classes) != 1 or len(facts.assignments) != 1:
        return False
    info = model.ctx.classes.get(classes.pop())
    forward = info.methods.get("forward") if info is not None else None
    if forward is None:
        return False
    nodes = list(ast.walk(forward))
    returns = [n for n in nodes if n.__class__ is ast.Return]
    locals_ = model.ctx.function(forward, info).local_values
    if not returns or not all(r.value is not None and _over_dim_one(r.value, locals_) for r in returns):
        return False
    # Attention weights normalised over time count the padded steps unless they are masked out.
    called = {n.func.attr if n.func.__class__ is ast.Attribute else getattr(n.func, "id", None)
              for n in nodes if n.__class__ is ast.Call}
    return not called & _NORMALISED or bool(called & _MASKING)


_NORMALISED = frozenset({"softmax", "log_softmax", "softmin", "normalize"})
_MASKING = frozenset({"masked_fill", "masked_fill_"})


def _over_dim_one(node, locals_, depth=0) -> bool:
    if node.__class__ is ast.Name and depth == 0:
        values = locals_.get(node.id)
        return bool(values) and _over_dim_one(values[-1], locals_, 1)  # (its last binding before the return)
    if node.__class__ is not ast.Call or node.func.__class__ is not ast.Attribute or node.func.attr not in _REDUCTIONS:
        return False
    receiver = node.func.value  # `torch.sum(x, 1)` or `x.sum(1)`
    dim = dim_argument(node, 1 if receiver.__class__ is ast.Name and receiver.id == "torch" else 0)
    return dim.__class__ is ast.Constant and dim.value == 1


# Constructors of a new tensor whose shape their arguments give.
_ALLOCATORS = frozenset({"zeros", "ones", "empty", "full", "new_zeros", "new_ones", "new_empty", "new_full"})


def _copied_into_argument_sized_buffer(fn, call) -> bool:
    """After unpacking, `x_pad = torch.zeros([B, C, m.shape[-1]]); x_pad[:, :, :x.shape[-1]] = x;
    x = x_pad` (StyleTTS2's encoders): the output is copied into a new tensor sized, past the batch
    dim, by an argument of this function (or a local that only reshapes or moves one: `m =
    m.to(dev).unsqueeze(1)`), which DataParallel scattered whole along time, so every replica
    returns the same length. A buffer sized by anything else (the chunk's own lengths) keeps the
    finding."""
    shared = _argument_views(fn)
    after = [node for node in fn.nodes(ast.Assign) if node.lineno > call.lineno]
    for node in after:
        if len(node.targets) != 1 or node.targets[0].__class__ is not ast.Name \
                or node.value.__class__ is not ast.Call or node.value.func.__class__ not in (ast.Attribute, ast.Name):
            continue
        func = node.value.func
        if (func.attr if func.__class__ is ast.Attribute else func.id) not in _ALLOCATORS:
            continue
        sizes = [e for arg in node.value.args for e in (arg.elts if arg.__class__ in (ast.List, ast.Tuple) else [arg])]
        if not any(_size_owner(e) in shared and not _size_index_is_zero(e) for e in sizes):
            continue
        buffer = node.targets[0].id
        filled = any(isinstance(t, ast.Subscript) and t.value.__class__ is ast.Name and t.value.id == buffer
                     for other in after for t in other.targets)
        if filled:
            return True
    return False


# Methods whose result's sizes depend on the chunk's values, not on the argument's sizes.
_DATA_DEPENDENT_SIZE = frozenset({"nonzero", "unique", "unique_consecutive", "masked_select", "argwhere"})


def _argument_views(fn) -> set[str]:
    """The parameters of fn, and locals bound only to a chain of method calls on one of them
    (`m.to(dev).unsqueeze(1)`, `mask.float()`): tensors whose non-batch sizes are the argument's."""
    params = set(parameters_of(fn))
    views = set(params)
    for name, values in fn.local_values.items():
        roots = set()
        for value in values:
            while value.__class__ is ast.Call and value.func.__class__ is ast.Attribute:
                if value.func.attr in _DATA_DEPENDENT_SIZE:
                    break
                value = value.func.value
            roots.add(value.id if value.__class__ is ast.Name else None)
        if name in params and roots - {name}:
            views.discard(name)  # a parameter rebound to something else
        elif roots and roots <= params:
            views.add(name)
    return views


def _size_index_is_zero(node) -> bool:
    """`x.size(0)` or `x.shape[0]`: the batch dim, which differs per chunk."""
    index = node.args[0] if node.__class__ is ast.Call and node.args else getattr(node, "slice", None)
    return index.__class__ is ast.Constant and index.value == 0


def _size_owner(node) -> str | None:
    """`x` in `x.size(d)` or `x.shape[d]`."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "size" \
            and isinstance(node.func.value, ast.Name):
        return node.func.value.id
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "shape" \
            and isinstance(node.value.value, ast.Name):
        return node.value.value.id
    return None
