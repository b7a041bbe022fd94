"""
## What it does
Flags a tensor stored on `self` (`self.mask = torch.tril(torch.ones(n, n))`) that is
neither an `nn.Parameter` nor a registered buffer, when forward-reachable code reads it.

## Why is this bad?
`replicate()` copies only Parameters, buffers and submodules to each GPU; every other
attribute is shared by reference. A plain tensor therefore stays where it was created:
`model.to("cuda")` does not move it, and replica 1 sees the tensor on `cuda:0` (or the
CPU), so forward fails with `Expected all tensors to be on the same device, but found
at least two devices, cuda:1 and cuda:0!`. It is also missing from `state_dict()`.

A 0-dim tensor made from a Python number (`torch.tensor(2.0)`) is not flagged: PyTorch
lets 0-dim CPU tensors mix with CUDA tensors.

Not reported for a class that the scanned code builds only inside forward-reachable code
(`Regression(n)(x)` in a forward): each replica builds its own instance on its own thread, where
DataParallel has made the replica's device current, so a bare `.cuda()` in its `__init__` lands
on that device and nothing is shared.

Not reported either where the only writes are in a private helper (`_generate_anchor`) that the
file calls only as an unguarded statement of a `forward`'s body, its own class's or a subclass's:
per-call set-up.

Reported as a warning when forward builds the state itself (a decoding cache created on the
input's device) and only a method outside forward, never `__init__`, seeds it ahead of time:
the replicas share a seeded copy only if some caller runs that method on the wrapped model.

Not reported where every read moves it to the replica's device first: `self.t.to(x.device)`,
`self.t.type_as(x)`, a bare `.cuda()`, or a statement that rebinds `self.t = self.t.to(...)` before the
read on every path (earlier in the read's block or a block around it, or, for a read in a helper
method, among the statements forward opens with, before any call), or hands it as it is to a module-level
function of the project whose body opens by moving that parameter to its input's device
(`anchor_size = anchor_size.to(boxes.get_device())`, PointRCNN's `decode_bbox_target`). A move to one numbered GPU
(`.cuda(0)`, `.to("cuda:0")`) is no move to the replica's device and stays reported. Reported as a
warning where every read runs only behind an option left off by default (`if use_prior:` with
forward's `use_prior=False`): real only when a caller turns it on. Where no scanned call of the
class passes that option a value that can turn it on (every call leaves it out or passes the
constant False: `self.branch(x, use_prior=False)`), the path never runs in the scanned program:
advice only (info).

Not reported where forward only iterates a vector made on the CPU (`for freq in self.freqs:` over
`torch.linspace(...)`, a Fourier embedding's frequency bands) and uses each element only in arithmetic
with a tensor (`freq * x`): the elements are 0-dim CPU tensors, which CUDA ops take as scalars on
any device. A vector made on a GPU, or an element used otherwise (concatenated, indexed with),
stays reported.

Not reported when forward only hands values computed from the tensor to its layers
(`weights = F.softmax(self.alphas, dim=-1)`, then `cell(x, weights)`) and the layers of the
same file move what they are handed to their input's device (`w.to(x.device)`), as the
architecture weights of differentiable architecture search (PC-DARTS) are used: each replica
moves its own copy of the one shared tensor, and every replica's gradient reaches it.

Also flagged: a tensor stored from outside on the layers of a DataParallel wrapper (`for m in
model.modules(): m.bias = mean.view(-1)`, MUNIT's AdaIN parameters, with `model` the wrapper the
caller then runs): the store lands on the original layers, whose plain attributes every replica
shares, so each replica reads the whole batch's tensor against its own chunk.

## How to fix
Register it: `self.register_buffer("mask", torch.tril(torch.ones(n, n)), persistent=False)`,
or wrap it in `nn.Parameter(..., requires_grad=False)`.
"""

from __future__ import annotations

import ast

from dpcheck.analysis.bindings import statements_before
from dpcheck.analysis.dataflow import OPTION_PATH_NOTE, under_lazy_guard
from dpcheck.analysis.devices import UNMOVED_BY_CONDITION, moving_helpers
from dpcheck.analysis.guards import optional_argument_guard
from dpcheck.analysis.layer_stores import layer_stores
from dpcheck.analysis.options import OptionPath, every_path_off, off_by_default
from dpcheck.analysis.scripts import LIBRARY_ROOTS
from dpcheck.analysis.torch_api import FUNCTION_DEFS
from dpcheck.analysis.wrapping import OUTLIVES_CALL_CONDITION
from dpcheck.findings import Applicability, Severity, Subject
from dpcheck.findings import ObservationKind as K
from dpcheck.rule import Rule

# Methods whose result, read from forward, is the tensor on the replica's device (`.cuda()` bare or
# with the input's device, `.type_as(x)`), not the shared original.
_MOVES_TO_DEVICE = ("to", "cuda", "type_as")
# Copies of a tensor that a move may follow (`deepcopy(self.kernel).to(x.device)`, `self.k.clone().cuda()`):
# the moved copy is on the replica's device all the same.
_COPY_FUNCTIONS = frozenset({"copy.copy", "copy.deepcopy"})
_COPY_METHODS = frozenset({"clone", "detach", "contiguous", "float", "double", "half"})


class PlainTensorAttribute(Rule):
    code = "DP201"
    name = "plain-tensor-attribute"
    severity = Severity.ERROR
    forward_code_only = True
    confirms = frozenset({K.DEVICE_MISMATCH})
    summary = "A tensor on `self` that is not a buffer or Parameter is not moved or replicated"
    fix_hint = "Use self.register_buffer(name, tensor, persistent=False) instead of a plain attribute"
    bad_example = """
        class Masked(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.mask = torch.tril(torch.ones(n, n))

            def forward(self, x):
                return x.masked_fill(self.mask == 0, 0.0)
    """
    good_example = """
        class Masked(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.register_buffer("mask", torch.tril(torch.ones(n, n)), persistent=False)
                self.scale = torch.tensor(2.0)

            def forward(self, x):
                return x.masked_fill(self.mask == 0, 0.0) * self.scale
    """

    def check_class(self, model):
        candidates = {name: facts for name, facts in model.attrs.items()
                      if "tensor" in facts.kinds and not facts.registered}
        if not candidates:
            return
        # An instance built only inside forward-reachable code is built on each replica's own thread
        # and device (parallel_apply sets it) and shared by none: its attributes are its replica's.
        model.conditions.add(f"{OUTLIVES_CALL_CONDITION}{model.info.qualname}")
        used, moved = set(), set()
        plain: set[str] = set()  # read as they are, not handed to a function that may move them
        handed: dict[str, set[str]] = {}  # name -> `unmoved_by:` conditions of its reads handed to functions
        reads: dict[str, list] = {}  # name -> (function, node) of each read that uses it as it is
        for fn in model.reachable:
            for node in fn.nodes(ast.Attribute):
                name = fn.self_attr(node)
                if name in candidates and isinstance(node.ctx, ast.Load):
                    if _moved_to_replica(fn, _copied(model, fn, node)):
                        moved.add(name)  # `self.freqs.to(x.device)`: follows the replica
                    elif _fallback_when_no_target(fn, node) or _rebound_moved_before(model, fn, node, name):
                        moved.add(name)
                    elif _iterated_into_scalars(fn, node) and _cpu_vector(model, candidates[name]):
                        moved.add(name)  # its 0-dim CPU elements are scalars to CUDA ops on any device
                    elif (mover := _handed_to_mover(model, fn, node)) is not None:
                        if mover:  # a function of another file: its summary tells
                            used.add(name)
                            handed.setdefault(name, set()).add(mover)
                            reads.setdefault(name, []).append((fn, node))
                        else:
                            moved.add(name)  # a function of this file that moves it first
                    else:
                        used.add(name)
                        plain.add(name)
                        reads.setdefault(name, []).append((fn, node))
        reachable = {id(fn.node) for fn in model.reachable}
        for name in sorted(used):
            if _handed_to_layers_that_move_it(model, name):
                continue
            assignments = candidates[name].assignments
            if all(id(fn.node) in reachable and not under_lazy_guard(fn, target)
                   or fn.name in model.ctx.fact(_set_up_only_by_forwards) for target, _, fn in assignments):
                # Set on every call by forward's own code (a decoding cache set up per call): each
                # replica builds its own copy where it runs; the original's is never shared.
                continue
            seeded_by = _seeded_by_setup_method(model, name, assignments)
            # Handed only to functions of other files: held unless each moves what it is handed.
            unmoved = () if name in plain else (frozenset(handed[name]),)
            behind_option = _read_only_behind_options(model, reads[name])
            for target, value, fn in assignments:
                kind, _, _ = model.classify(value, fn)
                if kind == "tensor":
                    fix = None
                    if isinstance(fn.parent(target), ast.Assign) and len(fn.parent(target).targets) == 1:
                        # Never reassigned: the buffer is exactly the attribute, moved and replicated.
                        safe = len(candidates[name].assignments) == 1
                        fix = self.offer_fix("Register it as a non-persistent buffer (moved by `.to()`, "
                                             "replicated, not saved)",
                                             Applicability.SAFE if safe else Applicability.UNSAFE)
                    if seeded_by:
                        yield self.violation(
                            target, f"`self.{name}` is a plain tensor attribute that forward rebuilds "
                            f"itself; `{seeded_by}` seeds it outside forward: if that runs on the wrapped "
                            "model before a call, DataParallel replicas share the seeded copy on one device",
                            severity=Severity.WARNING, fix=fix, subject=Subject(attr=name), requires=unmoved)
                    else:
                        message = (f"`self.{name}` is a plain tensor attribute used in forward: `.to()` does "
                                   "not move it and DataParallel replicas share the original's copy on one device")
                        if behind_option is not None:
                            latent = dict(behind_option.latent)
                            latent["requires"] = (*latent.get("requires", ()), *unmoved)
                            yield self.violation(target, message + OPTION_PATH_NOTE, severity=Severity.WARNING,
                                                 fix=fix, subject=Subject(attr=name), **latent)
                        if behind_option is None or behind_option.default_path:
                            yield self.violation(target, message, fix=fix, subject=Subject(attr=name), requires=(
                                *((behind_option.default_path,) if behind_option is not None else ()), *unmoved))
                    break

    def check_file(self, ctx):
        # Tensors stored, from outside, on the layers of a wrapper (layer_stores: MUNIT's AdaIN parameters).
        for found in layer_stores(ctx):
            yield self.violation(found.store, f"`{ast.unparse(found.store)}` stores a tensor, neither a Parameter "
                                 f"nor a buffer, on a layer of `{found.wrapper}`, a DataParallel wrapper that line "
                                 f"{found.call.lineno} then runs: replicate() hands every replica that plain "
                                 "attribute by reference, the whole batch's tensor on the device it was made on "
                                 "(a size or device mismatch on each replica's chunk)",
                                 requires=found.wrap.requires, subject=Subject(attr=found.store.attr))

    def fix(self, finding, editor):
        import libcst as cst

        target = editor.node  # `self.<name>` in `self.<name> = value`
        assign = editor.enclosing(target, cst.Assign)
        if not isinstance(target, cst.Attribute) or assign is None or len(assign.targets) != 1:
            return
        owner, name = editor.code(target.value), target.attr.value
        call = cst.parse_expression(f'{owner}.register_buffer("{name}", None, persistent=False)')
        args = list(call.args)
        args[1] = args[1].with_changes(value=assign.value)  # the value keeps its own formatting
        editor.replace(assign, cst.Expr(call.with_changes(args=args)))

def _copied(model, fn, node):
    """The outermost copy of ``node`` (`deepcopy(node)`, `node.clone()`, chained), or ``node``."""
    while True:
        parent = fn.parent(node)
        if isinstance(parent, ast.Call) and len(parent.args) == 1 and parent.args[0] is node \
                and model.ctx.resolve(parent.func) in _COPY_FUNCTIONS:
            node = parent
        elif isinstance(parent, ast.Attribute) and parent.attr in _COPY_METHODS \
                and isinstance(call := fn.parent(parent), ast.Call) and call.func is parent and not call.args:
            node = call
        else:
            return node


def _set_up_only_by_forwards(ctx) -> frozenset[str]:
    """Private methods (`_generate_anchor`) that the file calls on `self` only as statements of the
    body of some class's `forward`, under no test, at least once: per-call set-up. A base class whose
    forward reads what only such a method writes is used through a subclass whose forward builds the
    state on each call (TFB's box coders: `pointwhCoder.forward` calls
    `self._generate_anchor(device=boxes.device)` first), so no replica reads a shared copy; the base
    alone never has the attribute at all."""
    calls: dict[str, bool] = {}
    for call in ctx.nodes(ast.Call):
        func = call.func
        if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self"
                and func.attr.startswith("_") and not func.attr.endswith("__")):
            continue
        # A statement of forward's own body, under no test: it runs on every call, not once to
        # build a missing value (`if self.anchor is None: self._generate_anchor()` may seed the original).
        statement = ctx.parent(call)
        caller = ctx.parent(statement) if isinstance(statement, (ast.Expr, ast.Assign)) else None
        in_forward = isinstance(caller, FUNCTION_DEFS) and caller.name == "forward"
        calls[func.attr] = calls.get(func.attr, True) and in_forward
    for node in ctx.nodes(ast.Attribute):
        if node.attr in calls and not (isinstance(call := ctx.parent(node), ast.Call) and call.func is node):
            calls[node.attr] = False  # handed on (`hook(self._setup)`): it may run anywhere
    return frozenset(name for name, only_forward in calls.items() if only_forward)


def _seeded_by_setup_method(model, name, assignments) -> str | None:
    """The method that seeds `self.<name>` when forward builds the state itself (a decoding cache
    that forward creates on the input's device and that a setup method, such as recurrent_gemma's
    `_setup_cache` called by a parent model or by generation, may create ahead of time). Whether
    the seeded copy is ever shared by replicas depends on a caller outside this class's forward:
    latent. None when `__init__` (which always runs) creates a tensor, or forward never writes it."""
    tensor_writers = {fn.name for _, value, fn in assignments if model.classify(value, fn)[0] == "tensor"}
    if not tensor_writers or "__init__" in tensor_writers:
        return None
    for fn in model.in_forward:
        for node in fn.nodes(ast.Assign):
            if any(fn.self_attr(t) == name for t in node.targets):
                return sorted(tensor_writers)[0]
    return None


def _iterated_into_scalars(fn, node) -> bool:
    """`for freq in self.freqs:` (or a comprehension over it) whose variable is read only as an
    operand of arithmetic that also has another operand, neither a constant nor the variable (`f(freq * x)`):
    each element is a 0-dim tensor combined with a tensor as a scalar, never used on its own."""
    loop = fn.parent(node)
    if not (isinstance(loop, (ast.For, ast.comprehension)) and loop.iter is node and isinstance(loop.target, ast.Name)):
        return False
    var = loop.target.id
    scope = loop.body if isinstance(loop, ast.For) else [fn.parent(loop)]
    reads = [n for stmt in scope for n in ast.walk(stmt) if isinstance(n, ast.Name) and n.id == var]
    if not reads or any(not isinstance(n.ctx, ast.Load) for n in reads):
        return False
    for read in reads:
        top, parent = read, fn.parent(read)
        while isinstance(parent, ast.BinOp) and isinstance(parent.op, _ARITHMETIC):
            top, parent = parent, fn.parent(parent)
        if top is read or not any(not isinstance(n, ast.Constant) and not (isinstance(n, ast.Name) and n.id == var)
                                  for n in _operands(top)):
            return False
    return True


_ARITHMETIC = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Pow, ast.FloorDiv, ast.Mod)


def _operands(node):
    """The operands of a chain of arithmetic (`2 * freq * x`: 2, freq, x)."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, _ARITHMETIC):
        yield from _operands(node.left)
        yield from _operands(node.right)
    else:
        yield node


# torch functions that make a 1-D tensor, on the CPU unless given a device.
_VECTOR_FUNCTIONS = frozenset({"torch.linspace", "torch.logspace", "torch.arange"})
_ELEMENTWISE_METHODS = frozenset({"float", "double", "exp", "exp2", "sqrt", "log", "pow", "clone", "detach"})


def _cpu_vector(model, facts) -> bool:
    """Is every value the attribute is assigned a 1-D tensor made on the CPU (`torch.linspace(1, f, n)`,
    `2 ** exps` with `exps` such a local, `torch.tensor([1., 2.])`), with no device and no move?"""
    return all(_makes_cpu_vector(model, fn, value, 0) for _, value, fn in facts.assignments)


def _makes_cpu_vector(model, fn, value, depth) -> bool:
    if depth > 3:
        return False
    if isinstance(value, ast.Name):
        values = fn.local_values.get(value.id)
        return bool(values) and all(_makes_cpu_vector(model, fn, v, depth + 1) for v in values)
    if isinstance(value, ast.BinOp) and isinstance(value.op, _ARITHMETIC):
        sides = [side for side in (value.left, value.right) if not isinstance(side, ast.Constant)]
        return bool(sides) and all(_makes_cpu_vector(model, fn, side, depth + 1) for side in sides)
    if not isinstance(value, ast.Call) or any(k.arg == "device" for k in value.keywords):
        return False
    func = value.func
    if isinstance(func, ast.Attribute) and func.attr in _ELEMENTWISE_METHODS:
        return _makes_cpu_vector(model, fn, func.value, depth + 1)
    name = model.ctx.resolve(func) or ""
    if name in _VECTOR_FUNCTIONS:
        return True
    return name == "torch.tensor" and len(value.args) == 1 and isinstance(value.args[0], (ast.List, ast.Tuple)) \
        and all(isinstance(e, (ast.Constant, ast.UnaryOp)) for e in value.args[0].elts)


def _fallback_when_no_target(fn, node) -> bool:
    """`self.f.to(device) if device is not None else self.f` (or a helper that moves it in the
    other branch): the attribute is used as it is only when the caller asks for no device,
    and forward's callers pass the input's device."""
    child, cur = node, fn.parent(node)
    while cur is not None and not isinstance(cur, ast.stmt):
        if isinstance(cur, ast.IfExp) and child is not cur.test and isinstance(cur.test, ast.Compare) \
                and len(cur.test.ops) == 1 and isinstance(cur.test.ops[0], (ast.Is, ast.IsNot)) \
                and isinstance(cur.test.left, ast.Name) and isinstance(cur.test.comparators[0], ast.Constant) \
                and cur.test.comparators[0].value is None:
            none_branch = cur.orelse if isinstance(cur.test.ops[0], ast.IsNot) else cur.body
            other = cur.body if none_branch is cur.orelse else cur.orelse
            target = cur.test.left.id
            if child is none_branch and any(isinstance(n, ast.Name) and n.id == target for n in ast.walk(other)):
                return True
        child, cur = cur, fn.parent(cur)
    return False


def _moved_to_replica(fn, node) -> bool:
    """Is ``node`` moved where it is read (`node.to(x.device)`, `node.cuda()`, `node.type_as(x)`), to
    a device that follows the replica: not a pinned one (`.cuda(0)`, `.to("cuda:0")`,
    `.to(torch.device("cuda", 0))`), where every replica but the first would still read a copy on
    another GPU than its input's."""
    parent = fn.parent(node)
    if not (isinstance(parent, ast.Attribute) and parent.attr in _MOVES_TO_DEVICE):
        return False
    call = fn.parent(parent)
    return not (isinstance(call, ast.Call) and call.func is parent and parent.attr != "type_as"
                and any(_pinned_device(arg) for arg in (*call.args[:1], *(k.value for k in call.keywords
                                                                         if k.arg == "device"))))


def _handed_to_mover(model, fn, node) -> str | None:
    """Where ``node`` is passed as it is to a module-level function (positionally or by keyword) of this
    file that moves that parameter to its input's device before using it (devices.moving_helpers): "".
    Of another file of the project: the ``unmoved_by:`` condition the index settles. Else None."""
    call = fn.parent(node)
    keyword_arg = None
    if isinstance(call, ast.keyword):
        keyword_arg, call = call.arg, fn.parent(call)
    if not (isinstance(call, ast.Call) and isinstance(call.func, (ast.Name, ast.Attribute)) and call.func is not node):
        return None
    if keyword_arg is None and node not in call.args:
        return None
    ctx = model.ctx
    position = -1 if keyword_arg is not None else call.args.index(node)
    if isinstance(call.func, ast.Name) and call.func.id in ctx.module_functions:
        entries = ctx.fact(moving_helpers).get(call.func.id, ())
        return "" if any(e.partition("|")[2] == keyword_arg if position == -1 else e.partition("|")[0] == str(position)
                         for e in entries) else None
    name = ctx.resolve(call.func)
    if not name or name.startswith(LIBRARY_ROOTS):
        return None
    return f"{UNMOVED_BY_CONDITION}{name}@{position}|{keyword_arg or ''}"


def _pinned_device(node) -> bool:
    """One GPU named by number: `0`, `"cuda:0"`, `torch.device("cuda:1")`, `torch.device("cuda", 0)`."""
    if isinstance(node, ast.Constant):
        value = node.value
        return value.__class__ is int or isinstance(value, str) and value.startswith("cuda:")
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "device" \
        and any(_pinned_device(arg) for arg in node.args)


def _moved_rebind(fn, stmt) -> str | None:
    """The attribute that ``stmt`` rebinds to its own copy moved to the replica's device
    (`self.mean = self.mean.type_as(x)`), or None."""
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.value, ast.Call)
            and isinstance(stmt.value.func, ast.Attribute)):
        return None
    name = fn.self_attr(stmt.targets[0])
    moved = stmt.value.func.value
    if name is None or fn.self_attr(moved) != name or not _moved_to_replica(fn, moved):
        return None
    return name


def _rebound_moved_before(model, fn, node, name: str) -> bool:
    """Does a statement that rebinds `self.<name>` to its copy moved to the replica's device
    (`self.mean = self.mean.type_as(x)`) run before this read on every path? Earlier in the read's
    block or in a block around it (SwinIR's forward; DeepCTR's `if self.mode == "mean":` block,
    which converts `self.eps` first), or, for a read in a helper method forward calls, among the
    statements forward's own body opens with, before any that may call a method (faster-rcnn's
    proposal target layer converts its normalising tensors first, then its helpers read them)."""
    child, cur = node, fn.parent(node)
    while cur is not None:
        if isinstance(child, ast.stmt) and any(_moved_rebind(fn, before) == name
                                               for before in statements_before(cur, child)):
            return True
        if cur is fn.node:
            break
        child, cur = cur, fn.parent(cur)
    forward = model.forward
    if forward is None or fn.node is forward.node or fn.name == "__init__" \
            or not any(f.node is fn.node for f in model.in_forward):
        return False
    for stmt in forward.node.body:
        rebound = _moved_rebind(forward, stmt)
        if rebound == name:
            return True
        if rebound is None and any(isinstance(n, ast.Call) for n in ast.walk(stmt)):
            return False  # a call may run the helper before the conversion
    return False


def _read_only_behind_options(model, reads):
    """Where every read that uses the tensor as it is runs only behind an option off by default
    (``options.off_by_default``: `if use_stereoshape:` with forward's `use_stereoshape=False`), how a
    latent finding is reported (``options.OptionPath``); None where one read is on the default path."""
    return every_path_off([_unless_unpassed(model, fn, node, off_by_default(model, fn, node)) for fn, node in reads])


def _unless_unpassed(model, fn, node, path):
    """``path`` with advice added where forward's own option gates the read (`if use_stereoshape:`,
    `use_stereoshape=False`) and no scanned call passes it a value that takes the path (a call
    passing the constant False passes nothing: handnet's `self.mano_branch(..., use_stereoshape=False)`)."""
    if path is None:
        return None
    guard = optional_argument_guard(model, fn, node)
    if not guard:
        return path
    return OptionPath({**path.latent, "advice_if": path.latent.get("advice_if", ()) + guard["advice_if"]},
                      path.default_path)


def _handed_to_layers_that_move_it(model, name: str) -> bool:
    """PC-DARTS's architecture weights: forward only derives values from `self.<name>`
    (`weights = F.softmax(self.alphas, dim=-1)`) and hands them to its layers
    (`cell(s0, s1, weights)`), and the layers of this file move what they are handed to their
    input's device before using it (`w.to(x.device)`, `weights[i].to(h.device)`). Each replica
    then reads the one shared tensor and moves its own copy where it runs (the gradients of
    all replicas reach the shared tensor); a file whose layers use the values as handed (DARTS's
    `w * op(x)`) keeps the finding."""
    if not model.ctx.fact(_layers_move_their_arguments):
        return False
    for fn in model.reachable:
        derived = _derived_locals(model, fn, name)
        for node in fn.nodes(ast.Attribute, ast.Name):
            if isinstance(node, ast.Attribute):
                if fn.self_attr(node) != name or not isinstance(node.ctx, ast.Load):
                    continue
            elif node.id not in derived or not isinstance(node.ctx, ast.Load):
                continue
            if not (_assigned_to(fn, node, derived) or _argument_of_layer_call(model, fn, node)):
                return False
    return True


def _derived_locals(model, fn, name: str) -> set[str]:
    """Local names this function computes from `self.<name>` (directly or through each other), not
    counting what a layer returns when handed them (`s1 = cell(s0, s1, weights)` is the layer's output)."""
    derived: set[str] = set()
    assigns = sorted(fn.nodes(ast.Assign), key=lambda n: (n.lineno, n.col_offset))
    for _ in range(2):  # `w2 = softmax(self.b[0:2])` ... `w2 = torch.cat([w2, t])` with `t` after it
        for node in assigns:
            if _mentions(model, fn, node.value, name, derived):
                derived.update(n.id for t in node.targets for n in ast.walk(t) if isinstance(n, ast.Name))
    return derived


def _mentions(model, fn, node, name: str, derived: set[str]) -> bool:
    if isinstance(node, ast.Attribute) and fn.self_attr(node) == name \
            or isinstance(node, ast.Name) and node.id in derived:
        return True
    if isinstance(node, ast.Call) and _layer(model, fn, node.func):
        return False
    return any(_mentions(model, fn, child, name, derived) for child in ast.iter_child_nodes(node))


def _assigned_to(fn, node, derived: set[str]) -> bool:
    """Is ``node`` read only to compute a value bound to names of ``derived``?"""
    cur = fn.parent(node)
    while cur is not None and not isinstance(cur, ast.stmt):
        cur = fn.parent(cur)
    return isinstance(cur, ast.Assign) and all(
        isinstance(n, ast.Name) and n.id in derived for t in cur.targets for n in ast.walk(t)
        if isinstance(n, (ast.Name, ast.Attribute, ast.Subscript)) and not isinstance(n.ctx, ast.Load))


def _argument_of_layer_call(model, fn, node) -> bool:
    """Is ``node`` (or an item of it) an argument of a call to one of the module's layers?"""
    child, cur = node, fn.parent(node)
    while isinstance(cur, ast.Subscript) and cur.value is child:
        child, cur = cur, fn.parent(cur)
    return isinstance(cur, ast.Call) and child in cur.args and _layer(model, fn, cur.func)


def _layer(model, fn, func) -> bool:
    """Is ``func`` one of the module's layers: `self.cell` (not a method), `self.cells[i]`, or `cell`
    for a loop over `self.cells` (`enumerate(self.cells)`)?"""
    while isinstance(func, ast.Subscript):
        func = func.value
    attr = fn.self_attr(func)
    if attr is not None:
        return model.find_method(attr) is None and not model.has_property(attr)
    if isinstance(func, ast.Name):
        for loop in fn.nodes(ast.For):
            iterated = loop.iter
            if isinstance(iterated, ast.Call) and isinstance(iterated.func, ast.Name) \
                    and iterated.func.id in ("enumerate", "zip") and iterated.args:
                iterated = iterated.args[-1] if iterated.func.id == "enumerate" else iterated.args[0]
            if fn.self_attr(iterated) is not None and any(
                    isinstance(n, ast.Name) and n.id == func.id for n in ast.walk(loop.target)):
                return True
    return False


def _layers_move_their_arguments(ctx) -> bool:
    """Does a `forward` of this file move to a device what it is handed besides its input: an
    argument (`weights.to(x.device)`), an item of one (`weights[i].to(h.device)`), or a loop
    variable over one (`w.to(x.device)` for `w` in `zip(weights, ops)`)?"""
    for node in ctx.nodes(ast.FunctionDef):
        if node.name != "forward" or len(node.args.args) < 2:
            continue
        handed = {a.arg for a in node.args.args[1:]}
        first = node.args.args[1].arg  # the input; `x.to(dtype)` says nothing about weights handed down
        items: set[str] = set()
        for sub in ast.walk(node):
            if isinstance(sub, (ast.For, ast.comprehension)) and any(
                    isinstance(n, ast.Name) and n.id in handed | items for n in ast.walk(sub.iter)):
                items |= {n.id for n in ast.walk(sub.target) if isinstance(n, ast.Name)}
        for sub in ast.walk(node):
            if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) \
                    and sub.func.attr in _MOVES_TO_DEVICE:
                moved = sub.func.value
                if isinstance(moved, ast.Name) and moved.id in items:
                    return True
                if isinstance(moved, ast.Name) and moved.id in handed - {first}:
                    return True  # `weights.to(x.device)`
                if isinstance(moved, ast.Subscript):
                    while isinstance(moved, ast.Subscript):
                        moved = moved.value
                    if isinstance(moved, ast.Name) and moved.id in handed:
                        return True
    return False
