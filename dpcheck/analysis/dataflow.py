"""Small dataflow questions rules ask about a function: parameters, batch-derived names, guards."""

from __future__ import annotations

import ast
import operator
from typing import TYPE_CHECKING

from dpcheck.analysis.bindings import reaching_assignment, statements_before
from dpcheck.analysis.torch_api import FUNCTION_DEFS, RECURRENT_LAYERS
from dpcheck.analysis.tree import FunctionInfo

if TYPE_CHECKING:
    from dpcheck.analysis.model_class import ModelClass


def parameters_of(fn: FunctionInfo) -> list[str]:
    """Names of the function's parameters other than self."""
    args = fn.node.args
    names = [a.arg for a in args.posonlyargs + args.args + args.kwonlyargs]
    if args.vararg:
        names.append(args.vararg.arg)
    if args.kwarg:
        names.append(args.kwarg.arg)
    return names[1:] if names and names[0] == fn.self_name and fn.owner is not None else names


def parameter_defaults(args: ast.arguments) -> dict[str, ast.expr]:
    """Parameter name -> its default expression, for the parameters that have one (positional
    defaults belong to the last positional parameters; a keyword-only one may have none)."""
    positional = [*args.posonlyargs, *args.args]
    defaults = dict(zip([a.arg for a in positional[len(positional) - len(args.defaults):]], args.defaults))
    defaults.update((a.arg, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None)
    return defaults


_RESHAPERS = frozenset({"transpose", "permute", "t", "T", "swapaxes", "swapdims", "movedim", "mT"})


_PAIR_SWAPS = frozenset({"transpose", "swapaxes", "swapdims", "movedim"})


def moves_batch_dim(attr: ast.Attribute, fn: FunctionInfo) -> bool:
    """Is ``attr`` a reorder of dims (`_RESHAPERS`) that may move dim 0? Not `x.permute(0, 2, 1)`
    (dim 0 stays first) nor `x.transpose(1, 2)` / `torch.transpose(x, 1, 2)` with both dims
    positive constants: the batch stays in dim 0. A negative dim may be dim 0 of a tensor of
    unknown rank, so it counts as moving it."""
    if attr.attr not in _RESHAPERS:
        return False
    call = fn.parent(attr)
    if not (isinstance(call, ast.Call) and call.func is attr) or call.keywords:
        return True
    args = call.args[1:] if isinstance(attr.value, ast.Name) and attr.value.id == "torch" else call.args
    if attr.attr == "permute" and args:
        first = args[0].elts[0] if isinstance(args[0], (ast.Tuple, ast.List)) and args[0].elts else args[0]
        return not _int_constant(first, lambda v: v == 0)
    if attr.attr in _PAIR_SWAPS and len(args) == 2:
        return not all(_int_constant(a, lambda v: v > 0) for a in args)
    return True


def _int_constant(node: ast.AST, test) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) is int and test(node.value)


def batch_derived(fn: FunctionInfo) -> dict[str, bool]:
    """Local names computed from forward's inputs: name -> still batch-major (no transpose seen).

    Inputs to a DataParallel-wrapped forward are chunks along dim 0, so a value computed
    from them without a transpose keeps the batch in dim 0.
    """
    return fn.fact(_find_batch_derived)


def _find_batch_derived(fn: FunctionInfo) -> dict[str, bool]:
    derived: dict[str, bool] = {p: True for p in parameters_of(fn)}
    states: set[str] = set()  # names bound to an RNN's final states (not batch-major)
    assigns = sorted(fn.nodes(ast.Assign, ast.AnnAssign, ast.AugAssign), key=lambda n: (n.lineno, n.col_offset))
    for node in assigns:
        value = node.value
        if value is None:
            continue
        names = [n for n in fn.nodes_under(value, ast.Name) if n.id in derived]
        if not names:
            continue
        # One sample's rows (`rep[scope[i][0]:scope[i][1]]` in a loop over the bags) are no batch.
        rows = {id(n) for sub in fn.nodes_under(value, ast.Subscript) if _per_sample_rows(sub, fn)
                for n in fn.nodes_under(sub, ast.Name)} if any(isinstance(n, ast.Slice) for n in ast.walk(value)) else ()
        # One layer's state of an RNN's final states (`h_n[-1]`, `h_n[0]`) is (B, H): batch-major again.
        sources = [derived[n.id] or n.id in states and _layer_picked(n, fn) for n in names if id(n) not in rows]
        batch_major = bool(sources) and all(sources) \
            and not any(moves_batch_dim(n, fn) for n in fn.nodes_under(value, ast.Attribute)) \
            and not (isinstance(value, ast.Call) and stacks_new_leading_dim(value, fn, derived)) \
            and not _chain_drops_batch_dim(value) and not _sized_apart_from_batch(value)
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for target in targets:
            for t in fn.nodes_under(target, ast.Name):
                derived[t.id] = batch_major
            if batch_major and isinstance(target, (ast.Tuple, ast.List)) and len(target.elts) > 1 \
                    and _recurrent_call(value, fn):
                # `out, h_n = self.gru(x)`, `_, (h_n, c_n) = self.lstm(x)`: the final states are
                # shaped (layers x directions, B, H) whatever `batch_first` says: dim 0 is no batch.
                for element in target.elts[1:]:
                    for t in fn.nodes_under(element, ast.Name):
                        derived[t.id] = False
                        states.add(t.id)
    return derived


def _layer_picked(name: ast.Name, fn: FunctionInfo) -> bool:
    """`h_n[-1]`, `h_n[0]`: one constant index into dim 0 (one layer's or direction's state)."""
    parent = fn.parent(name)
    index = parent.slice if isinstance(parent, ast.Subscript) and parent.value is name else None
    if isinstance(index, ast.UnaryOp) and isinstance(index.op, ast.USub):
        index = index.operand
    return isinstance(index, ast.Constant) and type(index.value) is int


def _recurrent_call(value: ast.AST, fn: FunctionInfo) -> bool:
    """Is ``value`` a call of `self.<attr>` that its class builds as a recurrent layer (`self.<attr> =
    nn.LSTM(...)`, `GRU`, `RNN` by the constructor's last name) and nothing else?"""
    if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute)
            and isinstance(value.func.value, ast.Name) and value.func.value.id == fn.self_name
            and fn.owner is not None):
        return False
    attr = value.func.attr
    owner = fn.owner.node
    assigns = fn.tree_index.nodes_within(owner, ast.Assign) if fn.tree_index is not None and \
        owner in fn.tree_index.position else [n for n in ast.walk(owner) if isinstance(n, ast.Assign)]
    built = [stmt.value for stmt in assigns if any(isinstance(t, ast.Attribute) and t.attr == attr and isinstance(t.value, ast.Name)
                     and t.value.id == "self" for t in stmt.targets)]
    return bool(built) and all(isinstance(b, ast.Call) and (
        b.func.attr if isinstance(b.func, ast.Attribute) else getattr(b.func, "id", "")) in RECURRENT_LAYERS
        for b in built)


_DIM_REDUCTIONS = frozenset({"sum", "mean", "std", "var", "amax", "amin", "logsumexp", "prod", "median", "norm"})
_INDEX_RESULTS = frozenset({"nonzero", "argwhere"})


def _drops_batch_dim(call: ast.Call) -> bool:
    """`x.sum(0)`, `torch.mean(x, dim=0)`, `m.nonzero()`: the result's dim 0 is not the batch."""
    func = call.func
    if not isinstance(func, ast.Attribute):
        return False
    if func.attr in _INDEX_RESULTS:
        return True
    if func.attr not in _DIM_REDUCTIONS:
        return False
    module_call = isinstance(func.value, ast.Name) and func.value.id == "torch"
    dim = dim_argument(call, 1 if module_call else 0)
    return isinstance(dim, ast.Constant) and dim.value == 0 and not isinstance(dim.value, bool)


_FACTORIES = frozenset({"arange", "zeros", "ones", "full", "empty", "rand", "randn", "randint", "linspace", "eye"})


def _sized_apart_from_batch(node: ast.AST) -> bool:
    """`torch.arange(seq_len, device=x.device)`: a new tensor that mentions the input only for its
    sizes or device; its dim 0 is the batch only when sized by one (`torch.zeros(x.size(0), d)`)."""
    if isinstance(node, ast.BinOp):
        return _sized_apart_from_batch(node.left)  # `torch.arange(n) // block`
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and not (
            isinstance(node.func.value, ast.Name) and node.func.value.id == "torch"):
        node = node.func.value  # `.to(...)`, `.float()` on the new tensor
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _FACTORIES
            and isinstance(node.func.value, ast.Name) and node.func.value.id == "torch"):
        return False
    first = node.args[0] if node.args else None
    if isinstance(first, (ast.List, ast.Tuple)) and first.elts:
        first = first.elts[0]
    if first is None:
        return True
    if _leading_shape(first):
        return False  # `torch.ones(x.size()[:-1])`, `torch.zeros(x.shape)`: x's leading dims, the batch first
    text = ast.unparse(first).lower()
    return not any(t in text for t in (".size(0)", ".shape[0]", "batch", "bsz", "len("))


def _leading_shape(node: ast.AST) -> bool:
    """`x.shape`, `x.size()`, `x.shape[:2]`, `x.size()[:-1]`: a shape that starts with x's dim 0."""
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice):
        lower = node.slice.lower
        if lower is not None and not (isinstance(lower, ast.Constant) and lower.value == 0):
            return False
        node = node.value
    if isinstance(node, ast.Attribute):
        return node.attr == "shape"
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "size" \
        and not node.args and not node.keywords


def _chain_drops_batch_dim(node: ast.AST) -> bool:
    """`x.sum(0).float()`, `torch.mean(x, dim=0)`: the value itself is a batch reduction."""
    while isinstance(node, (ast.Call, ast.Attribute)):
        if isinstance(node, ast.Call) and _drops_batch_dim(node):
            return True
        if isinstance(node, ast.Attribute) and node.attr in ("expand", "expand_as", "broadcast_to"):
            return False  # `x.mean(0, keepdim=True).expand_as(x)`: back to the batch's shape
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args \
                and isinstance(node.func.value, ast.Name) and node.func.value.id in ("torch", "F"):
            node = node.args[0]  # `torch.clamp(x.sum(0), min=1)`: elementwise on the reduction
            continue
        node = node.func if isinstance(node, ast.Call) else node.value
    return False


def is_batch_tensor(node: ast.AST, fn: FunctionInfo) -> bool:
    """A forward-input-derived, batch-major expression (conservative: names and method chains)."""
    derived = batch_derived(fn)
    if isinstance(node, ast.BinOp) and not isinstance(node.op, ast.MatMult):
        # `scale * x`, `x / t`: elementwise with a scalar or a broadcast keeps the batch dim.
        return is_batch_tensor(node.left, fn) or is_batch_tensor(node.right, fn)
    base = node
    while isinstance(base, (ast.Call, ast.Attribute, ast.Subscript)):
        if isinstance(base, ast.Attribute) and (moves_batch_dim(base, fn) or base.attr in ("weight", "bias")):
            return False  # transposed, or a layer's weights (a module passed in is not data)
        if isinstance(base, ast.Subscript):
            return False  # indexing may drop or move the batch dim
        if isinstance(base, ast.Call) and (_drops_batch_dim(base) or _new_leading_axis(base)
                                           or _per_sample_slice(base, fn)):
            return False
        base = base.func if isinstance(base, ast.Call) else base.value
    if not (isinstance(base, ast.Name) and derived.get(base.id, False)):
        return False
    rows = fn.fact(_row_bindings)
    if base.id in rows:  # (the derived map is one answer per name; a name bound to one sample's rows here)
        binding = reaching_assignment(fn, base.id, base)
        return binding is None or id(binding) not in rows[base.id]
    return True


def _row_bindings(fn: FunctionInfo) -> dict[str, set[int]]:
    """Local name -> the assignments that bind it to one sample's rows (``_per_sample_rows``) and to
    nothing else of forward's inputs (`softmax_att_score = self.softmax(att_score[scope[i][0]:
    scope[i][1]])` in OpenNRE's loop over the bags), where the same name holds the batch elsewhere."""
    if not fn.nodes(ast.Slice):
        return {}
    derived = batch_derived(fn)
    found: dict[str, set[int]] = {}
    for node in fn.nodes(ast.Assign):
        if len(node.targets) != 1 or not isinstance(node.targets[0], ast.Name):
            continue
        subs = [sub for sub in fn.nodes_under(node.value, ast.Subscript) if _per_sample_rows(sub, fn)]
        if not subs:
            continue
        inside = {id(n) for sub in subs for n in fn.nodes_under(sub, ast.Name)}
        if not any(derived.get(n.id) and id(n) not in inside for n in fn.nodes_under(node.value, ast.Name)):
            found.setdefault(node.targets[0].id, set()).add(id(node))
    return found


_LOOPS = (ast.For, ast.ListComp, ast.GeneratorExp, ast.SetComp, ast.DictComp)


def _per_sample_slice(call: ast.Call, fn: FunctionInfo) -> bool:
    """`x.narrow(0, start, length)` with `start` or `length` bound per iteration of a loop or
    comprehension over the batch: one sample's rows of a packed tensor (DeepPurpose's
    `atom_hiddens.narrow(0, start, n_atoms)` per molecule), not the batch."""
    func = call.func
    dim = argument(call, 0, "dim")
    if not (isinstance(func, ast.Attribute) and func.attr == "narrow" and isinstance(dim, ast.Constant)
            and dim.value == 0 and not isinstance(dim.value, bool)):
        return False
    bounds = {n.id for arg in passed_values(call)[1:] for n in ast.walk(arg) if isinstance(n, ast.Name)}
    return _bound_per_sample(bounds, call, fn)


def _per_sample_rows(node: ast.AST, fn: FunctionInfo) -> bool:
    """`rep[scope[i][0]:scope[i][1]]`, a slice of dim 0 whose bounds are bound per iteration of a loop
    over the batch: one sample's rows of a packed tensor (OpenNRE's bag of sentences), as
    ``_per_sample_slice`` reads `narrow`."""
    if not isinstance(node, ast.Subscript):
        return False
    index = node.slice.elts[0] if isinstance(node.slice, ast.Tuple) and node.slice.elts else node.slice
    if not isinstance(index, ast.Slice) or index.lower is None or index.upper is None:
        return False
    bounds = {n.id for part in (index.lower, index.upper) for n in ast.walk(part) if isinstance(n, ast.Name)}
    return _bound_per_sample(bounds, node, fn)


def _bound_per_sample(bounds: set[str], node: ast.AST, fn: FunctionInfo) -> bool:
    """Is one of the names ``bounds`` a target of a loop or comprehension over the batch around ``node``?"""
    node = fn.parent(node)
    while node is not None:
        if isinstance(node, _LOOPS):
            for loop in [node] if isinstance(node, ast.For) else node.generators:
                targets = {n.id for n in ast.walk(loop.target) if isinstance(n, ast.Name)}
                if targets & bounds and _over_batch(loop.iter, fn):
                    return True
        node = fn.parent(node)
    return False


def _new_leading_axis(call: ast.Call) -> bool:
    """`w.unsqueeze(0)`, `torch.unsqueeze(w, 0)` in the expression itself: a new dim 0 in front of the
    batch (`(w.unsqueeze(0) * stacked).sum(dim=0)` reduces over it, per sample). Only in the
    expression: a name rebound so (`out = out.unsqueeze(0)` after a squeeze) is batch-major before."""
    func = call.func
    if not (isinstance(func, ast.Attribute) and func.attr == "unsqueeze"):
        return False
    module_call = isinstance(func.value, ast.Name) and func.value.id == "torch"
    dim = dim_argument(call, 1 if module_call else 0)
    return isinstance(dim, ast.Constant) and dim.value == 0 and not isinstance(dim.value, bool)


def rnn_kind(model: ModelClass, attr: str | None) -> str | None:
    """'LSTM'/'GRU'/'RNN'/'Transformer…' when self.<attr> is built from that torch.nn class."""
    if attr is None:
        return None
    facts = model.attrs.get(attr)
    if facts is None:
        return None
    for _, value, _ in facts.assignments:
        if isinstance(value, ast.Call):
            name = model.ctx.resolve(value.func) or ""
            if name.startswith("torch.nn."):
                return name.rsplit(".", 1)[-1]
    return None


def keyword(call: ast.Call, name: str) -> ast.AST | None:
    """The value ``call`` passes as keyword argument ``name``, or None."""
    return next((k.value for k in call.keywords if k.arg == name), None)


def passed_values(call: ast.Call) -> list[ast.AST]:
    """Every value ``call`` passes: its positional arguments, then its keyword arguments' values."""
    return [*call.args, *(k.value for k in call.keywords)]


def argument(call: ast.Call, position: int, name: str) -> ast.AST | None:
    """The value ``call`` passes for a parameter: its positional argument ``position``, else its
    keyword argument ``name`` (a valid call passes one at the most), or None."""
    return call.args[position] if len(call.args) > position else keyword(call, name)


def binding_error(call: ast.Call, fn: ast.FunctionDef | ast.AsyncFunctionDef, bound: int = 1) -> str | None:
    """Why ``call`` cannot bind to ``fn``'s parameters (its first ``bound`` bound already: `self`),
    as Python would raise TypeError on any device count; None where it may bind. A call with
    `*args` or `**kwargs` may bind anything."""
    if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
        return None
    args = fn.args
    positional = [a.arg for a in (*args.posonlyargs, *args.args)][bound:]
    named = {a.arg for a in args.args[max(bound - len(args.posonlyargs), 0):]} | {a.arg for a in args.kwonlyargs}
    if len(call.args) > len(positional) and args.vararg is None:
        return f"{len(call.args)} positional arguments for {len(positional)} parameters"
    for k in call.keywords:
        if k.arg in positional[:len(call.args)]:
            return f"`{k.arg}=` after a positional argument already bound it"
        if k.arg not in named and args.kwarg is None:
            return f"`{k.arg}=` names no parameter"
    return None


def dim_argument(call: ast.Call, position: int) -> ast.AST | None:
    """The dim a torch call passes: its positional argument ``position``, or `dim=`, or NumPy's
    `axis=`, which torch takes as the same keyword (`torch.stack(xs, axis=1)`, `x.sum(axis=0)`)."""
    return argument(call, position, "dim") or keyword(call, "axis")


def is_true(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and node.value is True


def under_lazy_guard(fn, node, building: bool = False) -> bool:
    """Inside `if self.x is None:` / `if not self.x:` / `if not hasattr(self, ...)` (`not self.training`
    is a mode test, not a guard on a lazily built value). With ``building`` (is this write building a
    missing value?), the body of `if self.bias is not None:` does not count: it runs because a value
    is present, not to build one; the `else:` of such a test still does."""
    child, cur = node, fn.parent(node)
    while cur is not None and cur is not fn.node:
        if isinstance(cur, ast.If):
            in_body = any(child is s for s in cur.body)
            for test in ast.walk(cur.test):
                if isinstance(test, ast.Compare) and fn.self_attr(test.left) is not None and any(
                        isinstance(c, ast.Constant) and c.value is None for c in test.comparators) \
                        and not (building and in_body and all(isinstance(op, (ast.IsNot, ast.NotEq))
                                                              for op in test.ops)):
                    return True
                if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) and (
                        fn.self_attr(test.operand) not in (None, "training") or (
                        isinstance(test.operand, ast.Call) and isinstance(test.operand.func, ast.Name)
                        and test.operand.func.id == "hasattr")):
                    return True
        child, cur = cur, fn.parent(cur)
    return False


def rebuilt_on_key_change(fn, node, name: str) -> bool:
    """Is ``node`` the store of a table rebuilt when a key changes, pytorch_ssim's window:

        if channel == self.channel and self.window.data.type() == img1.data.type():
            window = self.window
        else:
            window = create_window(self.window_size, channel).type_as(img1)
            self.window = window
            self.channel = channel

    The write stands in the arm an `if` takes when the key differs (the `else:` of `==` tests joined
    by `and`, the body of `!=` tests joined by `or`); each test compares something of the instance
    with a value of this call (a parameter or local, not a constant: `self.mode != "train"` is a
    switch); every attribute the test reads is this one or is written in that arm too (the key kept
    with the table), and the other arm does not write this one. Whatever the branch, the call uses a
    table that is a function of its key: losing the store rebuilds it (a cost), it changes no value."""
    if not isinstance(node, ast.Assign):
        return False
    child, cur = node, fn.parent(node)
    while cur is not None and cur is not fn.node:
        if isinstance(cur, ast.If):
            in_body = any(child is s for s in cur.body)
            if in_body or any(child is s for s in cur.orelse):
                return _key_check(fn, cur, node, name, rebuilt_in_body=in_body)
        child, cur = cur, fn.parent(cur)
    return False


def _key_check(fn, branch: ast.If, store: ast.Assign, name: str, rebuilt_in_body: bool) -> bool:
    joiner, equal = (ast.Or, (ast.NotEq, ast.IsNot)) if rebuilt_in_body else (ast.And, (ast.Eq, ast.Is))
    test = branch.test
    compares = test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, joiner) else [test]
    for compare in compares:
        if not (isinstance(compare, ast.Compare) and len(compare.ops) == 1 and isinstance(compare.ops[0], equal)):
            return False
        sides = (compare.left, compare.comparators[0])
        own = [side for side in sides if _instance_attr(fn, side) is not None]
        if len(own) != 1 or isinstance(other := sides[1] if own[0] is sides[0] else sides[0], ast.Constant) \
                or not any(isinstance(n, ast.Name) and n.id != "self" for n in ast.walk(other)):
            return False
    rebuilt, kept = (branch.body, branch.orelse) if rebuilt_in_body else (branch.orelse, branch.body)
    written = lambda stmts: {fn.self_attr(t) for s in stmts for n in ast.walk(s) if isinstance(n, ast.Assign)
                             for t in n.targets}
    keys = {_instance_attr(fn, side) for compare in compares for side in (compare.left, compare.comparators[0])}
    keys.discard(None)
    return name not in written(kept) and keys <= written(rebuilt) | {name} and _fresh(fn, store, name, kept)


def _fresh(fn, store: ast.Assign, name: str, kept: list[ast.stmt]) -> bool:
    """Does the stored value not read `self.<name>`, directly or through a local bound outside the
    arm that reuses the table (`window = self.window` there never reaches the store)?"""
    in_kept = {id(n) for s in kept for n in ast.walk(s)}
    reads_old = lambda expr: any(fn.self_attr(n) == name for n in ast.walk(expr))
    if reads_old(store.value):
        return False
    return not any(reads_old(bound) for local in {n.id for n in ast.walk(store.value) if isinstance(n, ast.Name)}
                   for bound in fn.local_values.get(local, ()) if id(bound) not in in_kept)


def _instance_attr(fn, node: ast.AST) -> str | None:
    """The attribute of the instance an expression reads through attributes and calls
    (`self.window.data.type()` -> window), else None."""
    while True:
        attr = fn.self_attr(node)
        if attr is not None:
            return attr
        if isinstance(node, ast.Call):
            node = node.func
        elif isinstance(node, (ast.Attribute, ast.Subscript)):
            node = node.value
        else:
            return None


def scripting_only(fn, node) -> bool:
    """Inside `if torch.jit.is_scripting():` (its body, not its else): code that runs only in
    TorchScript, never in the eager forward DataParallel replicates."""
    child, cur = node, fn.parent(node)
    while cur is not None and cur is not fn.node:
        if isinstance(cur, ast.If) and child in cur.body and _is_scripting_test(cur.test):
            return True
        child, cur = cur, fn.parent(cur)
    return False


def _is_scripting_test(test: ast.AST) -> bool:
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return any(_is_scripting_test(v) for v in test.values)
    return (isinstance(test, ast.Call) and isinstance(test.func, ast.Attribute)
            and test.func.attr in ("is_scripting", "_is_scripting"))


def stacks_new_leading_dim(call: ast.Call, fn: FunctionInfo, derived: dict[str, bool] | None = None) -> bool:
    """`torch.stack(items)` on dim 0 of a list built per layer, step or stream (not per sample), or
    `torch.cat` on dim 0 of such a list whose every item is given a new dim 0 (`torch.cat([h.unsqueeze(0)
    for h in hidden_states[-4:]], 0)`, the last layers stacked: vert-papers' span encoder).

    The new dim 0 indexes the list: it is the batch only when the list holds one entry per
    sample (`[f(s) for s in x]`, a loop over the batch appending `h[i]`).
    """
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    if name not in ("stack", "cat") or not call.args or not (isinstance(func, ast.Name) or (
            isinstance(func.value, ast.Name) and func.value.id == "torch")):
        return False
    dim = dim_argument(call, 1)
    if dim is not None and not (isinstance(dim, ast.Constant) and dim.value == 0):
        return False
    items = call.args[0]
    if name == "cat" and not (
            isinstance(items, ast.ListComp) and isinstance(items.elt, ast.Call) and _new_leading_axis(items.elt)
            or isinstance(items, ast.List) and items.elts and all(
                isinstance(item, ast.Call) and _new_leading_axis(item) for item in items.elts)):
        return False
    return _per_step_list(items, fn, batch_derived(fn) if derived is None else derived)


def _per_step_list(node: ast.AST, fn: FunctionInfo, derived: dict[str, bool]) -> bool:
    if isinstance(node, ast.ListComp):
        return not _over_batch(node.generators[0].iter, fn)
    if isinstance(node, ast.List):
        return True
    if isinstance(node, ast.Name):
        values = fn.local_values.get(node.id, ())
        if any(isinstance(v, ast.ListComp) and _over_batch(v.generators[0].iter, fn) for v in values):
            return False
        if any(isinstance(v, (ast.List, ast.ListComp)) for v in values):
            return not _appended_per_sample(node.id, fn, derived)
    return False


def _over_batch(iterable: ast.AST, fn: FunctionInfo, depth: int = 0) -> bool:
    """`for item in x`, `zip(x, y)`, `enumerate(x)`, `x.unbind(0)`, `range(len(x))`, `range(x.shape[0])`
    of a forward input (a parameter, or a name unpacked from one: `atoms, bonds, sizes = feature`),
    or a local list with one entry per sample (see ``_one_entry_per_sample``)."""
    inputs = fn.fact(_batch_inputs)
    for sub in ast.walk(iterable):
        if isinstance(sub, ast.Name) and sub.id in inputs:
            text = ast.unparse(iterable)
            return not any(t in text for t in (".shape[1]", ".size(1)", ".shape[-", ".size(-"))
    return isinstance(iterable, ast.Name) and depth < _PER_SAMPLE_DEPTH and _one_entry_per_sample(
        iterable.id, fn, depth + 1)


# How many lists deep `_over_batch` follows one list built per sample from another.
_PER_SAMPLE_DEPTH = 2


def _batch_inputs(fn: FunctionInfo) -> frozenset[str]:
    """Forward's parameters and the names a statement unpacks from one (`atoms, bonds, sizes =
    feature`): scatter splits every tensor of an input tuple along dim 0, as it splits a parameter."""
    params = set(parameters_of(fn))
    found = set(params)
    for node in fn.nodes(ast.Assign):
        if isinstance(node.value, ast.Name) and node.value.id in params:
            for target in node.targets:
                if isinstance(target, (ast.Tuple, ast.List)):
                    found.update(e.id for e in target.elts if isinstance(e, ast.Name))
    return frozenset(found)


def _one_entry_per_sample(name: str, fn: FunctionInfo, depth: int) -> bool:
    """Is ``name`` a local list built empty (`scope = []`) and appended to only by statements of the
    body of loops over the batch, with no `break` or `continue` in them: one entry per iteration,
    one iteration per sample (DeepPurpose's `N_atoms_scope.append((start, n_atoms))` per molecule)?"""
    values = fn.local_values.get(name, ())
    if not values or not all(isinstance(v, ast.List) and not v.elts for v in values):
        return False
    appended = False
    for node in fn.nodes(ast.Attribute):
        if not (isinstance(node.value, ast.Name) and node.value.id == name):
            continue
        call = fn.parent(node)
        statement = fn.parent(call)
        loop = fn.parent(statement)
        if node.attr != "append" or not isinstance(call, ast.Call) or call.func is not node \
                or not isinstance(statement, ast.Expr) or not isinstance(loop, ast.For) \
                or statement not in loop.body or not _over_batch(loop.iter, fn, depth) \
                or any(isinstance(n, (ast.Break, ast.Continue)) for n in ast.walk(loop)):
            return False  # (any other use of the list's methods, `extend`, `insert`, `pop`, too)
        appended = True
    return appended and not any(isinstance(n.target, ast.Name) and n.target.id == name
                                for n in fn.nodes(ast.AugAssign))


def _appended_per_sample(name: str, fn: FunctionInfo, derived: dict[str, bool]) -> bool:
    """Appended to in a loop over the batch, or with `h[i]` where `i` is the loop's index."""
    for loop in fn.nodes(ast.For):
        appends = [c for c in ast.walk(loop) if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)
                   and c.func.attr == "append" and isinstance(c.func.value, ast.Name) and c.func.value.id == name]
        if not appends:
            continue
        if _over_batch(loop.iter, fn):
            return True
        index = _loop_index(loop)
        if index and any(_indexes_with(c.args[0], index, derived) for c in appends if c.args):
            return True
    return False


def _loop_index(loop: ast.For) -> str | None:
    """`i` in `for i in range(...)` or `for i, ... in enumerate(...)`."""
    target = loop.target
    if isinstance(target, ast.Tuple) and target.elts and isinstance(loop.iter, ast.Call) \
            and isinstance(loop.iter.func, ast.Name) and loop.iter.func.id == "enumerate":
        target = target.elts[0]
    return target.id if isinstance(target, ast.Name) else None


def _indexes_with(node: ast.AST, index: str, derived: dict[str, bool]) -> bool:
    """The appended value starts from `batch_tensor[i]`: one entry per sample."""
    while isinstance(node, (ast.Call, ast.Attribute, ast.Subscript)):
        if isinstance(node, ast.Subscript):
            first = node.slice.elts[0] if isinstance(node.slice, ast.Tuple) and node.slice.elts else node.slice
            if isinstance(first, ast.Name) and first.id == index and isinstance(node.value, ast.Name) \
                    and node.value.id in derived:
                return True
        node = node.func if isinstance(node, ast.Call) else node.value
    return False


# --- sample-against-sample matrices ---------------------------------------------------------

def pairwise_over_batch(node: ast.AST, fn: FunctionInfo, resolve) -> bool:
    """A (B, B) matrix comparing every sample of the batch with every other: `a @ b.T`,
    `torch.mm(a, b.t())`, `a.unsqueeze(1) - b.unsqueeze(0)`, `F.cosine_similarity` of such
    broadcast operands, where both operands are batch tensors. (`torch.cdist` is left out: on 3-D
    operands it is per sample.)"""
    if isinstance(node, ast.BinOp):
        if isinstance(node.op, ast.MatMult):
            return _batch_outer(node.left, node.right, fn)
        if isinstance(node.op, (ast.Sub, ast.Mult, ast.Add)):
            return _pairwise_broadcast(node.left, node.right, fn)
        return False
    if not isinstance(node, ast.Call):
        return False
    name = resolve(node.func) or ""
    if not name.startswith("torch."):
        return False
    last = name.rsplit(".", 1)[-1]
    if last in ("mm", "matmul") and len(node.args) == 2:
        return _batch_outer(*node.args, fn)
    if last in ("cosine_similarity", "pairwise_distance") and len(node.args) >= 2:
        return _pairwise_broadcast(node.args[0], node.args[1], fn)
    return False


def _transposed(node, fn=None) -> ast.AST | None:
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
            and node.func.attr in ("to", "float", "type_as", "contiguous", "detach"):
        node = node.func.value  # `b.t().to(a.device)`
    if isinstance(node, ast.Name) and fn is not None:
        # `kt = k.t()` on an earlier line
        values = fn.local_values.get(node.id, ())
        return _transposed(values[0]) if len(values) == 1 else None
    if isinstance(node, ast.Attribute) and node.attr in ("T", "mT"):
        return node.value
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        if node.func.attr == "t" and not node.args:
            return node.func.value
        if node.func.attr == "transpose" and [getattr(a, "value", None) for a in node.args] in ([0, 1], [1, 0]):
            return node.func.value
    return None


def _batch_outer(left, right, fn) -> bool:
    inner = _transposed(right, fn)
    return inner is not None and is_batch_tensor(left, fn) and is_batch_tensor(inner, fn) \
        and not _per_sample_matrices(left, fn)


_BATCHED_MATRIX = frozenset({"diag_embed", "unsqueeze", "bmm", "baddbmm"})


def _per_sample_matrices(node, fn, depth=0) -> bool:
    """`torch.diag_embed(x)` or `x.unsqueeze(1)`: a stack of per-sample matrices, so `@ w.T`
    multiplies each sample on its own instead of comparing samples."""
    if depth > 3:
        return False
    if isinstance(node, ast.Name):
        return any(_per_sample_matrices(v, fn, depth + 1) for v in fn.local_values.get(node.id, ()))
    if isinstance(node, ast.Call):
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        return name in _BATCHED_MATRIX
    return False


def _pairwise_broadcast(left, right, fn) -> bool:
    """`a.unsqueeze(1) - b.unsqueeze(0)` (or dims 0 and 1 swapped): every sample against every other."""
    dims = [_unsqueezed_batch(side, fn) for side in (left, right)]
    return sorted(d for d in dims if d is not None) == [0, 1]


def _unsqueezed_batch(node, fn) -> int | None:
    """The dim of `x.unsqueeze(d)` (d in 0, 1) for a batch tensor x, through one local name."""
    if isinstance(node, ast.Name):
        values = fn.local_values.get(node.id, ())
        return _unsqueezed_batch(values[0], fn) if len(values) == 1 and not isinstance(values[0], ast.Name) else None
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "unsqueeze" \
            and len(node.args) == 1 and isinstance(node.args[0], ast.Constant) and node.args[0].value in (0, 1) \
            and not isinstance(node.args[0].value, bool) and is_batch_tensor(node.func.value, fn):
        return node.args[0].value
    return None


# Reads of a tensor's metadata: a cache-validity check, not a use of the stored value.
_METADATA = frozenset({"device", "dtype", "shape", "size", "ndim", "dim", "numel", "is_cuda", "requires_grad"})
# Calls that return the same value on another device or dtype.
CONVERSIONS = frozenset({"to", "cuda", "cpu", "type", "type_as", "float", "half", "double", "bfloat16",
                         "long", "int", "bool", "contiguous", "detach", "clone"})


def _pass_through(expr: ast.AST, is_source) -> bool:
    """`v`, `v.to(...)`, `v.to(x.device).float()`, `v.to(d) if v is not None else None`,
    `[t.to(d) for t in v]`: the value itself, perhaps converted."""
    while isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr in CONVERSIONS:
        expr = expr.func.value
    if isinstance(expr, ast.IfExp):
        branches = [b for b in (expr.body, expr.orelse) if not isinstance(b, ast.Constant)]
        return bool(branches) and all(_pass_through(b, is_source) for b in branches)
    if isinstance(expr, (ast.ListComp, ast.GeneratorExp)) and len(expr.generators) == 1 \
            and isinstance(expr.generators[0].target, ast.Name) and is_source(expr.generators[0].iter):
        element = expr.generators[0].target.id
        return _pass_through(expr.elt, lambda e: isinstance(e, ast.Name) and e.id == element)
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id in ("list", "tuple") \
            and len(expr.args) == 1:
        return _pass_through(expr.args[0], is_source)
    return is_source(expr)


def _metadata_read(fn, node: ast.AST) -> bool:
    parent = fn.parent(node)
    if isinstance(parent, ast.Attribute) and parent.attr in _METADATA:
        return True
    if isinstance(parent, ast.Compare) and all(isinstance(c, ast.Constant) and c.value is None
                                               for c in parent.comparators):
        return True  # `self.x is None`
    return isinstance(parent, ast.Call) and isinstance(parent.func, ast.Name) and parent.func.id in ("len", "isinstance")


def old_value_use(model: ModelClass, fn: FunctionInfo, name: str, value: ast.AST | None) -> str | None:
    """How the value written to ``self.<name>`` uses the attribute's old value.

    None: not at all (the value is rebuilt from inputs, weights or config); "converted": it is
    the old value moved to another device or dtype; "memo": it is passed to a method of the
    class that returns either it (perhaps converted) or a table rebuilt without it;
    "accumulates": the new value combines the old one (`self.n + 1`, `m * self.ema + ...`,
    `torch.max(self.hi, hi)`), directly or through a local.
    """
    if value is None or written_earlier(fn, name, value):
        return None
    is_old = lambda e: fn.self_attr(e) == name
    if _lazy_expression(value, is_old):
        return "memo"
    if _pass_through(value, is_old):
        return None if is_old(value) else "converted"
    olds = [n for n in ast.walk(value) if is_old(n)]
    for local in {n.id for n in ast.walk(value) if isinstance(n, ast.Name)}:
        for bound in fn.local_values.get(local, ()):
            olds.extend(n for n in ast.walk(bound) if is_old(n) and not _metadata_read(fn, n))
    olds = [n for n in olds if not (fn.parent(n) is not None and _metadata_read(fn, n))]
    if not olds:
        return None
    if isinstance(value, ast.Call) and all(any(a is o for a in value.args) or
                                           any(k.value is o for k in value.keywords) for o in olds):
        method = model.find_method(fn.self_attr(value.func)) if fn.self_attr(value.func) else None
        if method is not None and _rebuilds_or_reuses(method, value, olds):
            return "memo"
    return "accumulates"


def _lazy_expression(value: ast.AST, is_old) -> bool:
    """`new if self.x is None else self.x` (or the `is not None` mirror): the expression form of
    `if self.x is None: self.x = new`, a value fixed by the first call."""
    if not (isinstance(value, ast.IfExp) and isinstance(value.test, ast.Compare) and len(value.test.ops) == 1
            and is_old(value.test.left) and isinstance(value.test.comparators[0], ast.Constant)
            and value.test.comparators[0].value is None):
        return False
    kept = value.orelse if isinstance(value.test.ops[0], ast.Is) else value.body \
        if isinstance(value.test.ops[0], ast.IsNot) else None
    return kept is not None and is_old(kept)


def _rebuilds_or_reuses(method: FunctionInfo, call: ast.Call, olds: list[ast.AST]) -> bool:
    """Every return of ``method`` is the argument that received the old value (perhaps
    converted) or does not mention it: it memoises a derived table."""
    params = parameters_of(method)
    names = set()
    for i, arg in enumerate(call.args):
        if any(arg is o for o in olds) and i < len(params):
            names.add(params[i])
    names |= {k.arg for k in call.keywords if any(k.value is o for o in olds) and k.arg}
    if not names:
        return False
    returns = list(method.returns())
    return bool(returns) and all(
        _pass_through(r, lambda e: isinstance(e, ast.Name) and e.id in names)
        or not any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(r)) for r in returns)


def written_earlier(fn: FunctionInfo, name: str, node: ast.AST) -> bool:
    """`self.t = ...` earlier in the same function, on every path to ``node``: a later write
    transforms this call's value, not the previous call's (a value reset at the start of each
    call). A write in another arm of the same `if`/`elif` does not count. So does a statement
    that calls a function of the file handed `self` (`create_grids(self, size)`), or a method of
    the class, whose body assigns `<its first parameter>.t` at its top level, unless an `if` around
    the call tests an attribute that helper or another method sets (a lazy memo, ``_memo_guarded``)."""
    if any(fn.self_attr(t) == name and t.lineno < node.lineno and _runs_before(fn, a, node)
           for a in fn.nodes(ast.Assign) for t in a.targets):
        return True
    return any(isinstance(stmt, (ast.Expr, ast.Assign)) and stmt.value is call and stmt.lineno < node.lineno
               and _runs_before(fn, stmt, node) and not _memo_guarded(fn, stmt, helper)
               for call in fn.nodes(ast.Call) if call.lineno < node.lineno and (helper := _rebuilds(fn, call, name))
               for stmt in [fn.enclosing(call, ast.stmt)])


def _memo_guarded(fn: FunctionInfo, stmt: ast.stmt, helper: ast.FunctionDef) -> bool:
    """Is ``stmt`` under an `if` whose test reads an attribute of the instance that the helper, or
    a method of the class other than `__init__`, assigns (`if self.size != size:` where the helper
    sets `m.size = size`)? Then the rebuild is a lazy memo kept across calls, not this call's own."""
    tested = set()
    cur = fn.parent(stmt)
    while cur is not None and cur is not fn.node:
        if isinstance(cur, ast.If):
            tested.update(a for n in ast.walk(cur.test) if (a := fn.self_attr(n)) is not None)
        cur = fn.parent(cur)
    if not tested:
        return False
    holder = helper.args.args[0].arg
    assigned = {t.attr for n in ast.walk(helper) if isinstance(n, (ast.Assign, ast.AugAssign))
                for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
                if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == holder}
    for method in (fn.owner.node.body if fn.owner is not None else ()):
        if isinstance(method, FUNCTION_DEFS) and method.name != "__init__"                 and method.args.args:
            me = method.args.args[0].arg
            assigned.update(t.attr for n in ast.walk(method) if isinstance(n, (ast.Assign, ast.AugAssign))
                            for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
                            if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == me)
    return bool(tested & assigned)


def _rebuilds(fn: FunctionInfo, call: ast.Call, name: str) -> ast.FunctionDef | None:
    """Does ``call`` run a function of this file that assigns ``name`` on the instance at its top
    level: `helper(self, ...)` of a module-level `def helper(m, ...): m.<name> = ...`, or
    `self.helper(...)` of a method defined in the same class body?"""
    func = call.func
    owner = fn.owner.node if fn.owner is not None else None
    target = None
    if isinstance(func, ast.Name) and call.args and fn.is_self(call.args[0]):
        module = fn.tree_index.tree if fn.tree_index is not None else None
        target = next((d for d in getattr(module, "body", ()) if isinstance(d, ast.FunctionDef) and d.name == func.id),
                      None)
    elif isinstance(func, ast.Attribute) and fn.is_self(func.value) and owner is not None:
        target = next((d for d in owner.body if isinstance(d, ast.FunctionDef) and d.name == func.attr), None)
    if target is None or not target.args.args:
        return None
    holder = target.args.args[0].arg
    return target if any(isinstance(stmt, ast.Assign) and any(
        isinstance(t, ast.Attribute) and t.attr == name and isinstance(t.value, ast.Name) and t.value.id == holder
        for t in stmt.targets) for stmt in target.body) else None


def statement_block(fn: FunctionInfo, stmt: ast.stmt | None) -> list[ast.stmt] | None:
    """The statement list of ``fn`` (a body, an `else`, a `finally`; for an except clause, its try's
    handlers) that holds ``stmt``, or None."""
    parent = (fn.parent(stmt) if stmt is not None else None) or fn.node
    for field in ("body", "orelse", "finalbody", "handlers"):
        block = getattr(parent, field, None)
        if isinstance(block, list) and any(s is stmt for s in block):
            return block
    return None


def _runs_before(fn: FunctionInfo, stmt: ast.stmt, node: ast.AST) -> bool:
    """Does ``stmt`` run on every path that reaches ``node``? (``stmt`` sits in a statement
    list that, further down, holds the statement containing ``node``.)"""
    block = fn.parent(stmt)
    cur = node
    while cur is not None and fn.parent(cur) is not block:
        cur = fn.parent(cur)
    if cur is None or block is None:
        return False
    for field in ("body", "orelse", "finalbody", "handlers"):
        statements = getattr(block, field, None)
        if isinstance(statements, list) and any(s is stmt for s in statements):
            return any(s is cur for s in statements)
    return False


def _guards(fn: FunctionInfo, read: ast.AST, write: ast.AST) -> bool:
    """Is ``read`` in the test of an `if` whose body holds ``write`` (`if n < self.w: self.w = n`)?
    Such a write re-derives the value whenever the inputs call for it. An early exit when the
    value is already the one wanted (`if value == self.mode: return` before `self.mode = value`)
    guards the same way: the old value only decides whether to write."""
    cur = fn.enclosing(read, ast.stmt)
    if not isinstance(cur, ast.If):
        return False
    if all(isinstance(s, (ast.Return, ast.Pass)) for s in cur.body) and not cur.orelse \
            and isinstance(cur.test, ast.Compare) and cur.lineno < write.lineno:
        return _only_sets_after(fn, cur)
    up = fn.parent(write)
    while up is not None and up is not cur:
        up = fn.parent(up)
    return up is cur


def _only_sets_after(fn: FunctionInfo, guard: ast.If) -> bool:
    """Does the code after an early-exit guard only set values (no in-place tensor update such as
    `weight.div_(k)`)? Then skipping it when the value is unchanged is idempotent; otherwise the
    guard keeps a non-idempotent update from running twice and the flag is real state."""
    block = fn.parent(guard)
    statements = next((getattr(block, f) for f in ("body", "orelse", "finalbody")
                       if any(s is guard for s in getattr(block, f, None) or [])), [])
    after = statements[next(i for i, s in enumerate(statements) if s is guard) + 1:]
    return not any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr.endswith("_")
                   and not n.func.attr.startswith("_") for s in after for n in ast.walk(s))


def accumulation_started_in_call(model: ModelClass, fn: FunctionInfo, name: str, node: ast.AST) -> bool:
    """Does a write of this call start `self.<name>` afresh before the accumulation ``node``
    (`self.loss_tot += w * kl`) on every path: earlier in ``fn`` (``written_earlier``), or, in a
    method forward reaches, before every call of it (PHiSeg's `elbo` sets `self.loss_tot = 0`, then
    calls the helpers that add to it)? Then it adds to this call's value, not the previous call's."""
    return written_earlier(fn, name, node) or _written_before_every_call(model, fn, name, frozenset())


def _written_before_every_call(model: ModelClass, fn: FunctionInfo, name: str, trail: frozenset) -> bool:
    """Is there a call of method ``fn`` in forward-reachable code, and is each one preceded on every
    path by a write of `self.<name>` in its caller, or made from a method itself only called so?
    (forward has no such caller: DataParallel calls it.)"""
    if fn.name == "forward" or fn.node in trail:
        return False
    trail = trail | {fn.node}
    called = False
    for caller in model.in_forward:
        if caller.node is fn.node:
            continue
        for call in caller.nodes(ast.Call):
            if caller.self_attr(call.func) != fn.name:
                continue
            called = True
            if not (written_earlier(caller, name, call) or _written_before_every_call(model, caller, name, trail)):
                return False
    return called


def reads_before_write(model: ModelClass, fn: FunctionInfo, name: str, node: ast.AST) -> bool:
    """Is the old value of ``self.<name>`` used (not just its device/shape/None-ness) in forward
    before this write: earlier in the same function, or in a caller before it calls ``fn``?
    Then a later call reads what an earlier call wrote."""
    start = node.lineno
    if written_earlier(fn, name, node):
        return False
    # A read that a write of this call precedes on every path to it (`self.out = f(x)` then
    # `return self.out` in the other arm of the `if` that holds this write) reads this call's value.
    for n in fn.nodes(ast.Attribute):
        if isinstance(n.ctx, ast.Load) and n.lineno < start and fn.self_attr(n) == name \
                and not _metadata_read(fn, n) and not under_lazy_guard(fn, n) and not _guards(fn, n, node) \
                and not written_earlier(fn, name, n):
            return True
    for caller in model.in_forward:
        if caller.node is fn.node:
            continue
        calls = [c.lineno for c in caller.nodes(ast.Call) if caller.self_attr(c.func) == fn.name]
        if not calls:
            continue
        first = min(calls)
        call = next(c for c in caller.nodes(ast.Call) if c.lineno == first and caller.self_attr(c.func) == fn.name)
        for n in caller.nodes(ast.Attribute):
            if isinstance(n.ctx, ast.Load) and n.lineno < first and caller.self_attr(n) == name \
                    and not _metadata_read(caller, n) and not _guards(caller, n, call):
                return True
    return False


def cleared_in_forward(model: ModelClass, name: str) -> bool:
    """Does forward itself clear ``self.<name>`` to None on some path: this class's forward-reachable
    code (`else: self.state = None`), or the forward of a module in the same file that owns this one
    (`self.layer.state = None`)? Then the value carries over between calls only in the mode forward
    chooses (a decoding cache under `use_cache`), not on every call."""
    def clears(target: ast.AST, value: ast.AST, own: FunctionInfo | None) -> bool:
        if not (isinstance(value, ast.Constant) and value.value is None and isinstance(target, ast.Attribute)
                and target.attr == name):
            return False
        if own is not None:
            return own.self_attr(target) == name
        inner = target.value  # self.<sub>.<name>
        return isinstance(inner, ast.Attribute) and isinstance(inner.value, ast.Name) and inner.value.id == "self"

    for fn in model.in_forward:
        if any(clears(t, a.value, fn) for a in fn.nodes(ast.Assign) for t in a.targets):
            return True
    for node in model.ctx.nodes(ast.FunctionDef):
        if node.name != "forward":
            continue
        for a in ast.walk(node):
            if isinstance(a, ast.Assign) and any(clears(t, a.value, None) for t in a.targets):
                return True
    return False


def read_in_forward(model: ModelClass, name: str) -> bool:
    """Does any forward-reachable code read ``self.<name>`` (beyond its metadata)?"""
    for fn in model.reachable:
        for n in fn.nodes(ast.Attribute):
            if isinstance(n.ctx, ast.Load) and fn.self_attr(n) == name and not _metadata_read(fn, n):
                return True
    return False


def behind_non_default_option(model: ModelClass, fn: FunctionInfo, node: ast.AST,
                              built_by: set[str] | None = None) -> bool:
    """Does ``node`` run only when an option is set away from its default?

    An enclosing `if opt:` / `if self.opt:` / `if opt == "x":` (an `and` of such tests too)
    where ``opt`` is a parameter of the function, or an attribute `__init__` sets from one of
    its parameters, whose default makes the test false; or an early exit before it in the same
    method whose test that default makes true (`if self.layer == -1: return self.net(x)` with
    `layer=-1`: what follows runs only with another layer). In a helper method, also where every
    call of it in the class is so guarded and the class uses it only by calling it. A required
    constructor parameter's default is what every construction of the class in this file passes
    (``_constructor_default``); ``built_by`` then receives the qualified names of the classes whose
    constructions decided it (``BUILT_OUTSIDE_CONDITION``: a construction in another scanned file
    may pass something else).
    """
    decided: set[str] = set()
    if not _behind_option(model, fn, node, decided, frozenset()):
        return False
    if built_by is not None:
        built_by |= decided
    return True


def _behind_option(model: ModelClass, fn: FunctionInfo, node: ast.AST, built_by: set[str], trail: frozenset) -> bool:
    cur, child = fn.parent(node), node
    while cur is not None:
        if isinstance(cur, ast.If) and child is not cur.test and any(child is s for s in cur.body):
            tests = cur.test.values if isinstance(cur.test, ast.BoolOp) and isinstance(cur.test.op, ast.And) \
                else [cur.test]
            if any(_decided_by_default(model, fn, test, False, built_by) for test in tests):
                return True
        if isinstance(child, ast.stmt) and any(_exits_by_default(model, fn, before, built_by)
                                               for before in statements_before(cur, child)):
            return True
        if cur is fn.node:
            break
        cur, child = fn.parent(cur), cur
    return _called_only_behind_option(model, fn, built_by, trail)


def _decided_by_default(model: ModelClass, fn: FunctionInfo, test: ast.AST, value: bool, built_by: set[str]) -> bool:
    """Does ``test`` evaluate to ``value`` at its option's default? The classes whose constructions
    decided it go into ``built_by`` only when it does."""
    decided: set[str] = set()
    if _value_by_default(model, fn, test, decided) is not value:
        return False
    built_by |= decided
    return True


def _exits_by_default(model: ModelClass, fn: FunctionInfo, stmt: ast.stmt, built_by: set[str]) -> bool:
    """`if <test>: ... return` (or `raise`), no `else`, whose test (one of an `or`) holds at its
    option's default: the statements after it run only with the option changed."""
    if not (isinstance(stmt, ast.If) and not stmt.orelse and isinstance(stmt.body[-1], (ast.Return, ast.Raise))):
        return False
    tests = stmt.test.values if isinstance(stmt.test, ast.BoolOp) and isinstance(stmt.test.op, ast.Or) else [stmt.test]
    return any(_decided_by_default(model, fn, test, True, built_by) for test in tests)


def _called_only_behind_option(model: ModelClass, fn: FunctionInfo, built_by: set[str], trail: frozenset) -> bool:
    """Is helper method ``fn`` used in its class only by calls of `self.<name>(...)`, at least one,
    each behind a non-default option (``_behind_option``)? forward itself is called by DataParallel."""
    if fn.name in ("forward", "__init__") or fn.owner is None or fn.node in trail:
        return False
    trail = trail | {fn.node}
    calls = []
    for method in model.all_methods:
        for n in method.nodes(ast.Attribute):
            if n.attr != fn.name or method.self_attr(n) != fn.name:
                continue
            call = method.parent(n)
            if not (isinstance(call, ast.Call) and call.func is n):
                return False  # handed on (a hook, a callback): it may run unguarded
            calls.append((method, call))
    return bool(calls) and all(_behind_option(model, method, call, built_by, trail) for method, call in calls)


def fixed_off_by_callers(model: ModelClass, fn: FunctionInfo, node: ast.AST) -> bool:
    """Does ``node`` sit in an arm of `if flag:` (`if not flag:`) in helper method ``fn`` that no call
    from forward's code takes? ``flag`` is a parameter of ``fn``, not rebound, and every call of
    `self.<fn>(...)` in the methods forward runs (at least one) passes it the same constant: written
    out, left at a constant default, or `self.x` that the class sets once, to a constant (SMART's
    `score_func=self.dist_score` with `self.dist_score = True`, whose `else:` arm never runs)."""
    if fn.owner is None or fn.name in ("forward", "__init__"):
        return False
    params = parameters_of(fn)
    child, cur = node, fn.parent(node)
    while cur is not None and cur is not fn.node:
        if isinstance(cur, ast.If) and child is not cur.test:
            test, negated = cur.test, False
            if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
                test, negated = test.operand, True
            if isinstance(test, ast.Name) and test.id in params and test.id not in fn.local_values:
                value = _value_every_call_passes(model, fn, test.id, params)
                if value is not _MISSING and (bool(value) != negated) != any(child is s for s in cur.body):
                    return True
        child, cur = cur, fn.parent(cur)
    return False


def _value_every_call_passes(model: ModelClass, fn: FunctionInfo, name: str, params: list[str]):
    """The constant every call of helper ``fn`` from forward's code passes for parameter ``name``
    (see ``fixed_off_by_callers``), or _MISSING."""
    position, default = params.index(name), parameter_defaults(fn.node.args).get(name)
    values = []
    for method in model.in_forward:
        for call in method.nodes(ast.Call):
            if method.self_attr(call.func) != fn.name:
                continue
            passed = keyword(call, name) or (call.args[position] if position < len(call.args) else None)
            if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
                return _MISSING
            value = passed if passed is not None else default
            attr = method.self_attr(value) if value is not None else None
            facts = model.attrs.get(attr) if attr is not None else None
            if facts is not None and len(facts.assignments) == 1:
                value = facts.assignments[0][1]
            values.append(_literal(value) if value is not None else _MISSING)
    if not values or any(v is _MISSING for v in values) or len(set(map(repr, values))) != 1:
        return _MISSING
    return values[0]


# Said of a finding that ``behind_non_default_option`` made a warning (latent: the hazard is real only
# when the option is changed), after the rule's own message.
OPTION_PATH_NOTE = " (on a path behind a non-default option: only when that option is changed)"


# `built_outside:<module.Class>` in a finding's ``error_if``: the option the finding is behind was
# read off the constructions of that class in its own file, and a scanned file other than that
# one builds or imports the class (ClassIndex.built_outside): its constructions are not read.
BUILT_OUTSIDE_CONDITION = "built_outside:"


# `built_only_in_own_file:<module.Class>,...` in a finding's ``advice_if``: advice only where no
# scanned file but its own builds or imports any of those classes (ClassIndex.built_outside). Said of
# a path behind an option that every construction of the class, in its file, leaves at its default
# (or passes off): the scanned program never takes it, so it is dead code there, not a latent knob.
BUILT_ONLY_IN_OWN_FILE_CONDITION = "built_only_in_own_file:"
# Entries of a ``built_by`` set that are not classes whose required option their constructions
# decided (see ``built_outside_requirement``): ``CHANGEABLE_DEFAULT``, the option was decided by a
# parameter's default that a caller may change (forward's, or a constructor's that no construction
# in its file shows kept); ``KEPT_DEFAULT`` + a class, every construction of that class in its file
# keeps the constructor parameter's default.
CHANGEABLE_DEFAULT = "default:"
KEPT_DEFAULT = "kept:"


def option_constructions(model: ModelClass, fn: FunctionInfo, node: ast.AST) -> dict | None:
    """None where ``node`` is not behind a non-default option (``behind_non_default_option``); else
    the ``Violation`` keywords for a finding that makes lighter: ``error_if`` the classes whose
    constructions decided the option's default are built elsewhere (an error there, as the path may
    run); ``advice_if`` they are not, where no default a caller may change took part in deciding it
    (every construction of the classes keeps the option off: the path is dead in the scanned code);
    empty where a parameter's own default, which no construction shows kept, decided it."""
    built_by: set[str] = set()
    if not behind_non_default_option(model, fn, node, built_by):
        return None
    return _built_outside(built_by)


def read_back_constructions(model: ModelClass, name: str) -> dict:
    """``option_constructions`` for a finding that ``read_back_only_behind_option`` made lighter."""
    built_by: set[str] = set()
    read_back_only_behind_option(model, name, built_by)
    return _built_outside(built_by)


def _built_outside(built_by: set[str]) -> dict:
    settled = {}
    if outside := built_outside_requirement(built_by):
        settled["error_if"] = outside
    classes = sorted(name.removeprefix(KEPT_DEFAULT) for name in built_by if name != CHANGEABLE_DEFAULT)
    if classes and CHANGEABLE_DEFAULT not in built_by:
        settled["advice_if"] = (BUILT_ONLY_IN_OWN_FILE_CONDITION + ",".join(classes),)
    return settled


def built_outside_requirement(built_by: set[str]) -> tuple[frozenset[str], ...]:
    """The condition, in the form of ``Violation.requires``, that a class in ``built_by`` (whose
    constructions in its own file decided an option) is built or imported by another scanned file."""
    deciders = _required_deciders(built_by)
    return (frozenset(BUILT_OUTSIDE_CONDITION + name for name in deciders),) if deciders else ()


def _required_deciders(built_by: set[str]) -> set[str]:
    """The classes of ``built_by`` whose constructions decided a required option (not its markers)."""
    return {name for name in built_by if name != CHANGEABLE_DEFAULT and not name.startswith(KEPT_DEFAULT)}


def read_back_only_behind_option(model: ModelClass, name: str, built_by: set[str] | None = None) -> bool:
    """Does the class read ``self.<name>`` back (beyond its metadata and its own updates,
    `self.n += 1`, `self.n = self.n + 1`) only where ``behind_non_default_option`` holds, at least
    once? Then state a replica loses changes nothing on the default path (KD_Pipeline's BasicBlock
    counts `self.num_batches_tracked += 1` every call and reads it only under `if self.drop_rate > 0:`,
    `drop_rate=0.0`). Every method but ``__init__`` counts, forward-reachable or not."""
    reads = 0
    for fn in model.all_methods:
        if fn.name == "__init__":
            continue
        for n in fn.nodes(ast.Attribute):
            if not (isinstance(n.ctx, ast.Load) and fn.self_attr(n) == name) or _metadata_read(fn, n):
                continue
            update = fn.enclosing(n, (ast.Assign, ast.AugAssign))
            if update is not None and any(fn.self_attr(t) == name for t in getattr(update, "targets", ())):
                continue  # `self.n = self.n + 1`: the update itself
            if not behind_non_default_option(model, fn, n, built_by):
                return False
            reads += 1
    return reads > 0


_MISSING = object()


# `if self.drop_rate > 0:`: an ordering test of an option against a number, as Python evaluates it.
_ORDERINGS = {ast.Gt: operator.gt, ast.GtE: operator.ge, ast.Lt: operator.lt, ast.LtE: operator.le}


def _value_by_default(model: ModelClass, fn: FunctionInfo, test: ast.AST, built_by: set[str]) -> bool | None:
    """What ``test`` evaluates to at its option's default (see ``behind_non_default_option``), or None
    where no default decides it."""
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.Eq, ast.NotEq)) \
            and (want := _literal(test.comparators[0])) is not _MISSING:
        negate = isinstance(test.ops[0], ast.NotEq)
        default = _default_of(model, fn, test.left, built_by)
        return None if default is _MISSING else (default == want) != negate
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and type(test.ops[0]) in _ORDERINGS \
            and _number(bound := _literal(test.comparators[0])):
        default = _default_of(model, fn, test.left, built_by)
        return _ORDERINGS[type(test.ops[0])](default, bound) if _number(default) else None
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        default = _default_of(model, fn, test.operand, built_by)
        return None if default is _MISSING else not default
    default = _default_of(model, fn, test, built_by)
    return None if default is _MISSING else bool(default)


def _default_of(model: ModelClass, fn: FunctionInfo, subject: ast.AST, built_by: set[str]):
    if isinstance(subject, ast.Name):
        # The constructor's and forward's keyword options are the user's choice; a helper's
        # defaults are not options (forward passes what it computed).
        if fn.name not in ("forward", "__init__"):
            return _MISSING
        default = _param_default(fn, subject.id)
        if default is _MISSING and fn.name == "__init__":
            default = _constructor_default(model, fn, subject.id, built_by)
        elif default is not _MISSING:
            default = _noted_default(model, fn, subject.id, default, built_by)
        return default
    attr = fn.self_attr(subject)
    facts = model.attrs.get(attr) if attr is not None else None
    if facts is None or len(facts.assignments) != 1:
        return _MISSING
    _, value, where = facts.assignments[0]
    if where.owner is not None and where.owner.node is not model.info.node and any(
            isinstance(n, FUNCTION_DEFS) and n.name == "__init__" for n in model.info.node.body):
        return _MISSING  # set by a base's `__init__`, which this class's own may call with another value
    if (constant := _literal(value)) is not _MISSING:
        return constant
    if not isinstance(value, ast.Name):
        return _MISSING
    default = _param_default(where, value.id)
    if default is _MISSING and where.name == "__init__" and value.id in parameters_of(where):
        # `self.keep = keep`, a required flag: off where every construction here passes it off
        default = _constructor_default(model, where, value.id, built_by)
    elif default is not _MISSING:
        default = _noted_default(model, where, value.id, default, built_by)
    return default


def _noted_default(model: ModelClass, fn: FunctionInfo, name: str, default, built_by: set[str]):
    """Parameter ``name`` of ``fn`` as its ``default`` decides it, with how it came to hold it noted
    in ``built_by``: written out by every construction of the class in its file (at least one; BYOL's
    `NetWrapper(..., layer=hidden_layer)` after `hidden_layer = -1`, `def __init__(self, ..., layer=-1)`),
    or a default a caller may change (forward's, a constructor's that the file builds nowhere, or
    that a construction leaves out or passes a value it cannot read). _MISSING where a construction
    passes another constant: the default does not decide what this program runs."""
    if fn.name == "__init__" and fn.owner is not None and fn.owner.node is model.info.node \
            and name not in fn.local_values:
        kept = _kept_by_constructions(model.ctx, model.info, fn, name, default)
        if kept is _MISSING:
            return _MISSING
        if kept:
            built_by.add(KEPT_DEFAULT + model.info.qualname)
            return default
    built_by.add(CHANGEABLE_DEFAULT)
    return default


def _kept_by_constructions(ctx, info, init: FunctionInfo, name: str, default):
    """Does every construction of class ``info`` in this file, at least one, pass parameter ``name``
    its ``default`` written out (as a constant, or a local name whose one reaching assignment is that
    constant)? One that leaves it out uses the class's knob as it stands, which its users may turn.
    _MISSING where one passes another constant (`Probe(net, layer=-2)`)."""
    kept = True
    found = False
    for call, arg in _construction_arguments(ctx, info, init, name):
        kept = kept and arg is not None
        if arg is not None and arg is not _MISSING:
            if isinstance(arg, ast.Name) and (bound := reaching_assignment(ctx, arg.id, arg)) is not None \
                    and bound.value is not None:
                arg = bound.value  # `hidden_layer = -1` (a plain assignment binds the name to the value)
            value = _literal(arg)
            if value is not _MISSING and (type(value) is not type(default) or value != default):
                return _MISSING
            kept = kept and value is not _MISSING
        kept = kept and arg is not _MISSING
        found = True
    return kept and found


def behind_undecided_flag(model: ModelClass, fn: FunctionInfo, node: ast.AST) -> str | None:
    """The required constructor parameter whose truth gates ``node``, where nothing in the file
    decides it: an enclosing `if self.keep:` (an `and` of tests too) with `self.keep = keep` set
    once in `__init__` from a parameter that has no default, where the file has no construction of
    the class at all. Whether that path runs is up to code that builds the class elsewhere; None
    where no such flag gates ``node``."""
    cur, child = fn.parent(node), node
    while cur is not None:
        if isinstance(cur, ast.If) and child is not cur.test and any(child is s for s in cur.body):
            tests = cur.test.values if isinstance(cur.test, ast.BoolOp) and isinstance(cur.test.op, ast.And) \
                else [cur.test]
            for test in tests:
                if (flag := _undecided_flag(model, fn, test)) is not None:
                    return flag
        cur, child = fn.parent(cur), cur
    return None


def _undecided_flag(model: ModelClass, fn: FunctionInfo, test: ast.AST) -> str | None:
    attr = fn.self_attr(test)
    facts = model.attrs.get(attr) if attr is not None else None
    if facts is None or len(facts.assignments) != 1:
        return None
    _, value, where = facts.assignments[0]
    if not (isinstance(value, ast.Name) and where.name == "__init__" and where.owner is not None
            and where.owner.node is model.info.node and value.id in parameters_of(where)
            and _param_default(where, value.id) is _MISSING):
        return None
    # Only where the file builds the class nowhere: a construction here that passes something
    # not constant leaves the flag unknown, which stays an error (the attribute rule's docs).
    built_here = next(iter(_construction_arguments(model.ctx, model.info, where, value.id)), None)
    return value.id if built_here is None else None


def on_as_built(model: ModelClass, fn: FunctionInfo, subject: ast.AST, built_by: set[str]) -> bool:
    """Is the option ``subject`` true as the class is built (``_default_of``: a parameter of ``fn``,
    forward or the constructor, or `self.<attr>` that a method sets once from a constant or one of
    its parameters)? Where a parameter's own default decides it, no construction of the class in its
    file may pass another constant for it (`Tagger(batch_first=False)` next to `def __init__(self,
    batch_first=True)`); where the file's constructions decide a required one, their classes go into
    ``built_by`` as ``_default_of`` puts them (a construction in another scanned file is not read)."""
    decided: set[str] = set()
    value = _default_of(model, fn, subject, decided)
    if value is _MISSING or not value:
        return False
    if isinstance(subject, ast.Name):
        init, name = fn, subject.id
    else:
        _, held, init = model.attrs[fn.self_attr(subject)].assignments[0]
        name = held.id if isinstance(held, ast.Name) else None  # `self.opt = True`: nothing passes it
    if name is not None and name in init.local_values:
        return False  # the parameter is rebound (`batch_first = not time_major`): not what callers pass
    if not _required_deciders(decided) and name is not None and init.name == "__init__" and any(
            isinstance(arg, ast.Constant) and arg.value != value
            for _, arg in _construction_arguments(model.ctx, model.info, init, name)):
        return False
    built_by |= _required_deciders(decided)  # (not how a default was kept: that is for advice_if)
    return True


def _constructor_default(model: ModelClass, init: FunctionInfo, name: str, built_by: set[str]):
    """A required constructor parameter's default as the layers that build this class pass it:
    every construction in the file (`Layer(dim, mode)` in `Block.__init__(self, mode="fast")`)
    hands on the same constant, or the same parameter of its own constructor whose value, its
    default or what every construction of that class in the file passes, is that constant. At
    least one construction; the classes whose constructions decided it go into ``built_by`` by
    qualified name (only once it is decided)."""
    deciders: set[str] = set()
    value = _passed_by_constructions(model.ctx, model.info, init, name, deciders, 0)
    if value is not _MISSING:
        built_by |= deciders
    return value


def _passed_by_constructions(ctx, info, init: FunctionInfo, name: str, deciders: set[str], depth: int):
    """The one value every construction of class ``info`` in this file passes for parameter
    ``name`` of its ``__init__`` (its default where a call leaves it out), or _MISSING: none
    seen for a required parameter, `*args`/`**kwargs`, any other value than a constant or a
    parameter of the enclosing class's `__init__` handed on (followed the same way, a few levels)."""
    if depth > 3:
        return _MISSING
    deciders.add(info.qualname)
    default = _param_default(init, name)
    found = set()
    for call, arg in _construction_arguments(ctx, info, init, name):
        if arg is _MISSING:
            return _MISSING
        if arg is None:
            if default is _MISSING:
                return _MISSING
            found.add(default)
            deciders.add(CHANGEABLE_DEFAULT)  # left to the default: still the builder's knob
            continue
        if (constant := _literal(arg)) is not _MISSING:
            found.add(constant)
            continue
        owner = ctx.enclosing(call, FUNCTION_DEFS)
        holder = ctx.enclosing(owner, ast.ClassDef) if owner is not None and owner.name == "__init__" else None
        outer = next((c for c in ctx.classes.values() if c.node is holder), None) if holder is not None else None
        if not (isinstance(arg, ast.Name) and outer is not None):
            return _MISSING
        outer_init = FunctionInfo(owner, None, ctx.tree_index)
        if arg.id not in parameters_of(outer_init):
            return _MISSING
        handed = _passed_by_constructions(ctx, outer, outer_init, arg.id, deciders, depth + 1)
        if handed is _MISSING:
            return _MISSING
        found.add(handed)
    if not found and default is not _MISSING:
        found.add(default)  # built nowhere in this file: its default (built_outside settles the rest)
        deciders.add(CHANGEABLE_DEFAULT)
    return found.pop() if len(found) == 1 else _MISSING


def _construction_arguments(ctx, info, init: FunctionInfo, name: str):
    """Each construction `Class(...)` of class ``info`` in this file (called by its simple name), with
    what it passes for parameter ``name`` of its ``__init__``: the argument, None where it leaves it
    out, _MISSING where a `*args` or `**kwargs` may hold it."""
    params = parameters_of(init)
    index = params.index(name) if name in params else None
    for call in ctx.nodes(ast.Call):
        if not (isinstance(call.func, ast.Name) and call.func.id == info.name):
            continue
        arg = keyword(call, name)
        if arg is None and index is not None and index < len(call.args) \
                and not any(isinstance(a, ast.Starred) for a in call.args[:index + 1]):
            arg = call.args[index]
        if arg is None and (any(isinstance(a, ast.Starred) for a in call.args)
                            or any(k.arg is None for k in call.keywords)):
            arg = _MISSING
        yield call, arg


def _param_default(fn: FunctionInfo, name: str):
    default = parameter_defaults(fn.node.args).get(name)
    return _literal(default) if default is not None else _MISSING


def _literal(node: ast.AST):
    """The value of a constant, or of a signed number (`-1`, which Python parses as a unary minus
    on 1); _MISSING for anything else."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)) \
            and isinstance(node.operand, ast.Constant) and _number(node.operand.value):
        return -node.operand.value if isinstance(node.op, ast.USub) else node.operand.value
    return _MISSING


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def time_major_source(node: ast.AST, fn: FunctionInfo, model: ModelClass, depth: int = 0) -> ast.Call | None:
    """The transpose that moved the batch off dim 0 of ``node``'s value, or None: `x.permute(2, 0, 1)`,
    `x.transpose(0, 1)`, `x.t()` of a batch-major value of forward's inputs, followed through local
    names of straight-line code, calls that keep the layout (`.contiguous()`, `.float()`) and
    submodule calls that keep it (crnn: `conv.permute(2, 0, 1)` then `self.rnn(conv)`, a
    sequence-first LSTM stack: the output is (T, B, C))."""
    if depth > 6:
        return None
    if isinstance(node, ast.Name):
        value = straight_line_value(fn, node)
        return time_major_source(value, fn, model, depth + 1) if value is not None else None  # UNASSIGNED: no call
    if not isinstance(node, ast.Call):
        return None
    func = node.func
    if isinstance(func, ast.Attribute) and func.attr in ("permute", "transpose", "t", "swapaxes", "swapdims") \
            and _moves_dim0_off(node):
        return node if _batch_major_at(func.value, fn, model, depth + 1) else None
    if isinstance(func, ast.Attribute) and func.attr in _LAYOUT_KEEPING_METHODS:
        return time_major_source(func.value, fn, model, depth + 1)
    attr = fn.self_attr(func)
    if attr is not None and node.args and keeps_layout(model, attr):
        return time_major_source(node.args[0], fn, model, depth + 1)
    return None


# Tensor methods whose result has its input's dims in the same order.
_LAYOUT_KEEPING_METHODS = frozenset({"contiguous", "float", "half", "double", "to", "cuda", "type_as", "clone",
                                     "detach", "relu", "sigmoid", "tanh", "softmax", "log_softmax"})


def _moves_dim0_off(call: ast.Call) -> bool:
    """`permute(2, 0, 1)` (dim 0 moved, not dropped), `transpose(0, k)`, `t()`: dim 0 is no longer the batch."""
    attr = call.func.attr
    if attr == "t":
        return not call.args
    args = call.args[0].elts if len(call.args) == 1 and isinstance(call.args[0], (ast.Tuple, ast.List)) else call.args
    if not all(isinstance(a, ast.Constant) and type(a.value) is int for a in args):
        return False
    dims = [a.value for a in args]
    if attr == "permute":
        return len(dims) > 1 and dims[0] != 0 and 0 in dims
    return len(dims) == 2 and 0 in dims and dims[0] != dims[1]


def _batch_major_at(node: ast.AST, fn: FunctionInfo, model: ModelClass, depth: int) -> bool:
    """Is ``node``'s value forward-input-derived with the batch in dim 0, at that point of straight-line code?"""
    if depth > 6:
        return False
    while isinstance(node, (ast.Call, ast.Attribute)):
        if isinstance(node, ast.Call):
            attr = fn.self_attr(node.func)
            if attr is not None:
                # `self.cnn(x)`: a submodule applied to a batch-major value keeps the batch in dim 0
                # (as batch_derived assumes).
                return bool(node.args) and _batch_major_at(node.args[0], fn, model, depth + 1)
            if _drops_batch_dim(node) or isinstance(node.func, ast.Attribute) and (
                    node.func.attr in _RESHAPERS or node.func.attr in ("view", "reshape", "flatten")):
                return False
            if isinstance(node.func, ast.Attribute) and node.func.attr == "squeeze" and (
                    not node.args or not (isinstance(node.args[0], ast.Constant) and node.args[0].value not in (0, False))):
                return False  # a bare squeeze drops a batch of one; squeeze(0) drops the batch
            node = node.func.value if isinstance(node.func, ast.Attribute) else None
        else:
            return False  # an attribute read (`x.T`, `x.shape`) is not the tensor's layout
    if isinstance(node, ast.Name):
        value = straight_line_value(fn, node)
        if value is UNASSIGNED:  # not rebound before this use: forward's argument itself
            return node.id in parameters_of(fn)
        return value is not None and _batch_major_at(value, fn, model, depth + 1)
    return False


# What straight_line_value answers for a name that no statement before the use binds.
UNASSIGNED = ast.Pass()


def straight_line_value(fn: FunctionInfo, use: ast.Name) -> ast.AST | None:
    """The value ``use`` reads when both its statement and the last assignment to the name before it
    are statements of the function's own body (no branch or loop decides which one runs);
    ``UNASSIGNED`` when no statement before it binds the name, None when that is not known."""
    body = fn.node.body
    use_stmt = next((s for s in body if s.lineno <= use.lineno <= (s.end_lineno or s.lineno)), None)
    if use_stmt is None or isinstance(use_stmt, _COMPOUND) and any(n.id == use.id for n in _bound_names(use_stmt)):
        return None  # a loop or a branch that rebinds the name around the use
    value: ast.AST | None = UNASSIGNED
    for stmt in body:
        if stmt is use_stmt:
            return value
        if any(isinstance(t, ast.Name) and t.id == use.id for t in _bound_names(stmt)):
            if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)):
                return None  # bound by a loop, a tuple, inside a branch: not one known value
            value = stmt.value
    return None


_COMPOUND = (ast.For, ast.AsyncFor, ast.While, ast.If, ast.With, ast.AsyncWith, ast.Try, ast.Match)


def _bound_names(stmt: ast.stmt) -> list[ast.Name]:
    return [n for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)]


def keeps_layout(model: ModelClass, attr: str) -> bool:
    """Does the submodule `self.<attr>` return its first input's dims in the same order? torch.nn
    layers do (a sequence-first LSTM returns (T, B, H) for (T, B, F), a Linear or a Conv acts on the
    last or channel dims), and so do containers of them and classes of this file whose code never
    transposes; a class of another file is not known."""
    facts = model.attrs.get(attr)
    if facts is None or not facts.assignments:
        return False
    return all(_built_layout_keeping(value, model.ctx, 0) for _, value, _ in facts.assignments)


_SPLITTING_LAYERS = frozenset({"MultiheadAttention", "Transformer", "TransformerDecoder", "TransformerDecoderLayer"})


def _built_layout_keeping(value: ast.AST, ctx, depth: int) -> bool:
    if depth > 3 or not isinstance(value, ast.Call):
        return False
    name = ctx.resolve(value.func) or ""
    if name in ("torch.nn.Sequential", "torch.nn.ModuleList"):
        elements = value.args[0].elts if value.args and isinstance(value.args[0], (ast.List, ast.Tuple)) \
            else value.args
        return bool(elements) and all(_built_layout_keeping(e, ctx, depth + 1) for e in elements)
    if name.startswith("torch.nn."):
        # Layers that take several sequences or return a tuple whose first element is not what the
        # code goes on with are left out.
        return name.rsplit(".", 1)[-1] not in _SPLITTING_LAYERS
    local = ctx.local_name(name)
    info = ctx.classes.get(local) if local else None
    if info is None:
        return False
    return not any(n.attr in _RESHAPERS for n in ctx.tree_index.nodes_within(info.node, ast.Attribute))


def needed_parts(test: ast.AST, truth: bool) -> list[ast.AST]:
    """The tests each of which must come out ``truth`` for ``test`` to: the conjuncts of an `and` that
    must hold, the disjuncts of an `or` that must fail (pix2pixHD's `if opt.isTrain and
    len(opt.gpu_ids) and not opt.fp16:` needs `not opt.fp16`, whatever the other two decide)."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And if truth else ast.Or):
        return [part for value in test.values for part in needed_parts(value, truth)]
    return [test]
