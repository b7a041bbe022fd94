"""
## What it does
Flags `x.squeeze()` and `torch.squeeze(x)` with no dim, in code that runs during
`forward`, on tensors computed from forward's inputs.

## Why is this bad?
DataParallel hands each replica `ceil(B/N)` samples, and the last one fewer; with a
batch that does not divide evenly (the last batch of an epoch, evaluation) a replica
can get a single sample. `squeeze()` then removes the batch dimension too: that
replica's output has one dimension less, and gather fails with `Expected all input
tensors to have the same number of dimensions`, or the result broadcasts silently.

Not flagged where the squeezed value goes on (through `v = v[mask]` re-bindings) into
torchvision's `nms`/`batched_nms`, which take 1-D scores and (N, 4) boxes: squeezing a batch
dim for them means the path runs with one sample only, and a batch of one reaches a single
replica whole, as it would unwrapped.

Nor where only the squeezed value's rank is read (`if torch.squeeze(x).dim() == 1:`), nor in
either arm of such a test on the same tensor: the code tells the one-sample case apart by what the
squeeze removes and handles it in its own arm (`x = torch.squeeze(x, dim=1)`).

Nor a squeeze of rows a boolean mask selected (`tids = tids[emb_mask]` then `tids.squeeze()`, the
mask bound only to a comparison, its `~`/`&`/`|`, or `.any`/`.all`/`.max`/`.min` over a dim of
one): boolean indexing flattens the masked dims, so the leading dim counts matches across the
replica's chunk, not its samples. Rows picked by an index tensor (`tids[best]`) stay reported.

The positions where a mask over the chunk's rows holds, `(kind == 0).nonzero().squeeze()`, used to
index a batch tensor (`x[idx]`), are reported too: the count of matches follows the chunk's samples
(one proposal of a kind per video), and a replica with one match squeezes its (1, 1) index to 0-dim,
so `x[idx]` returns one row without its leading dim (`index_select` keeps it: not reported).

Nor where the squeezed value is used only in elementwise arithmetic with a batch-major tensor of
the chunk (`self.w(x).squeeze() * mask`, `out1 = torch.squeeze(h)` then `out1 + out2`, or a helper
of the file that does only that with it, `mask_logits(self.w(x).squeeze(), mask)`): broadcasting
with that operand's leading dim of one gives a one-sample replica its batch dim back. A number or a
layer's parameter as the other operand has no batch dim and stays reported.

In a loss module (named `*Loss`, `*Criterion`, `*CE`..., owning no layers) it is reported only
where a scanned file builds the loss inside a module or wraps it: a criterion a script applies
to the gathered output sees the whole batch on one device.

## How to fix
Name the dimension: `x.squeeze(-1)`, `x.squeeze(dim=1)`.
"""

from __future__ import annotations

import ast

from dpcheck.analysis.bindings import reaching_assignment
from dpcheck.analysis.classes import IN_MODEL_CONDITION
from dpcheck.analysis.dataflow import CONVERSIONS, argument, is_batch_tensor, statement_block
from dpcheck.analysis.outputs import is_loss_module
from dpcheck.findings import Applicability, Severity
from dpcheck.findings import ObservationKind as K
from dpcheck.rule import Rule


class SqueezeWithoutDim(Rule):
    code = "DP603"
    name = "squeeze-without-dim"
    severity = Severity.WARNING
    confirms = frozenset({K.OUTPUT_SHAPE_DIFFERS, K.SCALAR_OUTPUT_SHAPE_DIFFERS, K.GATHER_FAILED})
    summary = "squeeze() without a dim drops the batch dim of a one-sample replica chunk"
    fix_hint = "Pass the dimension to squeeze: x.squeeze(-1)"
    bad_example = """
        class Scorer(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 1)

            def forward(self, x):
                return self.fc(x).squeeze()
    """
    good_example = """
        class Scorer(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 1)

            def forward(self, x):
                return self.fc(x).squeeze(-1)
    """

    def check_class(self, model):
        if is_loss_module(model):
            # A criterion runs on replicas only inside the wrapped model (a layer of it, or wrapped
            # itself); applied by a script to the gathered output it sees the whole batch.
            model.conditions.add(f"{IN_MODEL_CONDITION}{model.info.qualname}")
        resolve = model.ctx.resolve
        for fn in model.in_forward:
            for call in fn.nodes(ast.Call):
                func = call.func
                if isinstance(func, ast.Attribute) and func.attr == "squeeze" and not call.args \
                        and not call.keywords and resolve(func) != "torch.squeeze":
                    receiver = func.value
                elif resolve(func) == "torch.squeeze" and len(call.args) == 1 and not call.keywords:
                    receiver = call.args[0]
                else:
                    continue
                if _squeezed_match_index(receiver, call, fn):
                    yield self.violation(call, "`squeeze()` of a `nonzero()` index in forward: a DataParallel "
                                         "replica whose chunk has one match gets a 0-dim index, and the rows "
                                         "it selects lose their leading dimension")
                    continue
                if _batch_rooted(receiver, fn) and not _shape_neutral(call, fn) \
                        and not _rank_query(call, fn) and not _rank_guarded(call, receiver, fn, resolve) \
                        and not _feeds_one_sample_op(call, fn, resolve) \
                        and not _flattened_by_mask(call, fn, resolve) \
                        and not _selected_by_mask(receiver, call, fn) \
                        and not _broadcast_back(call, receiver, fn, model.ctx):
                    fix = None
                    if _single_output(receiver, fn, model):
                        fix = self.offer_fix("Squeeze only the size-1 feature dim: `squeeze(-1)`", Applicability.SAFE)
                    yield self.violation(call, "`squeeze()` without a dim in forward: a DataParallel replica "
                                         "that gets one sample loses its batch dimension", fix=fix)

    def fix(self, finding, editor):
        import libcst as cst

        call = editor.node  # `x.squeeze()`, or `torch.squeeze(x)`: the dim goes after the tensor
        if isinstance(call, cst.Call) and len(call.args) <= 1 and all(a.keyword is None for a in call.args):
            editor.replace(call, call.with_changes(args=[*call.args, cst.Arg(cst.parse_expression("-1"))]))

    def matches(self, finding, observation, ran):
        # The run failed only at a batch size other than the first (a chunk of one sample).
        return super().matches(finding, observation, ran) or (
            ran and observation.raised and "first_batch_ran" in observation.details)


def _broadcast_back(call, receiver, fn, ctx) -> bool:
    """`x.squeeze() * mask`, or `out1 = torch.squeeze(h)` ... `out = out1 + out2`: the squeezed value
    is used only as an operand of elementwise arithmetic whose other operand is a batch-major tensor
    of the chunk, which is not the squeezed value itself. For a batch of several samples the
    operation works only with that operand's leading (batch) dim meeting the squeezed value's, so
    its rank is at least as high; on a one-sample replica broadcasting puts the dropped dim of size
    one back, and the result has the shape it has unwrapped. Also through a function of the file
    that does only that with the parameter it is passed to, the other operand being a parameter it
    is passed a batch-major tensor for (QANet's `mask_logits(self.w1(x).squeeze(), mask)`)."""
    parent = fn.parent(call)
    if isinstance(parent, ast.BinOp):
        return _meets_batch_operand(call, parent, receiver, fn, ctx.resolve)
    if isinstance(parent, ast.Call) and call in parent.args:
        return _combined_by_helper(parent, parent.args.index(call), receiver, fn, ctx)
    if not (isinstance(parent, ast.Assign) and parent.value is call and len(parent.targets) == 1
            and isinstance(parent.targets[0], ast.Name)):
        return False
    name = parent.targets[0].id
    if len(fn.local_values.get(name, ())) != 1:
        return False  # rebound elsewhere: which value a read sees is unclear
    uses = [n for n in fn.nodes(ast.Name) if n.id == name and isinstance(n.ctx, ast.Load)]
    return bool(uses) and all(isinstance(fn.parent(n), ast.BinOp)
                              and _meets_batch_operand(n, fn.parent(n), receiver, fn, ctx.resolve) for n in uses)


def _combined_by_helper(helper_call, position, receiver, fn, ctx) -> bool:
    """`mask_logits(squeezed, mask)` with `def mask_logits(target, mask): mask = mask.float();
    return target * mask + ...`: every read of the helper's parameter at ``position`` is an operand
    of elementwise arithmetic with another of its parameters (bound otherwise only to a conversion
    of itself), which this call passes a batch-major tensor other than the squeezed one."""
    func = helper_call.func
    node = ctx.module_functions.get(func.id) if isinstance(func, ast.Name) else None
    if node is None or any(isinstance(a, ast.Starred) for a in helper_call.args) \
            or position >= len(node.args.posonlyargs + node.args.args):
        return False
    helper = ctx.function(node, None)
    params = [a.arg for a in node.args.posonlyargs + node.args.args]
    name = params[position]
    if helper.local_values.get(name):
        return False
    passed = dict(zip(params, helper_call.args))
    uses = [n for n in helper.nodes(ast.Name) if n.id == name and isinstance(n.ctx, ast.Load)]
    for use in uses:
        binop = helper.parent(use)
        if not (isinstance(binop, ast.BinOp) and isinstance(binop.op, _ELEMENTWISE)):
            return False
        other = binop.right if binop.left is use else binop.left
        if not (isinstance(other, ast.Name) and other.id != name and other.id in passed
                and _converted_only(other.id, helper)):
            return False
        if not _keeps_batch_dim(passed[other.id], receiver, fn, ctx.resolve):
            return False
    return bool(uses)


def _converted_only(name, fn) -> bool:
    """Every binding of parameter ``name`` in ``fn`` is a conversion of itself (`mask = mask.float()`)."""
    return all(isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) and v.func.attr in CONVERSIONS
               and isinstance(v.func.value, ast.Name) and v.func.value.id == name
               for v in fn.local_values.get(name, ()))


_ELEMENTWISE = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow)


def _meets_batch_operand(operand, binop, receiver, fn, resolve) -> bool:
    other = binop.right if binop.left is operand else binop.left
    return isinstance(binop.op, _ELEMENTWISE) and _keeps_batch_dim(other, receiver, fn, resolve)


def _keeps_batch_dim(value, receiver, fn, resolve) -> bool:
    """A batch-major tensor of the chunk that is not the squeezed value and was squeezed nowhere on
    its way (`y.squeeze()`, or a local bound to one, loses the batch dim alike: `() - ()` stays 0-dim)."""
    if not is_batch_tensor(value, fn) or ast.dump(value) == ast.dump(receiver):
        return False
    names = {n.id for n in ast.walk(value) if isinstance(n, ast.Name)}
    return not any(_is_squeeze_all(node, resolve) for node in ast.walk(value)) and not any(
        _is_squeeze_all(node, resolve) for name in names for bound in fn.local_values.get(name, ()) for node in ast.walk(bound))



_RESHAPED = frozenset({"reshape", "view", "item", "tolist"})
# Reads of a tensor's rank alone (`x.dim()`, `x.ndim`, `x.ndimension()`).
_RANK_READS = frozenset({"dim", "ndim", "ndimension"})


def _rank_query(call, fn) -> bool:
    """`torch.squeeze(x).dim()`, `x.squeeze().ndim`, `len(x.squeeze().shape)`: only the rank of the
    squeezed value is read, a number; no tensor carries the squeeze on."""
    parent = fn.parent(call)
    if not (isinstance(parent, ast.Attribute) and parent.value is call):
        return False
    if parent.attr in _RANK_READS:
        return True
    holder = fn.parent(parent)
    return parent.attr == "shape" and isinstance(holder, ast.Call) and isinstance(holder.func, ast.Name) \
        and holder.func.id == "len" and holder.args == [parent]


def _squeezed_all(node, resolve):
    """The tensor ``node`` squeezes every size-1 dim of (`x.squeeze()`, `torch.squeeze(x)`), or None."""
    if _bare_squeeze(node) and resolve(node.func) != "torch.squeeze":
        return node.func.value
    if isinstance(node, ast.Call) and len(node.args) == 1 and not node.keywords \
            and resolve(node.func) == "torch.squeeze":
        return node.args[0]
    return None


def _rank_guarded(call, receiver, fn, resolve) -> bool:
    """`if torch.squeeze(x).dim() == 1: x = torch.squeeze(x, dim=1) else: x = torch.squeeze(x)`:
    the squeeze sits in an arm of a test on the rank of the same squeeze, so the code tells the
    case where squeezing every size-1 dim removes more than it means to (a one-sample chunk) from
    the others and handles it in its own arm: which arm runs is decided by what the squeeze does,
    so the branch is the one-sample handling this rule asks for. (The value squeezed must not be
    rebound in the arm before the squeeze: then the test spoke of another tensor.)"""
    wanted = ast.dump(receiver)
    names = {n.id for n in ast.walk(receiver) if isinstance(n, ast.Name)}
    child, node = call, fn.parent(call)
    while node is not None and node is not fn.node:
        if isinstance(node, (ast.If, ast.IfExp)) and child is not node.test and any(
                _rank_query(sub, fn) and ast.dump(_squeezed_all(sub, resolve) or call) == wanted
                for sub in ast.walk(node.test) if _squeezed_all(sub, resolve) is not None):
            arm = node.body if child in (node.body if isinstance(node.body, list) else [node.body]) else node.orelse
            earlier = [s for s in (arm if isinstance(arm, list) else [arm]) if s.lineno < call.lineno]
            return not any(isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store) and n.id in names
                           for s in earlier for n in ast.walk(s))
        child, node = node, fn.parent(node)
    return False


def _bare_squeeze(node) -> bool:
    if not isinstance(node, ast.Call) or node.args or node.keywords:
        return False
    func = node.func
    return isinstance(func, ast.Attribute) and func.attr == "squeeze"


def _shape_neutral(call, fn) -> bool:
    """The lost dim cannot matter: both sides of a loss are squeezed alike
    (`loss_fct(logits.squeeze(), labels.squeeze())`), or the chain goes on to
    `.reshape(...)`/`.view(...)` (which restores the shape) or `.item()`/`.tolist()`."""
    parent = fn.parent(call)
    if isinstance(parent, ast.Call) and call in parent.args:
        tensors = [a for a in parent.args if not isinstance(a, ast.Constant)]
        return len(tensors) >= 2 and all(_bare_squeeze(a) for a in tensors)
    node = call
    while isinstance(parent, ast.Attribute) and isinstance(fn.parent(parent), ast.Call) \
            and fn.parent(parent).func is parent:
        if parent.attr in _RESHAPED:
            return True
        node = fn.parent(parent)
        parent = fn.parent(node)
    return False


# torchvision ops whose inputs have a fixed rank with no batch dim: (N, 4) boxes, (N,) scores.
_ONE_SAMPLE_OPS = frozenset({"torchvision.ops.nms", "torchvision.ops.boxes.nms",
                             "torchvision.ops.batched_nms", "torchvision.ops.boxes.batched_nms"})


def _feeds_one_sample_op(call, fn, resolve) -> bool:
    """`scores = torch.squeeze(cls[:, :, i])` ... `scores = scores[keep]` ... `nms(boxes, scores, t)`:
    the squeeze drops a batch dim of one so that an op without a batch dim accepts the tensor, so
    the path works unwrapped only with one sample, which DataParallel runs as one replica's whole
    chunk: the replica squeezes exactly what the unwrapped model squeezes."""
    target = fn.parent(call)
    if not (isinstance(target, ast.Assign) and len(target.targets) == 1 and isinstance(target.targets[0], ast.Name)):
        return False
    name = target.targets[0].id
    for use in fn.nodes(ast.Call):
        if use.lineno < call.lineno or resolve(use.func) not in _ONE_SAMPLE_OPS:
            continue
        if any(isinstance(arg, ast.Name) and arg.id == name for arg in use.args[:2]):
            return _rebound_by_indexing_only(name, call, use, fn)
    return False


def _rebound_by_indexing_only(name, start, end, fn) -> bool:
    """Between the squeeze and the op, `name` is re-bound only to an index of itself (`name = name[m]`)."""
    for assign in fn.nodes(ast.Assign):
        if not (start.lineno < assign.lineno < end.lineno):
            continue
        if any(isinstance(t, ast.Name) and t.id == name for t in assign.targets):
            value = assign.value
            if not (isinstance(value, ast.Subscript) and isinstance(value.value, ast.Name) and value.value.id == name):
                return False
    return True


_SCALAR_REDUCTIONS = frozenset({"sum", "any", "all", "numel"})


def _is_squeeze_all(node, resolve) -> bool:
    """`x.squeeze()` or `torch.squeeze(x)`: every size-1 dim removed."""
    if _bare_squeeze(node):
        return True
    return isinstance(node, ast.Call) and len(node.args) == 1 and not node.keywords \
        and resolve(node.func) == "torch.squeeze"


def _flattened_by_mask(call, fn, resolve) -> bool:
    """`scores = torch.squeeze(cls[:, :, k]); keep = scores > t; scores = scores[keep]` and
    `boxes = torch.squeeze(anchors); boxes = boxes[keep]`: until it is rebound, the squeezed value
    is only compared into a mask, reduced to a number, or indexed by a mask compared from a value
    squeezed alike; each such mask only indexes values squeezed alike or is reduced. Boolean
    indexing flattens every dim the mask covers, and all of them lose a one-sample replica's
    batch dim together, so whether squeeze dropped it changes no shape."""
    stmt = fn.parent(call)
    if not (isinstance(stmt, ast.Assign) and stmt.value is call and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name)):
        return False
    value, block = stmt.targets[0].id, statement_block(fn, stmt)
    if block is None:
        return False
    squeezed = {t.id for node in fn.nodes(ast.Assign) for t in node.targets
                if isinstance(t, ast.Name) and _is_squeeze_all(node.value, resolve)}
    masks = _masks_of(squeezed, fn)
    if not masks:
        return False
    for later in block[block.index(stmt) + 1:]:
        rebinds = _rebinds(later, value)
        if not rebinds and any(isinstance(n, ast.Name) and n.id == value and isinstance(n.ctx, ast.Store)
                               for n in ast.walk(later)):
            return False  # rebound inside a nested statement: which value later loads read is unclear
        for node in ast.walk(later.value if rebinds else later):
            if isinstance(node, ast.Name) and node.id == value and isinstance(node.ctx, ast.Load) \
                    and not (_mask_bound_from(node, fn) in masks or _indexed_by_mask(node, masks, fn)
                             or _reduced(node, fn)):
                return False
        if rebinds:
            break
    else:
        return False  # the squeezed value lives past its block
    for node in fn.nodes(ast.Name):
        if node.id in masks and isinstance(node.ctx, ast.Load):
            parent = fn.parent(node)
            indexes_squeezed = isinstance(parent, ast.Subscript) and parent.slice is node \
                and isinstance(parent.value, ast.Name) and parent.value.id in squeezed
            if not (indexes_squeezed or _reduced(node, fn)):
                return False
    return True


def _selected_by_mask(receiver, call, fn) -> bool:
    """`tids = tids[emb_mask]` then `tids.squeeze()`, with `emb_mask` a boolean mask (bound only to
    a comparison, its `~`, `&`, `|`, or `.any`/`.all`/`.max`/`.min` over a dim of such): boolean
    indexing flattens the dims the mask covers into one of the selected elements, so the leading
    dim of the squeezed value counts matches across the replica's chunk, not its samples. The
    receiver is such an indexing, or a name whose binding that reaches the call is."""
    masks = _boolean_names(fn)
    if not masks:
        return False
    if isinstance(receiver, ast.Name):
        binding = reaching_assignment(fn, receiver.id, call)
        receiver = binding.value if binding is not None else None
    return isinstance(receiver, ast.Subscript) and isinstance(receiver.slice, ast.Name) \
        and receiver.slice.id in masks


_BOOLEAN_REDUCTIONS = frozenset({"any", "all", "max", "min"})


def _boolean_names(fn) -> set[str]:
    """Names every binding of which in ``fn`` is a boolean mask (see ``_selected_by_mask``)."""
    bindings: dict[str, list[ast.AST | None]] = {}
    for node in fn.nodes(ast.Assign):
        for target in node.targets:
            if isinstance(target, ast.Name):
                bindings.setdefault(target.id, []).append(node.value)
            elif isinstance(target, ast.Tuple) and target.elts:  # `m, _ = mask.max(1)`: values, indices
                first, *rest = target.elts
                if isinstance(first, ast.Name):
                    bindings.setdefault(first.id, []).append(node.value if isinstance(node.value, ast.Call) else None)
                for other in rest:
                    if isinstance(other, ast.Name):
                        bindings.setdefault(other.id, []).append(None)
    for node in fn.nodes(ast.Name):  # bound otherwise (a loop, `+=`, a with): not known
        if isinstance(node.ctx, ast.Store) and not isinstance(fn.parent(node), (ast.Assign, ast.Tuple)):
            bindings.setdefault(node.id, []).append(None)
    masks: set[str] = set()
    changed = True
    while changed:
        changed = False
        for name, values in bindings.items():
            if name not in masks and all(v is not None and _is_mask(v, masks) for v in values):
                masks.add(name)
                changed = True
    return masks


def _is_mask(value, masks: set[str]) -> bool:
    if isinstance(value, ast.Compare):
        return True
    if isinstance(value, ast.Name):
        return value.id in masks
    if isinstance(value, ast.UnaryOp) and isinstance(value.op, (ast.Invert, ast.Not)):
        return _is_mask(value.operand, masks)
    if isinstance(value, ast.BinOp) and isinstance(value.op, (ast.BitAnd, ast.BitOr)):
        return _is_mask(value.left, masks) and _is_mask(value.right, masks)
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) \
            and value.func.attr in _BOOLEAN_REDUCTIONS and (value.args or value.keywords):
        return _is_mask(value.func.value, masks)  # over a dim: a mask of the other dims
    return False


def _masks_of(squeezed, fn) -> set[str]:
    """Names bound only to a comparison of a squeezed value with a name or constant (`keep = scores > t`)."""
    bound: dict[str, bool] = {}
    for node in fn.nodes(ast.Assign):
        for target in node.targets:
            if isinstance(target, ast.Name):
                compare = node.value
                is_mask = isinstance(compare, ast.Compare) and _simple_comparison(compare) and any(
                    isinstance(side, ast.Name) and side.id in squeezed for side in (compare.left, *compare.comparators))
                bound[target.id] = bound.get(target.id, True) and is_mask
    return {name for name, is_mask in bound.items() if is_mask}


def _simple_comparison(compare) -> bool:
    return len(compare.comparators) == 1 and all(
        isinstance(side, (ast.Name, ast.Constant)) for side in (compare.left, *compare.comparators))


def _rebinds(stmt, name) -> bool:
    return isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 \
        and isinstance(stmt.targets[0], ast.Name) and stmt.targets[0].id == name


def _mask_bound_from(node, fn) -> str | None:
    """`keep = (scores > t)`: the name a comparison of ``node`` with a constant is bound to."""
    compare = fn.parent(node)
    if not (isinstance(compare, ast.Compare) and _simple_comparison(compare)):
        return None
    assign = fn.parent(compare)
    if isinstance(assign, ast.Assign) and assign.value is compare and len(assign.targets) == 1 \
            and isinstance(assign.targets[0], ast.Name):
        return assign.targets[0].id
    return None


def _indexed_by_mask(node, masks, fn) -> bool:
    """`scores[keep]` with a mask compared from a value squeezed alike."""
    parent = fn.parent(node)
    return isinstance(parent, ast.Subscript) and parent.value is node and isinstance(parent.slice, ast.Name) \
        and parent.slice.id in masks


def _reduced(node, fn) -> bool:
    """`keep.sum()`, `scores.any()`: reduced to one number, whatever the shape."""
    parent = fn.parent(node)
    return isinstance(parent, ast.Attribute) and parent.attr in _SCALAR_REDUCTIONS \
        and isinstance(fn.parent(parent), ast.Call) and fn.parent(parent).func is parent \
        and not fn.parent(parent).args and not fn.parent(parent).keywords


_INDEX_LISTS = frozenset({"nonzero", "argwhere"})


def _squeezed_match_index(receiver, call, fn) -> bool:
    """`idx = (kind == 0).nonzero().squeeze()` then `x[idx]`: the positions where a mask of the chunk's
    rows holds, squeezed from (k, 1) to (k,), index a batch tensor. Their count follows the samples
    of the chunk (one proposal of a kind per video): a replica with one match squeezes to a 0-dim
    index, and `x[idx]` returns one row without its leading dim, which gather cannot put next to the
    other replicas' (k, ...) rows. (`index_select` keeps the dim for a 0-dim index: not reported.)"""
    func = receiver.func if isinstance(receiver, ast.Call) else None
    if not isinstance(func, ast.Attribute) or func.attr not in _INDEX_LISTS or receiver.args:
        return False
    torch_call = isinstance(func.value, ast.Name) and func.value.id == "torch"
    mask = receiver.args[0] if torch_call and receiver.args else None if torch_call else func.value
    if mask is None or not any(is_batch_tensor(n, fn) for n in ast.walk(mask) if isinstance(n, ast.Name)):
        return False
    uses = [call]
    target = fn.parent(call)
    if isinstance(target, ast.Assign) and target.value is call and len(target.targets) == 1 \
            and isinstance(target.targets[0], ast.Name):
        name = target.targets[0].id
        if len(fn.local_values.get(name, ())) != 1:
            return False  # rebound elsewhere: which value a read sees is unclear
        uses = [n for n in fn.nodes(ast.Name) if n.id == name and isinstance(n.ctx, ast.Load)]
    return any(_indexes_batch(use, fn) for use in uses)


def _indexes_batch(index, fn) -> bool:
    """Is ``index`` the subscript of a batch tensor, alone or first of a tuple (`x[idx]`, `x[idx, :]`)?"""
    parent = fn.parent(index)
    if isinstance(parent, ast.Tuple) and parent.elts and parent.elts[0] is index:
        index, parent = parent, fn.parent(parent)
    return isinstance(parent, ast.Subscript) and parent.slice is index and is_batch_tensor(parent.value, fn)


def _batch_rooted(node, fn) -> bool:
    """The receiver is computed from forward's inputs (calls like self.fc(x) included)."""
    if is_batch_tensor(node, fn):
        return True
    if isinstance(node, ast.Call):
        return any(_batch_rooted(arg, fn) for arg in node.args[:1])
    return False


def _single_output(receiver, fn, model) -> bool:
    """`self.fc(x)` where `self.fc = nn.Linear(n, 1)`: the last dim is the one of size 1."""
    if not isinstance(receiver, ast.Call):
        return False
    attr = fn.self_attr(receiver.func)
    facts = model.attrs.get(attr) if attr else None
    if facts is None or len(facts.assignments) != 1:
        return False
    value = facts.assignments[0][1]
    if not (isinstance(value, ast.Call) and (model.ctx.resolve(value.func) or "").endswith("nn.Linear")):
        return False
    out = argument(value, 1, "out_features")
    return isinstance(out, ast.Constant) and out.value == 1
