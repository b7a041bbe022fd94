"""Recognise device expressions: which pin a GPU index, and which follow the replica.

Under DataParallel each replica thread runs with its own GPU as the *current* device,
so `"cuda"`, `torch.device("cuda")`, a bare `.cuda()` and `x.device` all follow the
replica. Only an explicit index (`"cuda:0"`, `torch.device("cuda", 1)`, `.cuda(0)`,
`.to(0)`) or a device read off the original module's parameters pins one GPU.
"""

from __future__ import annotations

import ast
import re

from dpcheck.analysis.dataflow import keyword
from dpcheck.analysis.torch_api import FUNCTION_DEFS, MOVE_METHODS

_INDEXED = re.compile(r"^cuda:\d+$")


def pinned_device(node: ast.AST, resolve) -> str | None:
    """Source text of a device expression that names a fixed CUDA index, else None.

    A conditional expression pins when its GPU branch does: `"cuda:0" if cuda else "cpu"`
    is cuda:0 wherever a GPU (and so DataParallel) is present.
    """
    if isinstance(node, ast.IfExp):
        if pinned_device(node.body, resolve) or pinned_device(node.orelse, resolve):
            return ast.unparse(node)
        return None
    if isinstance(node, ast.Call) and resolve(node.func) == "torch.device" and node.args \
            and isinstance(node.args[0], ast.IfExp) and pinned_device(node.args[0], resolve):
        return ast.unparse(node)
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and _INDEXED.match(node.value):
        return repr(node.value)
    if isinstance(node, ast.Call) and resolve(node.func) == "torch.device":
        args = list(node.args)
        index = keyword(node, "index")
        if args and isinstance(args[0], ast.Constant) and isinstance(args[0].value, str):
            if _INDEXED.match(args[0].value):
                return ast.unparse(node)
            if args[0].value == "cuda" and (len(args) > 1 or index is not None):
                return ast.unparse(node)
        if args and isinstance(args[0], ast.Constant) and isinstance(args[0].value, int) \
                and not isinstance(args[0].value, bool):
            return ast.unparse(node)
    return None


def is_int_constant(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, int) \
        and not isinstance(node.value, bool)


def parameter_device(node: ast.AST, is_self) -> bool:
    """`next(self.parameters()).device`, `self.weight.device`-style reads off the module."""
    if not (isinstance(node, ast.Attribute) and node.attr == "device"):
        return False
    inner = node.value
    if isinstance(inner, ast.Call) and isinstance(inner.func, ast.Name) and inner.func.id == "next" \
            and inner.args and isinstance(inner.args[0], ast.Call):
        call = inner.args[0]
        return isinstance(call.func, ast.Attribute) and call.func.attr in (
            "parameters", "buffers", "named_parameters") and _rooted_at(call.func.value, is_self)
    return False


def _rooted_at(node: ast.AST, is_self) -> bool:
    while isinstance(node, ast.Attribute):
        node = node.value
    return is_self(node)


def placement_arguments(call: ast.Call) -> list[ast.AST]:
    """The arguments of ``call`` that choose a device: `device=`, `.to(d)`, `.cuda(d)`."""
    found = [k.value for k in call.keywords if k.arg == "device"]
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr in MOVE_METHODS and call.args:
        found.append(call.args[0])
    return found


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.Module)


def without_cuda_only(node: ast.AST, parent, resolve) -> bool:
    """Does ``node`` run only when CUDA is not in use? It is in the `else` arm of `if
    torch.cuda.is_available():`, `if x.is_cuda:` or `if use_cuda:` (a name that says cuda or gpu,
    whose arm moves to CUDA), or in the body of their negation. There every input is on the CPU,
    so nothing there meets a replica's GPU tensors."""
    child, cur = node, parent(node)
    while cur is not None and not isinstance(cur, _SCOPES):
        if isinstance(cur, (ast.If, ast.IfExp)) and child is not cur.test:
            test, positive = cur.test, True
            while isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
                test, positive = test.operand, not positive
            in_body = child in cur.body if isinstance(cur.body, list) else child is cur.body
            cuda_arm = cur.body if positive else cur.orelse
            if in_body != positive and _cuda_test(test, cuda_arm, resolve):
                return True
        child, cur = cur, parent(cur)
    return False


def runs_whenever_cuda(node: ast.AST, parent, resolve, after: ast.AST | None = None) -> bool:
    """Does ``node`` run whenever CUDA is in use: in no branch of its function, or only in the
    CUDA arm of tests that `without_cuda_only` reads (`if self.use_cuda: x = x.cuda()`)? Under
    DataParallel, which needs CUDA, such code always runs. With ``after`` (a statement before
    ``node``), only the branches that ``after`` is not inside count: a move in the same loop body
    as the statement it follows runs whenever that statement does."""
    outer = {}  # id of each node enclosing ``after`` -> its child on the way to ``after``
    child, cur = after, parent(after) if after is not None else None
    while cur is not None:
        outer[id(cur)] = child
        child, cur = cur, parent(cur)
    child, cur = node, parent(node)
    while cur is not None and not isinstance(cur, _SCOPES):
        if id(cur) in outer:  # both in one statement list (not `if` and `else` arms): same run
            return any(child in block and outer[id(cur)] in block for block in _statement_lists(cur))
        if isinstance(cur, (ast.If, ast.IfExp, ast.For, ast.While, ast.Try, ast.With)) and child is not getattr(
                cur, "test", None):
            if not isinstance(cur, (ast.If, ast.IfExp)):
                return False
            test, positive = cur.test, True
            while isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
                test, positive = test.operand, not positive
            in_body = child in cur.body if isinstance(cur.body, list) else child is cur.body
            cuda_arm = cur.body if positive else cur.orelse
            if in_body != positive or not _cuda_test(test, cuda_arm, resolve):
                return False
        child, cur = cur, parent(cur)
    return True


def _statement_lists(node: ast.AST) -> list[list]:
    return [block for field in ("body", "orelse", "finalbody", "handlers")
            for block in [getattr(node, field, None)] if isinstance(block, list)]


def _cuda_test(test: ast.AST, cuda_arm, resolve) -> bool:
    if isinstance(test, ast.Call) and resolve(test.func) == "torch.cuda.is_available":
        return True
    if isinstance(test, ast.Attribute) and test.attr == "is_cuda":
        return True
    name = test.attr if isinstance(test, ast.Attribute) else test.id if isinstance(test, ast.Name) else ""
    if not any(word in name.lower() for word in ("cuda", "gpu")):
        return False
    arm = cuda_arm if isinstance(cuda_arm, list) else [cuda_arm]
    return any(_moves_to_cuda(n) for stmt in arm for n in ast.walk(stmt))


def _moves_to_cuda(node: ast.AST) -> bool:
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "cuda":
        return True
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("cuda")


# Argument names that hold integer or boolean tensors: never a source of the activations' dtype.
_INTEGER_INPUT_NAMES = ("ids", "mask", "label", "index", "idx", "token", "length", "position", "step")


def followed_input(function_name: str, params: list[tuple[str, str]], floating: bool = False) -> str | None:
    """The input a replica's code should follow for its device (or, with ``floating``, its
    dtype): the first argument after ``self`` of ``forward``, given as (name, annotation source)
    pairs; None in any other function or when that argument is annotated as something other
    than a tensor. With ``floating``, the first one whose name does not say it holds integers
    (ids, masks, labels, lengths): its dtype is the activations' dtype. A fix that follows the
    input is offered (on the ``ast``) and made (on libcst's tree) only where this names one."""
    if function_name != "forward":
        return None
    for name, annotation in params[1:]:
        if annotation and "Tensor" not in annotation:
            return None
        if floating and any(word in name.lower() for word in _INTEGER_INPUT_NAMES):
            continue
        return name
    return None


def input_to_follow(fn, node: ast.AST, floating: bool = False) -> str | None:
    """:func:`followed_input` for ``node`` of ``fn`` (a FunctionInfo): its nearest enclosing def."""
    function = fn.enclosing(node, FUNCTION_DEFS) or fn.node
    if not isinstance(function, FUNCTION_DEFS):
        return None
    args = function.args
    params = [(a.arg, ast.unparse(a.annotation) if a.annotation else "") for a in args.posonlyargs + args.args]
    return followed_input(function.name, params, floating)


# A call of a function that moves a parameter (see ``moving_helpers``) carries
# `unmoved_by:<dotted name>@<position>|<parameter>`: held unless that function does (ClassIndex.moves_argument).
UNMOVED_BY_CONDITION = "unmoved_by:"
# Methods that put a tensor on the device of the input they name or on the current one.
_FOLLOWING_MOVES = frozenset({"to", "cuda", "type_as"})


def moves_to_current(call: ast.AST, resolve) -> bool:
    """Is ``call`` a move of a tensor to a device that follows the replica: `.to(x.device)`,
    `.to(x.get_device())`, a bare `.cuda()`, `.type_as(x)`, not one numbered GPU (`.cuda(0)`,
    `.to("cuda:0")`)?"""
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr in _FOLLOWING_MOVES):
        return False
    if call.func.attr == "type_as":
        return bool(call.args)
    targets = [*call.args[:1], *(k.value for k in call.keywords if k.arg == "device")]
    if call.func.attr == "to" and not targets:
        return False
    return not any(is_int_constant(t) or pinned_device(t, resolve) for t in targets)


def moving_helpers(ctx) -> dict[str, list[str]]:
    """This file's module-level functions that first move a parameter to the device of their input
    (`anchor_size = anchor_size.to(roi_box3d.get_device())` among the statements the body opens with,
    before any other read of it) -> `<position>|<name>` of each such parameter. A tensor a caller
    hands them is used on the replica's device, wherever it was made (PointRCNN's `decode_bbox_target`)."""
    if ".to(" not in ctx.source.text and ".cuda(" not in ctx.source.text and ".type_as(" not in ctx.source.text:
        return {}
    found: dict[str, list[str]] = {}
    for name, node in ctx.module_functions.items():
        params = [a.arg for a in (*node.args.posonlyargs, *node.args.args)]
        moved: list[str] = []
        seen: set[str] = set()  # parameters read before their move
        for stmt in node.body:
            if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
                continue  # the docstring
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name) \
                    and isinstance(stmt.value, ast.Call) and isinstance(stmt.value.func, ast.Attribute) \
                    and isinstance(stmt.value.func.value, ast.Name) \
                    and stmt.value.func.value.id == stmt.targets[0].id and stmt.targets[0].id in params \
                    and stmt.targets[0].id not in seen and moves_to_current(stmt.value, ctx.resolve):
                moved.append(stmt.targets[0].id)
            seen.update(n.id for n in ast.walk(stmt) if isinstance(n, ast.Name))
            if not isinstance(stmt, ast.Assign):
                break  # (only the statements the body opens with: later ones may sit behind a branch)
        if moved:
            found[name] = [f"{params.index(p)}|{p}" for p in moved]
    return found


def summarize_moving_helpers(ctx, result) -> None:
    """Fill ``result.moving_helpers`` (see ``moving_helpers``)."""
    result.moving_helpers = moving_helpers(ctx)
