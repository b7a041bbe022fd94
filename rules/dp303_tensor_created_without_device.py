"""
## What it does
Flags tensor factories in code that runs during `forward` that create a tensor with
more than one element and no `device=`: `torch.tensor([1.0, 2.0])`, `torch.zeros(n)`,
`torch.ones`, `torch.arange`, `torch.randn`, `torch.rand`, `torch.full`, `torch.eye`,
`torch.linspace`, `torch.empty`... when the result is not moved right away.

Not flagged: a 0-dim `torch.tensor(2.0)` (PyTorch lets 0-dim CPU tensors mix with CUDA
tensors), `*_like` and `x.new_*` factories (they follow their argument), factories whose
result is immediately moved (`.to(x.device)`, `.cuda()`, `.type_as(x)`), and results
used only on the CPU (`.tolist()`, `.numpy()`, `.item()`), and factories that run only
without CUDA: in the `else` arm of `if torch.cuda.is_available():` or `if x.is_cuda:` (or of
`if use_cuda:`-style flags whose arm moves to CUDA), or under `if not torch.cuda.is_available():`.
There every input is on the CPU too, and no DataParallel replica runs. Nor is a factory whose
name is rebound to itself moved before the use (`ones = torch.ones(...)`, then `if self.use_cuda:
ones = ones.cuda()`, also in the loop body the factory is in, or unpacked together: `a, b = a.cuda(),
b.cuda()`): the CUDA flag is on wherever
DataParallel runs, and a bare `.cuda()` in a replica's thread goes to the replica's GPU. The
factory may be wrapped in `Variable(...)` or scaled by a Python number (a literal, or a parameter
that defaults to one) on the way: `rc = Variable(ratio * torch.ones(n))`, then `rc = rc.cuda()`.

## Why is this bad?
The factory makes a CPU tensor. Inside a DataParallel replica the inputs are on
`cuda:k`, so the first op that mixes them fails with `Expected all tensors to be on the
same device, but found at least two devices, cuda:0 and cpu!`. Code tested on a CPU
machine passes.

In a class that its file leaves out of `__all__` and that no scanned file uses (an offline
utility), this is advice only (info), as every rule's findings there are.

## How to fix
Pass the input's device: `torch.arange(n, device=x.device)`, or use
`x.new_zeros(...)` / `torch.zeros_like(x)`.
"""

from __future__ import annotations

import ast

from dpcheck.analysis.dataflow import parameter_defaults
from dpcheck.analysis.devices import input_to_follow, without_cuda_only
from dpcheck.analysis.torch_api import VARIABLE_CTORS
from dpcheck.findings import ObservationKind as K
from dpcheck.findings import Severity
from dpcheck.rule import Rule

FACTORIES = frozenset({"tensor", "as_tensor", "zeros", "ones", "empty", "full", "rand", "randn",
                       "randint", "randperm", "arange", "linspace", "logspace", "eye", "tril_indices",
                       "triu_indices", "Tensor", "FloatTensor", "LongTensor", "BoolTensor"})
_MOVES = frozenset({"to", "cuda", "type_as", "to_device"})
_CPU_ONLY = frozenset({"tolist", "numpy", "item"})


class TensorCreatedWithoutDevice(Rule):
    code = "DP303"
    name = "tensor-created-without-device"
    severity = Severity.ERROR
    forward_code_only = True
    confirms = frozenset({K.DEVICE_MISMATCH})
    summary = "A tensor factory without device= in forward makes a CPU tensor that meets GPU inputs"
    fix_hint = "Pass device=x.device, or use x.new_zeros / torch.zeros_like"
    bad_example = """
        class Positions(nn.Module):
            def forward(self, x):
                pos = torch.arange(x.shape[1])
                return x + pos
    """
    good_example = """
        class Positions(nn.Module):
            def forward(self, x):
                pos = torch.arange(x.shape[1], device=x.device)
                scale = torch.tensor(0.5)
                mask = torch.ones(x.shape[1]).to(x.device)
                sizes = torch.tensor([1, 2]).tolist()
                return (x + pos) * scale * mask + x.new_zeros(x.shape) + sum(sizes)
    """

    def check_class(self, model):
        from dpcheck.analysis.classes import WRAPPED_CONDITION
        from dpcheck.analysis.outputs import gathered_verdict, returned_leaves

        resolve = model.ctx.resolve
        # What forward returns matters where DataParallel gathers it: a class top-level in its file
        # is gathered on the condition that no other scanned file builds it as a layer (votenet's
        # QueryAndGroup), which only the returned factories' findings carry.
        gathered, condition = gathered_verdict(model)
        returned = {id(leaf) for leaf, _, _ in returned_leaves(model)} \
            if gathered and not (condition or "").startswith(WRAPPED_CONDITION) else set()
        returned_requires = (frozenset({condition}),) if condition else ()
        for fn in model.reachable:
            for call, name in model.ctx.named_calls(fn):
                if not (name.startswith("torch.") and name.count(".") == 1
                        and name.rsplit(".", 1)[-1] in FACTORIES):
                    continue
                if any(k.arg == "device" for k in call.keywords) or _zero_dim(call, name) \
                        or without_cuda_only(call, fn.parent, resolve):
                    continue
                if id(call) in returned and not (returned_requires and _meets_model_tensor(call, fn, model)):
                    yield self.violation(call, f"`{ast.unparse(call.func)}(...)` without device= is returned from "
                                               "forward: a CPU tensor, which DataParallel's gather rejects",
                                         requires=returned_requires)
                    continue
                if not _meets_model_tensor(call, fn, model):
                    continue
                yield self.violation(call, f"`{ast.unparse(call.func)}(...)` in forward has no device=: it "
                                     "creates a CPU tensor, which fails against the replica's GPU inputs",
                                     fix=self.offer_fix("Create it on the input's device "
                                                        "(forward's first tensor argument)")
                                     if input_to_follow(fn, call) else None)

    def fix(self, finding, editor):
        import libcst as cst

        call = editor.node
        source = editor.first_input(call)
        if not isinstance(call, cst.Call) or not source or any(
                a.keyword is not None and a.keyword.value == "device" for a in call.args):
            return
        device = cst.parse_expression(f"f(device={source}.device)").args[0]
        args = list(call.args)
        if args:  # keep the last argument's own trailing comma/spacing on the new one
            last = args[-1]
            args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
            device = device.with_changes(comma=last.comma)
        editor.replace(call, call.with_changes(args=[*args, device]))


def _zero_dim(call, name) -> bool:
    if name.rsplit(".", 1)[-1] not in ("tensor", "as_tensor") or not call.args:
        return False
    arg = call.args[0]
    if isinstance(arg, ast.UnaryOp):
        arg = arg.operand
    return not isinstance(arg, (ast.List, ast.Tuple, ast.ListComp, ast.Call, ast.Starred))


_SHAPE_ONLY = frozenset({"view", "reshape", "unsqueeze", "squeeze", "expand", "repeat", "float", "long",
                         "int", "bool", "half", "flatten", "contiguous", "t", "transpose", "permute", "clone"})
_COMBINERS = frozenset({"cat", "stack", "where", "matmul", "mm", "bmm", "einsum", "maximum", "minimum",
                        "add", "mul", "sub", "div", "masked_fill", "gather", "index_select"})


def _meets_model_tensor(call, fn, model) -> bool:
    """Does the factory's CPU result meet a GPU tensor of the model (an input, a layer output,
    a parameter or buffer) in an op? Results that are moved first, used only on the CPU,
    used as indices or sizes, or combined only with other CPU values are not findings."""
    uses = [call]
    use = _climb(call, fn)
    if use is None:
        return False
    parent = fn.parent(use)
    # Through what keeps the factory's CPU tensor: `Variable(t)` returns t, and arithmetic with a
    # Python number gives another CPU tensor (`rc = Variable(ratio * torch.ones(n))`, moved later).
    while True:
        if isinstance(parent, ast.BinOp) and not isinstance(parent.op, (ast.Mod, ast.FloorDiv)):
            other = parent.right if parent.left is use else parent.left
            if _model_tensor(other, fn, model):
                return True
            if not _python_number(other, fn):
                break
        elif not (isinstance(parent, ast.Call) and parent.args and parent.args[0] is use
                  and model.ctx.resolve(parent.func) in VARIABLE_CTORS):
            break
        use = _climb(parent, fn)
        if use is None:
            return False
        parent = fn.parent(use)
    if isinstance(parent, ast.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0], ast.Name):
        name = parent.targets[0].id
        moved = _moved_in_place(name, parent, fn, model.ctx.resolve)
        uses = [n for n in fn.nodes(ast.Name) if n.id == name and isinstance(n.ctx, ast.Load)
                and (moved is None or n.lineno <= moved)]
    else:
        uses = [use]
    for node in uses:
        node = _climb(node, fn)
        if node is None:
            continue
        holder = fn.parent(node)
        if isinstance(holder, ast.BinOp) and not isinstance(holder.op, (ast.Mod, ast.FloorDiv)):
            other = holder.right if holder.left is node else holder.left
            if _model_tensor(other, fn, model):
                return True
        if isinstance(holder, (ast.List, ast.Tuple)):
            siblings, holder = holder.elts, fn.parent(holder)
        else:
            siblings = []
        if isinstance(holder, ast.Call):
            func = holder.func
            attr = fn.self_attr(func)
            if attr is not None and model.attrs.get(attr) and "module" in model.attrs[attr].kinds:
                return True  # fed to a layer whose weights are on the GPU
            name = (model.ctx.resolve(func) or "").rsplit(".", 1)[-1]
            if name in _COMBINERS or (isinstance(func, ast.Attribute) and func.attr in _COMBINERS):
                others = [*siblings, *holder.args]
                if isinstance(func, ast.Attribute) and fn.self_attr(func) is None:
                    others.append(func.value)
                if any(o is not node and _model_tensor(o, fn, model) for o in others):
                    return True
    return False


def _moved_in_place(name, created, fn, resolve):
    """The line of `name = name.cuda()` (or `.to(...)`, `.type_as(...)`, also unpacked from a tuple:
    `a, b = a.cuda(), b.cuda()`) after the statement ``created`` that runs whenever CUDA does and
    ``created`` has run (`if self.use_cuda: ones = ones.cuda()`, also in the loop body both are in),
    or None: uses after it see the moved tensor."""
    from dpcheck.analysis.devices import runs_whenever_cuda

    line = created.lineno

    for stmt in fn.nodes(ast.Assign):
        if stmt.lineno > line and len(stmt.targets) == 1 and any(
                _moves_itself(target, value, name) for target, value in _paired(stmt.targets[0], stmt.value)) \
                and runs_whenever_cuda(stmt, fn.parent, resolve, after=created):
            return stmt.lineno
    return None


def _paired(target, value):
    """The (target, value) pairs an assignment binds: itself, or element by element where a tuple
    is unpacked from a tuple of the same length (`a, b = a.cuda(), b.cuda()`)."""
    if isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (ast.Tuple, ast.List)) \
            and len(target.elts) == len(value.elts):
        return list(zip(target.elts, value.elts))
    return [(target, value)]


def _moves_itself(target, value, name) -> bool:
    """`name = name.cuda()` (or `.to(...)`, `.type_as(...)`)."""
    return isinstance(target, ast.Name) and target.id == name and isinstance(value, ast.Call) \
        and isinstance(value.func, ast.Attribute) and value.func.attr in _MOVES \
        and isinstance(value.func.value, ast.Name) and value.func.value.id == name


def _python_number(node, fn) -> bool:
    """A number literal (`2.0`, `-1`) or a parameter that defaults to one."""
    if isinstance(node, ast.Name) and node.id not in fn.local_values:
        return _number_default(fn, node.id)
    return _number_literal(node)


def _number_default(fn, name) -> bool:
    """A parameter that defaults to a number (`ratio=0`, `scale=-1.0`) is taken for a Python number,
    not an input tensor: the product of a number and a CPU tensor is still on the CPU."""
    return _number_literal(parameter_defaults(fn.node.args).get(name))


def _number_literal(node) -> bool:
    """`2.0`, `-1`, `+3`: an int or float constant, signed or not (a bool is not one)."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        node = node.operand
    return isinstance(node, ast.Constant) and type(node.value) in (int, float)


def _climb(node, fn):
    """Walk up through shape-only method calls (`.view`, `.unsqueeze`...); None if moved or CPU-only."""
    while True:
        parent = fn.parent(node)
        if not (isinstance(parent, ast.Attribute) and isinstance(fn.parent(parent), ast.Call)
                and fn.parent(parent).func is parent):
            return node
        if parent.attr in _MOVES or parent.attr in _CPU_ONLY:
            return None
        if parent.attr not in _SHAPE_ONLY:
            return node
        node = fn.parent(parent)


def _model_tensor(node, fn, model, depth=0) -> bool:
    """An input of forward, the output of one of the model's layers, or a parameter/buffer."""
    from dpcheck.analysis.dataflow import parameters_of

    if depth > 8:
        return False
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _SHAPE_ONLY:
        node = node.func.value
    if isinstance(node, ast.Name):
        if node.id in fn.local_values:
            return any(_model_tensor(v, fn, model, depth + 1) for v in fn.local_values[node.id])
        return fn.name == "forward" and node.id in parameters_of(fn) and not _number_default(fn, node.id)
    attr = fn.self_attr(node)
    if attr is not None:
        facts = model.attrs.get(attr)
        return bool(facts) and bool(facts.kinds & {"parameter", "buffer"})
    if isinstance(node, ast.Call):
        attr = fn.self_attr(node.func)
        if attr is not None and model.attrs.get(attr) and "module" in model.attrs[attr].kinds:
            return True
    if isinstance(node, ast.BinOp):
        return _model_tensor(node.left, fn, model, depth + 1) or _model_tensor(node.right, fn, model, depth + 1)
    if isinstance(node, ast.Subscript):
        return _model_tensor(node.value, fn, model, depth + 1)
    if isinstance(node, (ast.List, ast.Tuple)):
        return any(_model_tensor(e, fn, model, depth + 1) for e in node.elts)
    if isinstance(node, ast.Call) and (model.ctx.resolve(node.func) or "").rsplit(".", 1)[-1] in _COMBINERS:
        return any(_model_tensor(a, fn, model, depth + 1) for a in node.args)
    return False
