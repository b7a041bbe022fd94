"""
## What it does
Flags sequence-first layers applied to forward's inputs: `nn.LSTM`, `nn.GRU`, `nn.RNN`
without `batch_first=True`, and `nn.Transformer`, `nn.TransformerEncoder/Decoder`,
`nn.TransformerEncoderLayer/DecoderLayer` and `nn.MultiheadAttention` with the
default `batch_first=False`, when the layer's input comes from forward's arguments
without a transpose on the way. Not flagged when the class is wrapped with
`DataParallel(..., dim=k)`, k not 0, in any scanned file (or the file wraps a model with `dim=1`).
A `batch_first` handed on from a constructor option (`batch_first=batch_first`, `self.batch_first`)
is read as the class is built: a parameter defaulting to True makes the layer batch-first unless a
construction in its file passes another constant; a required one is what every construction in its
file passes (True: reported only where another scanned file builds or imports the class); one that
defaults to False, or that no construction shows, stays sequence-first.

Also flags a hand-written recurrence in forward's code: a loop over dim 0 of forward's input
(`for k in range(x.shape[0])`, `x.size(0)`, `len(x)`) that carries a state from step to step,
feeding what step k-1 wrote to one of the model's layers or a matrix product in step k
(`h = torch.tanh(wx[k] + self.uh(h))`). The recurrence shows that dim 0 is time; a loop over dim 0
that carries no such state (per-sample work on a batch-first input) is not flagged.

Also flags the functional form inside a module's forward code: `nn.parallel.data_parallel(self.rnn,
x.permute(2, 0, 1), ...)`, or a helper function of the project that passes its arguments on to it
(crnn.pytorch's `utils.data_parallel(self.rnn, conv, self.ngpu)`), where the module holds such a
sequence-first layer (itself, or inside a module of the same file, alone or in an `nn.Sequential`)
and the input is a reorder that puts another dim first: the input is time-major, and the scatter
splits it along time wherever that call runs, whether or not anything wraps the class.

## Why is this bad?
DataParallel splits inputs along dim 0. For a `(T, B, F)` input that is *time*: every
replica processes the whole batch over a slice of the time steps, and the outputs are
concatenated back along time. Shapes look right and nothing fails; the model is
silently wrong (an LSTM's state never crosses the split, attention sees half the
sequence).

## How to fix
Construct the layer with `batch_first=True` and feed `(B, T, F)` inputs, or transpose
inside forward, or use `DataParallel(model, dim=1)` consistently for inputs *and*
outputs.
"""

from __future__ import annotations

import ast

from dpcheck.analysis.dataflow import (
    UNASSIGNED,
    built_outside_requirement,
    is_true,
    keyword,
    on_as_built,
    parameters_of,
    straight_line_value,
)
from dpcheck.analysis.functional import functional_calls_by_class, stored_constructions
from dpcheck.analysis.model_class import file_models
from dpcheck.analysis.outputs import gathered_class
from dpcheck.analysis.wrapping import batch_dim_is_zero
from dpcheck.findings import ObservationKind as K
from dpcheck.findings import Severity
from dpcheck.rule import Rule

_SEQ_FIRST = frozenset({"LSTM", "GRU", "RNN", "Transformer", "TransformerEncoder", "TransformerDecoder",
                        "TransformerEncoderLayer", "TransformerDecoderLayer", "MultiheadAttention"})
_TRANSPOSES = frozenset({"transpose", "permute", "t", "swapaxes", "swapdims", "movedim"})
_MATMULS = frozenset({"matmul", "mm", "bmm", "addmm", "linear"})


class SequenceFirstLayout(Rule):
    code = "DP501"
    name = "sequence-first-layout"
    severity = Severity.ERROR
    wrapper_method = "scatter"
    forward_code_only = True
    confirms = frozenset({K.ARGUMENT_NOT_BATCH_SPLIT, K.OUTPUT_SHAPE_DIFFERS, K.VALUES_DIFFER, K.GRADS_DIFFER})
    summary = "A sequence-first RNN/Transformer on forward inputs: DataParallel splits time, not batch"
    fix_hint = "Use batch_first=True (and (B, T, F) inputs), or DataParallel(model, dim=1) consistently"
    bad_example = """
        class Tagger(nn.Module):
            def __init__(self):
                super().__init__()
                self.lstm = nn.LSTM(8, 16)

            def forward(self, x):
                out, _ = self.lstm(x)
                return out
    """
    good_example = """
        class Tagger(nn.Module):
            def __init__(self):
                super().__init__()
                self.lstm = nn.LSTM(8, 16, batch_first=True)
                self.attn = nn.MultiheadAttention(16, 2)

            def forward(self, x):
                out, _ = self.lstm(x)
                seq = out.transpose(0, 1)
                attended, _ = self.attn(seq, seq, seq)
                return attended.transpose(0, 1)
    """

    def check_file(self, ctx):
        # A file rule: the functional call runs where it is written, whether or not anything wraps the
        # class that makes it (a class that parallelises its own submodule is no wrapped model itself).
        calls = functional_calls_by_class(ctx)
        for model in file_models(ctx) if calls else ():
            if model.name in calls:
                yield from self._functional_scatter(model, calls[model.name])

    def check_class(self, model):
        if _dim1_wrapping(model.ctx) or not gathered_class(model) or not batch_dim_is_zero(model):
            return  # only the wrapped model's own inputs are scattered, and only along dim 0
        layers = {name: (kind, built_by) for name, facts in model.attrs.items()
                  for built_by in [set()] for kind in [_seq_first_kind(model, facts, built_by)] if kind}
        for fn in model.in_forward:
            inputs = set(parameters_of(fn)) - _packed_parameters(fn)
            for loop in fn.nodes(ast.For):
                found = _hand_written_recurrence(loop, fn, inputs, model)
                if found is not None:
                    source, state = found
                    yield self.violation(loop.iter, f"a hand-written recurrence steps over dim 0 of forward's input "
                                         f"`{source}`, carrying `{state}` from step to step: dim 0 is time here, "
                                         "and DataParallel splits it, so each replica restarts the recurrence "
                                         "on its own slice of the sequence")
            for call in fn.nodes(ast.Call) if layers else ():
                attr = fn.self_attr(call.func)
                if attr in layers and call.args and _from_inputs(call.args[0], fn, inputs, 0):
                    kind, built_by = layers[attr]
                    yield self.violation(call, f"`self.{attr}` is a {kind} with batch_first=False "
                                         "applied to forward's input: DataParallel splits dim 0, which "
                                         "is time for this layer", requires=built_outside_requirement(built_by))

    def _functional_scatter(self, model, calls):
        """`data_parallel(self.rnn, x.permute(2, 0, 1), ...)` in forward's code (torch's functional form,
        or a project helper that passes them on): a time-major input scattered along dim 0 to a module
        that holds a sequence-first layer."""
        reported: dict[int, tuple] = {}
        for found in calls:
            built_by: set[str] = set()
            kind = _held_seq_first(model, found.attr, built_by)
            reorder = _time_first_reorder(found.inputs, found.fn) if kind else None
            if reorder is None:
                continue
            _, _, _, conditions, built = reported.setdefault(id(found.call), (found, kind, reorder, set(), set()))
            conditions.add(found.requires)
            built |= built_by
        for found, kind, reorder, conditions, built_by in reported.values():
            # Torch's own call holds on no condition; a helper's on any reading of its parameters.
            requires = () if () in conditions else (frozenset(c for r in conditions for c in r[0]),)
            requires = ((model.requires,) if model.requires else ()) + requires + built_outside_requirement(built_by)
            yield self.violation(found.call, f"`{ast.unparse(found.module)}` holds a {kind} with batch_first=False "
                                 f"and runs under the functional data_parallel on `{ast.unparse(reorder)}`, whose "
                                 "dim 0 is time: the scatter splits the sequence, and each replica runs over a "
                                 "slice of it", requires=requires)


def _hand_written_recurrence(loop: ast.For, fn, inputs, model) -> tuple[str, str] | None:
    """(input, state) where ``loop`` steps over dim 0 of a forward input (`for k in range(x.shape[0])`,
    `x.size(0)`, `len(x)`) and carries a state from step to step: a name the body reads before it
    rebinds it, bound before the loop, and fed to one of the model's layers or a matrix product (a
    learned transform of the previous step's state, not a running sum or an offset). Only a recurrence
    shows that dim 0 is time; a loop over dim 0 that carries nothing may be per-sample work on a batch."""
    source = _dim0_extent(loop.iter)
    if not isinstance(loop.target, ast.Name) or source is None or not _input_layout(source, fn, inputs):
        return None
    stores: dict[str, ast.stmt] = {}
    for stmt in _statements(loop.body):
        targets = stmt.targets if isinstance(stmt, ast.Assign) else \
            [stmt.target] if isinstance(stmt, (ast.AugAssign, ast.AnnAssign)) else []
        for target in targets:
            for name in ast.walk(target):
                if isinstance(name, ast.Name):
                    stores.setdefault(name.id, stmt)
    before_loop = {n.id for n in fn.nodes(ast.Name) if isinstance(n.ctx, ast.Store) and n.lineno < loop.lineno}
    for stmt in loop.body:
        for read in ast.walk(stmt):
            first = stores.get(read.id) if isinstance(read, ast.Name) and isinstance(read.ctx, ast.Load) else None
            if first is not None and read.id in before_loop and read.id != source.id \
                    and _read_first(read, first, fn) and _transformed(read, fn, model):
                return source.id, read.id
    return None


def _dim0_extent(iterable) -> ast.Name | None:
    """`x` of `range(x.shape[0])`, `range(x.size(0))`, `range(len(x))` (also as a range's stop)."""
    if not (isinstance(iterable, ast.Call) and isinstance(iterable.func, ast.Name) and iterable.func.id == "range"
            and 1 <= len(iterable.args) <= 2):
        return None
    stop = iterable.args[-1]
    if isinstance(stop, ast.Subscript) and isinstance(stop.slice, ast.Constant) and stop.slice.value == 0 \
            and isinstance(stop.value, ast.Attribute) and stop.value.attr == "shape":
        held = stop.value.value
    elif isinstance(stop, ast.Call) and isinstance(stop.func, ast.Attribute) and stop.func.attr == "size" \
            and len(stop.args) == 1 and isinstance(stop.args[0], ast.Constant) and stop.args[0].value == 0:
        held = stop.func.value
    elif isinstance(stop, ast.Call) and isinstance(stop.func, ast.Name) and stop.func.id == "len" \
            and len(stop.args) == 1:
        held = stop.args[0]
    else:
        return None
    return held if isinstance(held, ast.Name) else None


def _input_layout(source: ast.Name, fn, inputs) -> bool:
    """Is ``source`` forward's input in the layout it was passed in: the input itself, rebound only
    without a transpose, or a tensor that flows from one (``_from_inputs``)?"""
    if source.id in inputs:
        return not any(isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                       and call.func.attr in _TRANSPOSES
                       for value in fn.local_values.get(source.id, ()) for call in ast.walk(value))
    return _from_inputs(source, fn, inputs, 0)


def _statements(body):
    for stmt in body:
        yield stmt
        for field in ("body", "orelse", "finalbody"):
            yield from _statements(getattr(stmt, field, ()) or ())


def _read_first(read: ast.Name, store: ast.stmt, fn) -> bool:
    """Does ``read`` run before ``store``, the body's first rebinding of its name, in a step?"""
    value = getattr(store, "value", None)
    if value is not None and any(node is read for node in ast.walk(value)):
        return not isinstance(store, ast.AugAssign)  # `h = f(h)` reads the old h; `s += v` accumulates
    return (read.lineno, read.col_offset) < (store.lineno, store.col_offset)


def _transformed(read: ast.Name, fn, model) -> bool:
    """Is ``read`` fed to one of the model's layers (`self.u(h)`, `self.u[i](torch.cat([h, x_k]))`) or
    to a matrix product (`h @ W`, `torch.matmul(h, W)`) in its statement?"""
    node, parent = read, fn.parent(read)
    while parent is not None and not isinstance(parent, ast.stmt):
        if isinstance(parent, ast.BinOp) and isinstance(parent.op, ast.MatMult):
            return True
        if isinstance(parent, ast.Call) and node is not parent.func:
            func = parent.func
            while isinstance(func, ast.Subscript):
                func = func.value
            attr = fn.self_attr(func)
            if attr is not None and model.attrs.get(attr) and "module" in model.attrs[attr].kinds \
                    or attr is None and isinstance(func, ast.Attribute) and func.attr in _MATMULS:
                return True
        node, parent = parent, fn.parent(parent)
    return False


def _held_seq_first(model, attr: str | None, built_by: set[str], depth: int = 0) -> str | None:
    """The sequence-first layer `self.<attr>` is or holds: a torch layer (``_seq_first_kind``), or one
    of a module of this file built there, alone or in an `nn.Sequential`/`nn.ModuleList`."""
    facts = model.attrs.get(attr) if attr is not None else None
    if facts is None or depth > 2:
        return None
    kind = _seq_first_kind(model, facts, built_by)
    if kind:
        return kind
    classes = {m.name: m for m in file_models(model.ctx)}
    for built in stored_constructions(model, attr):
        part = classes.get(built.func.id) if isinstance(built.func, ast.Name) else None
        if part is not None and part is not model:
            kind = next((k for name in part.attrs if (k := _held_seq_first(part, name, built_by, depth + 1))), None)
            if kind:
                return f"{kind} (in `{part.name}`)"
    return None


def _time_first_reorder(node, fn) -> ast.Call | None:
    """The reorder that puts another dim first (`x.permute(2, 0, 1)`, `x.transpose(0, 1)`), that
    ``node`` is or that straight-line code binds the name ``node`` to; else None."""
    if isinstance(node, ast.Name):
        node = straight_line_value(fn, node)
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
        return None
    args, attr = node.args, node.func.attr
    if attr == "permute" and args and isinstance(args[0], ast.Constant) and type(args[0].value) is int \
            and args[0].value > 0:
        return node
    if attr in ("transpose", "swapaxes", "swapdims") and len(args) == 2 and all(
            isinstance(a, ast.Constant) and type(a.value) is int and a.value >= 0 for a in args) \
            and 0 in (args[0].value, args[1].value) and args[0].value != args[1].value:
        return node
    return None


def _seq_first_kind(model, facts, built_by: set[str]) -> str | None:
    """`nn.<kind>` of the sequence-first layer ``facts`` says the class builds in that attribute, else
    None. A `batch_first` the constructor hands on from an option (`batch_first=batch_first`, or
    `self.batch_first`) is read as the class is built (``on_as_built``): its default, unless a
    construction in the file passes another constant; for a required one, what every construction
    in the file passes, the classes that decided it going into ``built_by`` (reported only where
    another scanned file builds one of them). An option nothing decides stays sequence-first."""
    for _, value, where in facts.assignments:
        if not isinstance(value, ast.Call):
            continue
        name = model.ctx.resolve(value.func) or ""
        last = name.rsplit(".", 1)[-1]
        if not name.startswith("torch.nn.") or last not in _SEQ_FIRST:
            continue
        flag = keyword(value, "batch_first")
        decided: set[str] = set()
        if is_true(flag) or isinstance(flag, (ast.Name, ast.Attribute)) and on_as_built(model, where, flag, decided):
            if not decided:
                return None
            built_by |= decided
        if last in ("TransformerEncoder", "TransformerDecoder") and value.args:
            layer = value.args[0]
            if isinstance(layer, ast.Call) and is_true(keyword(layer, "batch_first")):
                return None
            if isinstance(layer, ast.Name):  # the layer was built in a local first
                for fn in model.all_methods:
                    for v in fn.local_values.get(layer.id, ()):
                        if isinstance(v, ast.Call) and is_true(keyword(v, "batch_first")):
                            return None
        return f"nn.{last}"
    return None


def _from_inputs(node, fn, inputs, depth) -> bool:
    """Does the tensor ``node`` flow from forward's arguments with no transpose on the way?

    Follows the data (names, receivers of tensor methods, the first argument of layers
    and torch functions), not sizes: `q.expand(-1, x.shape[0], -1)` is not "from x".
    """
    if depth > 8:
        return False
    if isinstance(node, ast.Name):
        value = straight_line_value(fn, node)
        if value is UNASSIGNED:
            return node.id in inputs
        if value is not None:  # the one value straight-line code gives it here (`x = x.permute(1, 0, 2)`)
            return _from_inputs(value, fn, inputs, depth + 1)
        if node.id in fn.local_values:
            return any(_from_inputs(v, fn, inputs, depth + 1) for v in fn.local_values[node.id])
        return node.id in inputs
    if isinstance(node, ast.Attribute):
        return node.attr not in ("T", "mT") and fn.self_attr(node) is None \
            and _from_inputs(node.value, fn, inputs, depth + 1)
    if isinstance(node, ast.Subscript):
        return _from_inputs(node.value, fn, inputs, depth + 1)
    if isinstance(node, ast.BinOp):
        return _from_inputs(node.left, fn, inputs, depth + 1) or _from_inputs(node.right, fn, inputs, depth + 1)
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in _TRANSPOSES:
            return False
        if isinstance(func, ast.Name) and func.id == "rearrange":
            return False
        if ast.unparse(func).endswith(("pack_padded_sequence", "pack_sequence")):
            # Packed from a padded input: sequence-first unless packed with batch_first=True.
            return not is_true(keyword(node, "batch_first")) and bool(node.args) \
                and _from_inputs(node.args[0], fn, inputs, depth + 1)
        if isinstance(func, ast.Attribute) and fn.self_attr(func) is None and not _is_namespace(func.value):
            return _from_inputs(func.value, fn, inputs, depth + 1)  # x.float(), x.view(...)
        return bool(node.args) and _from_inputs(node.args[0], fn, inputs, depth + 1)  # self.embed(x), F.relu(x)
    return False


def _packed_parameters(fn) -> set[str]:
    args = fn.node.args
    return {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs
            if a.annotation is not None and "PackedSequence" in ast.unparse(a.annotation)}


def _is_namespace(node) -> bool:
    return isinstance(node, ast.Name) and node.id in ("torch", "F", "nn", "functional") or (
        isinstance(node, ast.Attribute) and node.attr in ("functional", "nn"))


def _dim1_wrapping(ctx) -> bool:
    for node in ctx.dataparallel_calls:
        dim = keyword(node, "dim")
        if isinstance(dim, ast.Constant) and dim.value == 1:
            return True
    return False
