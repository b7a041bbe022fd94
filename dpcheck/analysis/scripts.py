"""Training-script facts: which names hold an `nn.DataParallel` wrapper, where, and until when.

Hand-written summaries on the file's one node walk (no def-use library: beniget and
astroid cost a second walk or inference per file for what a few summaries give).

DataParallel forms: every dotted name torch exposes, import aliases, `from torch.nn import
*`, subclasses in this file, and imported classes whose name contains "Parallel" (kept on
condition that the project index finds DataParallel among their bases, ``dp:`` below).
The functional `nn.parallel.data_parallel(module, inputs)` wraps nothing a script can hold;
it is evidence that ``module``'s class is a wrapped model (``data_parallel_calls``).

A name holds a wrapper from an assignment whose value is one (a construction, a `.cuda()`
chain on one, either arm of a conditional expression, a name holding one, a call of a
function that returns one: in this file, or imported on condition ``builder:``; a function
that returns `<x>.module` on any path unwraps, and is no builder), until the
next assignment to it in the same scope that can follow it (an assignment in a mutually
exclusive branch does not end it: `if n > 1: m = DP(m) else: m = m.cuda()`). Across
functions: a parameter holds one in the whole function when a call site in this file passes
one (`train(model)`, `train(model=model)`, `Trainer(model)` for `__init__`), and `self.x`
holds one in every method of the class when any method assigns one to it. Inside
`if isinstance(m, nn.DataParallel):` (or `hasattr(m, "module")`) `m` is a wrapper; in its
`else` it is not; a use in the arm opposite to the one that wrapped (same test, or a
contradicting one) does not see that wrapper, nor a rebinding of it (`model = model.cuda()` after
`if multi_gpu: model = DataParallel(model)`, outside that `if`), which holds a wrapper only where
the assignment it rebinds wrapped.

Cross-file conditions are strings in a finding's ``requires`` that the project index
settles (see dpcheck.analysis.index): ``dp:<class>`` (a DataParallel subclass) and
``builder:<function>`` (returns a wrapper).
"""

from __future__ import annotations

import ast
import copy
import json
import re
import sys
from ast import literal_eval
from collections.abc import Iterator

from dpcheck.analysis.context import FileContext
from dpcheck.analysis.dataflow import argument, is_true, keyword, needed_parts
from dpcheck.analysis.torch_api import FUNCTION_DEFS, LOOP_STATEMENTS
from dpcheck.analysis.tree import FunctionInfo, cached_property
from dpcheck.constants import (
    DATAPARALLEL_CLASSES,
    DATAPARALLEL_FUNCTIONS,
    DATAPARALLEL_STAR_MODULES,
    DISTRIBUTED_DATAPARALLEL_CLASSES,
    DISTRIBUTED_DATAPARALLEL_NAME,
)
from dpcheck.record import record

_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Module, ast.Lambda)
# Methods that return the module itself: `DataParallel(net).cuda()` is still the wrapper.
SELF_RETURNING = frozenset({"cuda", "to", "train", "eval", "float", "half", "double", "bfloat16", "cpu",
                            "requires_grad_", "type"})
# Text in a file that can make any script rule fire (else they do not look at it).
# ("DataParallel" is one of the words "Parallel" finds.)
SCRIPT_TOKENS = ("Parallel", "data_parallel")
# Text of a training script: where a model built by an imported function may be a wrapper.
TRAINING_TOKENS = ("backward(", "torch.save(", "argparse", ".step()", "save_checkpoint")
_PASSES = 4  # fixpoint over builders and parameters: chains deeper than this are rare
# A builder key `<function>#<i>` (in ScriptFacts.builders, `FileResult.builders` and the project index's
# `builder:` conditions): the i-th element of the tuple the function returns is a wrapper.
RETURNED_ELEMENT = "#"


@record(frozen=True)
class Source:
    """Where a wrapper comes from: its construction (or a call that returns one), and conditions."""

    call: ast.AST
    requires: frozenset[str] = frozenset()  # cross-file conditions, all of which must hold
    dim: ast.AST | None = None  # `dim=k` of the construction
    note: str = ""  # e.g. "`MyDP` overrides gather"


@record(frozen=True)
class BuilderGuard:
    """The branches on a builder's own parameters that each of its wrapping returns runs under
    (`def create_model(opt, data_parallel=False): ... if data_parallel: model = DataParallel(model)`):
    a call whose constant arguments, or the defaults it leaves, fail every alternative gets the bare
    model (`create_model(opt)`)."""

    fn: ast.AST
    skip: int  # leading parameters a call binds itself (`self` of a method)
    # One alternative per wrapping return (and per wrap reaching it): (test, the truth its arm needs).
    alternatives: tuple[tuple[tuple[ast.AST, bool], ...], ...]

    def fails(self, call: ast.Call, rebound: set[str], holds_no_wrapper=None) -> bool:
        """Does ``call`` (of this file) leave every wrapping return unreachable? ``holds_no_wrapper``:
        whether an argument surely holds no DataParallel wrapper where the call runs."""
        env = _constant_arguments(self.fn, call, self.skip, rebound, holds_no_wrapper)
        return _alternatives_fail(self.alternatives, env)

    def text(self) -> str:
        """The ``guard:`` entry of the builder's conditions for other files (see guard_fails)."""
        positional = [a.arg for a in self.fn.args.posonlyargs + self.fn.args.args][self.skip:]
        defaults = _constant_defaults(self.fn)
        names = sorted({n.id for alternative in self.alternatives for test, _ in alternative
                        for n in ast.walk(test) if isinstance(n, ast.Name) and n.id != HOLDS_WRAPPER_TEST})
        params = {name: [positional.index(name) if name in positional else -1,
                         repr(defaults[name]) if name in defaults else None] for name in names}
        alternatives = [[[ast.unparse(test), truth] for test, truth in alternative] for alternative in self.alternatives]
        return GUARD_CONDITION + json.dumps([params, alternatives], separators=(",", ":"))


@record
class Wrap:
    """A name that holds a DataParallel wrapper, from its assignment (or parameter) to the
    next reassignment that can follow it."""

    name: str  # "model" or "self.model"
    source: Source
    scope: ast.AST  # function, class (for self.* attributes) or module
    start: int  # line of the assignment (or of the function, for a parameter)
    end: float  # line of the next reassignment that can follow it, or infinity
    origin: ast.AST | None = None  # the assignment, for branch exclusivity
    parameter: bool = False
    # For a parameter: every call site of this file that passes it a wrapper, with the number of
    # leading parameters the call binds itself (`self`).
    sites: tuple[tuple[ast.Call, int], ...] = ()
    # For a rebinding of a name that holds a wrapper (`model = model.cuda()` after `if multi_gpu:
    # model = DataParallel(model)`): the assignments that wrapped it, followed back through such
    # rebindings. It holds a wrapper only where one of them ran (empty: not a rebinding, or one of
    # a parameter's wrapper).
    roots: tuple[ast.AST, ...] = ()

    @property
    def call(self) -> ast.AST:
        return self.source.call

    @property
    def requires(self) -> tuple[frozenset[str], ...]:
        """For a Violation: each condition its own singleton set (all must hold)."""
        return tuple(frozenset({c}) for c in sorted(self.source.requires))

    def keeps_stock(self, method: str) -> tuple[frozenset[str], ...]:
        """For a Violation: where the wrap is by a DataParallel subclass of another file (`dp:<class>`),
        that it keeps the stock ``method`` ("scatter", "gather"), one condition per subclass."""
        return tuple(frozenset({f"{STOCK_METHOD_CONDITION}{method}:{c.partition(':')[2]}"})
                     for c in sorted(self.source.requires) if c.startswith("dp:"))

    @property
    def inner(self) -> ast.AST | None:
        call = self.source.call
        if not isinstance(call, ast.Call):
            return None
        return argument(call, 0, "module")


class ScriptFacts:
    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx
        self.parents = ctx._index[1]
        # The fixpoint's state (see _ensure).
        self._done = self._computing = False
        self._last_key: tuple = ()
        self._builders: dict[str, Source] = {}
        self._guards: dict[str, BuilderGuard] = {}
        self._wraps_by_name: dict[str, list[Wrap]] = {}

    # --- DataParallel forms ------------------------------------------------------------

    @cached_property
    def _star_dataparallel(self) -> bool:
        return any(isinstance(n, ast.ImportFrom) and n.module in DATAPARALLEL_STAR_MODULES
                   and any(a.name == "*" for a in n.names) for n in self.ctx.nodes(ast.ImportFrom))

    @cached_property
    def local_dataparallel_classes(self) -> dict[str, str]:
        """Classes of this file that subclass DataParallel -> note on scatter/gather overrides."""
        found: dict[str, str] = {}
        changed = True
        while changed:
            changed = False
            for name, info in self.ctx.classes.items():
                if name in found:
                    continue
                # (A base of this file counts once the loop has found it: `class MT(ParallelModel)`.)
                if any(self._dp_name(base, local_only=True) or self.ctx.local_name(base) in found
                       for base in info.bases):
                    overrides = sorted(m for m in ("scatter", "gather") if m in info.methods)
                    found[name] = f"`{name}` overrides {' and '.join(overrides)}" if overrides else ""
                    changed = True
        return found

    def _dp_name(self, resolved: str, local_only: bool = False) -> bool:
        if resolved in DATAPARALLEL_CLASSES:
            return True
        local = self.ctx.local_name(resolved)
        if local is not None:
            if local == "DataParallel" and local not in self.ctx.classes and self._star_dataparallel:
                return True
            if not local_only and local in self.local_dataparallel_classes:
                return True
        return False

    def dp_class(self, call: ast.AST) -> Source | None:
        """The wrapper ``call`` constructs, if it is a DataParallel construction (of any form)."""
        if not isinstance(call, ast.Call):
            return None
        resolved = self.ctx.resolve(call.func)
        if not resolved:
            return None
        dim = argument(call, 3, "dim")
        if self._dp_name(resolved):
            local = self.ctx.local_name(resolved) or ""
            return Source(call, frozenset(), dim, self.local_dataparallel_classes.get(local, ""))
        last = resolved.rsplit(".", 1)[-1]
        if "Parallel" in last and last[:1].isupper() and not resolved.startswith(
                (self.ctx.module + ".", "torch.")) and "Distributed" not in last:
            return Source(call, frozenset({f"dp:{resolved}"}), dim)
        return None

    def is_dp_call(self, node: ast.AST) -> bool:
        return self.dp_class(node) is not None

    @cached_property
    def dp_calls(self) -> list[ast.Call]:
        """Every DataParallel construction in this file (conditional ones too: see ``source_of``)."""
        return [n for n in self.ctx.nodes(ast.Call) if self.dp_class(n) is not None]

    def source_of(self, call: ast.Call) -> Source:
        return self.dp_class(call) or Source(call)

    @cached_property
    def data_parallel_calls(self) -> list[ast.Call]:
        """`nn.parallel.data_parallel(module, inputs, ...)` calls."""
        return [n for n in self.ctx.nodes(ast.Call) if (self.ctx.resolve(n.func) or "") in DATAPARALLEL_FUNCTIONS]

    # --- values ------------------------------------------------------------------------

    def wrapper_value(self, node: ast.AST | None, at: ast.AST | None = None) -> Source | None:
        """The wrapper ``node`` evaluates to: a construction, a `.cuda()` chain on one, either arm
        of a conditional expression, a name holding one, a call of a function returning one."""
        for _ in range(8):
            if node is None:
                return None
            if isinstance(node, ast.IfExp):
                return self.wrapper_value(node.body, at) or self.wrapper_value(node.orelse, at)
            if isinstance(node, (ast.Name, ast.Attribute)) and target_text(node) is not None \
                    and hasattr(node, "lineno"):
                wrap = self.wrap_for(node)
                return wrap.source if wrap is not None else None
            if not isinstance(node, ast.Call):
                return None
            source = self.dp_class(node)
            if source is not None:
                return source
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr in SELF_RETURNING:
                node = func.value
                continue
            return self._builder_call(node)
        return None

    def constructed_value(self, node: ast.AST) -> ast.Call | None:
        """The construction ``node`` evaluates to, through a name's last binding before it in its
        scope and `.cuda()`-like chains: `Holder(d).cuda()` for `holder` after `holder = Holder(d).cuda()`.
        None when it is not a call, or is a DataParallel construction."""
        for _ in range(8):
            if isinstance(node, ast.Name):
                self._ensure()
                earlier = [a for a in self._assignments.get((id(self.scope_of(node)), node.id), ())
                           if a.lineno < node.lineno]
                node = self._value_for(earlier[-1], node.id) if earlier else None
                continue
            if not isinstance(node, ast.Call) or self.dp_class(node) is not None:
                return None
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr in SELF_RETURNING:
                node = func.value
                continue
            return node
        return None

    def dp_expression(self, node: ast.AST) -> ast.AST | None:
        """The DataParallel construction (or wrapper-returning call) ``node`` evaluates to."""
        source = self.wrapper_value(node)
        return source.call if source is not None else None

    def _builder_call(self, call: ast.Call, element: int | None = None) -> Source | None:
        """The wrapper a call of a builder returns, or with ``element``, the one it returns as that
        element of a tuple (`model, optimizer = setup(config)`). Not where the call's constant
        arguments turn off every branch that wraps (see BuilderGuard); for a builder of another file,
        the ``builder:`` condition carries them for the index to decide."""
        func = call.func
        suffix = "" if element is None else f"{RETURNED_ELEMENT}{element}"
        key: str | None = None
        resolved = ""
        if isinstance(func, ast.Name):
            if func.id + suffix in self._builders:
                key = func.id + suffix
            elif func.id in self.ctx.imports.aliases and func.id not in self._local_functions \
                    and self._script_like and _builder_like(func.id, self.ctx.resolve(func) or ""):
                resolved = self.ctx.resolve(func) or ""
        elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self":
            cls = self.ctx.enclosing(call, ast.ClassDef)
            key = f"{cls.name}.{func.attr}{suffix}" if cls is not None else None
        elif isinstance(func, ast.Attribute) and _root_name(func) in self.ctx.imports.aliases \
                and self._script_like and _builder_like(func.attr, self.ctx.resolve(func) or ""):
            # A function reached through an imported module (`import utils` ... `utils.initialize_model(m)`)
            # is the same builder as when imported by name.
            resolved = self.ctx.resolve(func) or ""
        if resolved:
            arguments = _arguments_text(call, self._holds_no_wrapper)
            return Source(call, frozenset({f"{BUILDER_CONDITION}{resolved}{suffix}{arguments}"}))
        if key not in self._builders:
            return None
        guard = self._guards.get(key)
        if guard is not None and guard.fails(call, self._rebound_in(guard.fn), self._holds_no_wrapper):
            return None
        return self._builders[key]

    def _holds_no_wrapper(self, node: ast.AST) -> bool:
        """Does an argument surely hold no DataParallel wrapper where it is passed? A call, a name or
        `self.<attr>` this file never makes or binds one of there; not a parameter of the enclosing
        function (a caller of another file may hand it a wrapper)."""
        if not (isinstance(node, ast.Call) or isinstance(node, (ast.Name, ast.Attribute))
                and target_text(node) is not None and hasattr(node, "lineno")):
            return False
        fn = self.ctx.enclosing(node, FUNCTION_DEFS)
        if isinstance(node, ast.Name) and fn is not None and node.id in {
                a.arg for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs}:
            return False
        return self.wrapper_value(node) is None

    def _unpacked_builder_call(self, node: ast.AST, text: str) -> Source | None:
        """The wrapper `a, b = build(...)` unpacks into ``text``: the element at its position of the
        tuple a builder returns (nnsvs's `(model, optimizer, ...) = setup(config, device, collate_fn)`)."""
        if not isinstance(node, ast.Assign) or not isinstance(node.value, ast.Call):
            return None
        for target in node.targets:
            if isinstance(target, (ast.Tuple, ast.List)) and not any(isinstance(e, ast.Starred) for e in target.elts):
                for i, elt in enumerate(target.elts):
                    if target_text(elt) == text:
                        return self._builder_call(node.value, i)
        return None

    @cached_property
    def _script_like(self) -> bool:
        """Does the file train or save a model? Only then are imported builders followed (a model
        library calls its own factories everywhere, and none of them wraps)."""
        return mentions_training_token(self.ctx)

    # --- functions, call sites, fixpoint ------------------------------------------------

    @cached_property
    def _local_functions(self) -> dict[str, ast.AST]:
        """Module-level functions by name, methods by `Class.name`."""
        found: dict[str, ast.AST] = {}
        for stmt in self.ctx.tree.body:
            if isinstance(stmt, FUNCTION_DEFS):
                found[stmt.name] = stmt
            elif isinstance(stmt, ast.ClassDef):
                for sub in stmt.body:
                    if isinstance(sub, FUNCTION_DEFS):
                        found[f"{stmt.name}.{sub.name}"] = sub
        return found

    @cached_property
    def _assignments(self) -> dict[tuple[int, str], list[ast.AST]]:
        """(scope, target text) -> assignments to it, in source order."""
        found: dict[tuple[int, str], list[ast.AST]] = {}
        for node in self.ctx.nodes(ast.Assign, ast.AnnAssign):
            if node.value is None:
                continue
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for elt in (target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target]):
                    text = target_text(elt)
                    if text is None:
                        continue
                    scope = self.scope_of(node, attribute=text.startswith("self."))
                    found.setdefault((id(scope), text), []).append(node)
        for entries in found.values():
            entries.sort(key=lambda n: (n.lineno, n.col_offset))
        return found

    def _value_for(self, node: ast.AST, text: str) -> ast.AST | None:
        """What an assignment binds to ``text`` (None for a tuple target we cannot split)."""
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for target in targets:
            if target_text(target) == text:
                return node.value
            if isinstance(target, (ast.Tuple, ast.List)) and isinstance(node.value, (ast.Tuple, ast.List)) \
                    and len(node.value.elts) == len(target.elts):
                for elt, value in zip(target.elts, node.value.elts):
                    if target_text(elt) == text:
                        return value
        return None

    def _ensure(self) -> None:
        """Compute wrappers and builders to a fixpoint; a query during it sees the last pass."""
        if self._done or self._computing:
            return
        if not self.dp_calls and not (self._script_like and _imports_project_function(self.ctx)):
            self._done = True  # nothing here can make a wrapper
            return
        self._computing = True
        try:
            for _ in range(_PASSES):
                # Each step publishes what it found at once, so one pass follows a chain
                # (builder -> name -> argument -> parameter -> self.attr) as far as it can.
                params = [w for group in self._wraps_by_name.values() for w in group if w.parameter]
                assigned = self._assignment_wraps()
                self._wraps_by_name = _by_name(assigned + params)
                params = self._parameter_wraps()
                self._wraps_by_name = _by_name(assigned + params)
                self._builders = self._compute_builders()
                key = (len(assigned), len(params), frozenset(self._builders))
                if key == self._last_key:
                    break
                self._last_key = key
        finally:
            self._computing = False
        self._done = True

    def _assignment_wraps(self) -> list[Wrap]:
        wraps: list[Wrap] = []
        for (_, text), entries in self._assignments.items():
            attribute = text.startswith("self.")
            for i, node in enumerate(entries):
                source = self.wrapper_value(self._value_for(node, text), node) \
                    or self._unpacked_builder_call(node, text)
                if source is None:
                    continue
                end: float = float("inf")
                # The next assignment that can follow it ends it; for `self.<attr>`, the next one in
                # its own method (`self.model = create_model(...)`, then `self.model =
                # nn.DataParallel(self.model)`: the second is what the method reads after it), while
                # the other methods may see any of them.
                function = self.ctx.enclosing(node, FUNCTION_DEFS) if attribute else None
                for later in entries[i + 1:]:
                    if later.lineno > node.lineno and not self.exclusive(node, later) and (
                            not attribute or self.ctx.enclosing(later, FUNCTION_DEFS) is function) \
                            and not self._conditionally_rewrapped(later, node, text):
                        end = later.lineno
                        break
                wraps.append(Wrap(text, source, self.scope_of(node, attribute), node.lineno, end, node,
                                  roots=self._rebinding_roots(self._value_for(node, text))))
        return wraps

    def _rebinding_roots(self, value: ast.AST | None) -> tuple[ast.AST, ...]:
        """The wrapping assignments a value that rebinds a name holding a wrapper (`model.cuda()`,
        `model`) holds it from, through earlier rebindings; empty for any other value, or where one
        of them is a parameter's wrapper (its call sites decide)."""
        while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) \
                and value.func.attr in SELF_RETURNING:
            value = value.func.value
        text = target_text(value) if isinstance(value, (ast.Name, ast.Attribute)) else None
        if text is None or not hasattr(value, "lineno"):
            return ()
        roots: list[ast.AST] = []
        for wrap in self._reaching_wraps(value, text):
            if wrap.parameter or wrap.origin is None:
                return ()
            roots.extend(wrap.roots or (wrap.origin,))
        return tuple(dict.fromkeys(roots))

    def _conditionally_rewrapped(self, later: ast.AST, node: ast.AST, text: str) -> bool:
        """Is ``later`` `text = DistributedDataParallel(text, ...)` under an `if` that does not also
        enclose ``node`` (`if args.local_rank != -1: model = DDP(model)` after `model = DataParallel(model)`)?
        The arms are alternatives: where the test fails ``text`` still holds the DataParallel wrapper,
        and where it holds, a DDP around it, which lacks the model's attributes as well."""
        value = self._value_for(later, text)
        if not isinstance(value, ast.Call) or target_text(argument(value, 0, "module")) != text:
            return False
        resolved = self.ctx.resolve(value.func) or ""
        if resolved not in DISTRIBUTED_DATAPARALLEL_CLASSES and resolved.rsplit(".", 1)[-1] != DISTRIBUTED_DATAPARALLEL_NAME:
            return False
        return self.guarded_apart(later, node)

    def _compute_builders(self) -> dict[str, Source]:
        found: dict[str, Source] = {}
        wrapping: dict[str, list[tuple[ast.Return, ast.AST]]] = {}  # key -> (return, wrapper value)
        for key, fn in self._local_functions.items():
            returns = list(self._own_returns(fn))
            if any(_unwraps(ret.value) for ret in returns):
                continue  # `return self.model if n_gpu == 1 else self.model.module`: gives the bare model
            for ret in returns:
                source = self.wrapper_value(ret.value, ret)
                if source is not None:
                    found.setdefault(key, source)
                    wrapping.setdefault(key, []).append((ret, ret.value))
            # `return model, optimizer`: each element that is a wrapper, as `<function>#<i>`.
            tuples = [ret.value.elts for ret in returns if isinstance(ret.value, ast.Tuple)]
            for ret in returns:
                if not isinstance(ret.value, ast.Tuple):
                    continue
                for i, elt in enumerate(ret.value.elts):
                    element = f"{key}{RETURNED_ELEMENT}{i}"
                    if isinstance(elt, ast.Starred) or any(i < len(elts) and _unwraps(elts[i]) for elts in tuples):
                        continue
                    source = self.wrapper_value(elt, ret)
                    if source is not None:
                        found.setdefault(element, source)
                        wrapping.setdefault(element, []).append((ret, elt))
        self._guards = {key: guard for key, pairs in wrapping.items()
                        for guard in [self._guard(self._local_functions[key.partition(RETURNED_ELEMENT)[0]],
                                                  key, pairs)] if guard is not None}
        return found

    def _guard(self, fn: ast.AST, key: str, pairs: list[tuple[ast.Return, ast.AST]]) -> BuilderGuard | None:
        """The branches on ``fn``'s own parameters that each wrapping return (and each wrap of the
        name it returns) runs under; None where one runs under none (it may wrap for any call)."""
        params = {a.arg for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs} - self._rebound_in(fn)
        alternatives: list[tuple[tuple[ast.AST, bool], ...]] = []
        for ret, value in pairs:
            for origin in self._wrap_origins(value, fn):
                atoms = {id(part): (test, truth) for node in (ret, origin) if node is not None
                         for raw, truth in self._branch_tests(node) for part in needed_parts(raw, truth)
                         for test in [self._as_guard_test(part, params)] if _over_names(test, params)}
                if not atoms:
                    return None
                alternatives.append(tuple(atoms.values()))
        return BuilderGuard(fn, 1 if "." in key.partition(RETURNED_ELEMENT)[0] else 0, tuple(alternatives))

    def _as_guard_test(self, test: ast.AST, params: set[str]) -> ast.AST:
        """``test`` with each test of whether a parameter already holds a wrapper
        (`isinstance(module, nn.DataParallel)`, `hasattr(module, "module")`) written
        `HOLDS_WRAPPER_TEST(module)`, the form a guard decides in any file."""
        if not any(isinstance(n, ast.Call) for n in ast.walk(test)):
            return test
        return _WrapperTestRewrite(self._wrapper_test, params).visit(copy.deepcopy(test))

    def _branch_tests(self, node: ast.AST) -> Iterator[tuple[ast.AST, bool]]:
        """The tests ``node`` runs under in its function, with the truth it needs of each: the `if`s
        around it, and an earlier `if` of an enclosing block that returns or raises in one arm only
        (`if not parallel: return model` before the wrap)."""
        for _, arm, test in self._arms(node):
            if test is not None:
                yield test, arm == "body"
        child, cur = node, self.parents.get(node)
        while cur is not None:
            for block in ("body", "orelse", "finalbody"):
                stmts = getattr(cur, block, None)
                if isinstance(stmts, list) and child in stmts:
                    for prev in stmts[:stmts.index(child)]:
                        if isinstance(prev, ast.If) and _exits(prev.body) != _exits(prev.orelse):
                            yield prev.test, _exits(prev.orelse)
            if isinstance(cur, _SCOPES):
                break
            child, cur = cur, self.parents.get(cur)

    def _wrap_origins(self, value: ast.AST, fn: ast.AST) -> list[ast.AST | None]:
        """The assignments in ``fn`` that wrapped the name ``value`` returns (`model` after `if
        data_parallel: model = DataParallel(model)`); None for a wrapper made where it is returned,
        or one whose wrap is not an assignment of ``fn`` (a parameter's, another method's)."""
        while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr in SELF_RETURNING:
            value = value.func.value
        text = target_text(value) if isinstance(value, (ast.Name, ast.Attribute)) else None
        if text is None:
            return [None]
        origins: list[ast.AST | None] = []
        for wrap in self._reaching_wraps(value, text):
            roots = wrap.roots or (wrap.origin,)
            origins += [root if root is not None and not wrap.parameter
                        and self.ctx.enclosing(root, FUNCTION_DEFS) is fn else None for root in roots]
        return origins or [None]

    def _own_returns(self, fn: ast.AST) -> Iterator[ast.Return]:
        for node in self.ctx.tree_index.nodes_within(fn, ast.Return):
            if node.value is not None and self.ctx.enclosing(node, FUNCTION_DEFS) is fn:
                yield node

    def _parameter_wraps(self) -> list[Wrap]:
        """Parameters that receive a wrapper at a call site in this file."""
        wraps: dict[tuple[int, str], Wrap] = {}
        for call in self.ctx.nodes(ast.Call):
            fn, skip = self._callee(call)
            if fn is None:
                continue
            params = [a.arg for a in fn.args.posonlyargs + fn.args.args][skip:]
            passed: list[tuple[str, ast.AST]] = [(params[i], arg) for i, arg in enumerate(call.args)
                                                 if i < len(params) and not isinstance(arg, ast.Starred)]
            passed += [(k.arg, k.value) for k in call.keywords if k.arg is not None]
            for param, arg in passed:
                source = self.wrapper_value(arg, call)
                if source is None:
                    continue
                known = wraps.get((id(fn), param))
                if known is not None:
                    known.sites += ((call, skip),)
                    continue
                first = min((n.lineno for n in self._assignments.get((id(fn), param), ())), default=float("inf"))
                wraps[(id(fn), param)] = Wrap(param, Source(call, source.requires, source.dim, source.note), fn,
                                              fn.lineno, first, None, parameter=True, sites=((call, skip),))
        return list(wraps.values())

    def _dead_for_every_site(self, node: ast.AST, wrap: Wrap) -> bool:
        """Does every call that passes the wrapper give a parameter a constant under which ``node``
        cannot run (`evaluate(..., eval_when_training=True)` and `if args.n_gpu > 1 and
        eval_when_training is False: model = DataParallel(model)` in the callee)?"""
        fn = wrap.scope
        arms = [(arm, test) for branch, arm, test in self._arms(node) if isinstance(branch, (ast.If, ast.IfExp))]
        if not arms or not wrap.sites:
            return False
        rebound = self._rebound_in(fn)
        for call, skip in wrap.sites:
            env = _constant_arguments(fn, call, skip, rebound)
            if not env or not any(_truth(test, env) is (arm != "body") for arm, test in arms):
                return False
        return True

    def _rebound_in(self, fn: ast.AST) -> set[str]:
        """The names a function assigns (its parameters among them lose a constant the call gives)."""
        return self._rebound_by_function.get(id(fn), set())

    @cached_property
    def _rebound_by_function(self) -> dict[int, set[str]]:
        found: dict[int, set[str]] = {}
        for scope, text in self._assignments:
            found.setdefault(scope, set()).add(text)
        return found

    def _callee(self, call: ast.Call) -> tuple[ast.AST | None, int]:
        """The function of this file a call runs, and how many leading parameters it binds itself."""
        func = call.func
        if isinstance(func, ast.Name):
            fn = self._local_functions.get(func.id)
            if fn is not None:
                return fn, 0
            if func.id in self.ctx.classes:
                init = self._local_functions.get(f"{func.id}.__init__")
                return (init, 1) if init is not None else (None, 0)
        elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self":
            cls = self.ctx.enclosing(call, ast.ClassDef)
            if cls is not None:
                fn = self._local_functions.get(f"{cls.name}.{func.attr}")
                if fn is not None:
                    return fn, 1
        return None, 0

    # --- queries -------------------------------------------------------------------------

    @property
    def wraps(self) -> list[Wrap]:
        self._ensure()
        return [w for group in self._wraps_by_name.values() for w in group]

    @property
    def builders(self) -> dict[str, Source]:
        """Functions of this file (`name`, `Class.method`) that return a wrapper, and the elements of
        the tuples they return that are wrappers (`name#<i>`, see ``RETURNED_ELEMENT``)."""
        self._ensure()
        return self._builders

    @property
    def guards(self) -> dict[str, BuilderGuard]:
        """The builders (keys of ``builders``) whose every wrapping return runs under a branch on
        one of their own parameters."""
        self._ensure()
        return self._guards

    def wrap_for(self, node: ast.AST) -> Wrap | None:
        """The wrapper an expression (`model`, `self.model`) refers to at its position, if any."""
        text = target_text(node)
        if text is None:
            return None
        self._ensure()
        guard = self._isinstance_guard(node, text)
        if guard is False:
            return None
        # Where several wraps can reach ``node`` (`self.x` read in another method, after `self.x =
        # build_model()` and `self.x = nn.DataParallel(self.x)`), one that holds on no condition
        # is what the name surely can hold where ``node`` runs: the first such, else the first found.
        # A private method this file never names (`def _init_norm(self)`, called nowhere) is not
        # known to run: the first wrap found stands for it.
        conditional = None
        for wrap in self._reaching_wraps(node, text):
            if not wrap.requires:
                if conditional is None or self._may_run(node):
                    return wrap
                break
            conditional = conditional or wrap
        if conditional is not None:
            return conditional
        if guard is not None:
            return Wrap(text, Source(guard), self.scope_of(node), guard.lineno, float("inf"), guard)
        return None

    def called_wrap(self, call: ast.Call) -> Wrap | None:
        """The wrapper a call runs through: `model(x)`, or `model.forward(x)`: DataParallel's own
        `forward` is what calling the wrapper runs (scatter, replicate, parallel_apply, gather), so
        the arguments reach the replicas the same way."""
        func = call.func
        if isinstance(func, ast.Attribute) and func.attr == "forward":
            func = func.value
        return self.wrap_for(func)

    def _may_run(self, node: ast.AST) -> bool:
        """Is the function around ``node`` public, special, or named somewhere in this file (a private
        method no call reaches from here runs only if another file calls it)?"""
        func = self.ctx.enclosing(node, FUNCTION_DEFS)
        if func is None or not func.name.startswith("_") or func.name.endswith("__"):
            return True
        return func.name in self._named

    @cached_property
    def _named(self) -> frozenset[str]:
        """Every attribute and name this file reads or writes (a function's `def` is neither)."""
        return frozenset({n.attr for n in self.ctx.nodes(ast.Attribute)} | {n.id for n in self.ctx.nodes(ast.Name)})

    def _reaching_wraps(self, node: ast.AST, text: str) -> Iterator[Wrap]:
        """The wraps of ``text`` (a dotted name) that it can hold at ``node``, in assignment order."""
        for wrap in self._wraps_by_name.get(text, ()):
            if wrap.parameter:
                # Up to and including the line of the first reassignment: its value (`model =
                # DataParallel(model)`) still reads the caller's wrapper.
                if wrap.start < node.lineno <= wrap.end and self.ctx.enclosing(node, FUNCTION_DEFS) is wrap.scope \
                        and not self._dead_for_every_site(node, wrap):
                    yield wrap
                continue
            origin = wrap.origin
            if origin is not None and self._within(node, origin):
                continue  # `m = DataParallel(m)`: the inner `m` is not the new wrapper
            if not (wrap.start < node.lineno <= wrap.end if wrap.end != float("inf") else wrap.start < node.lineno):
                # `self.x` holds the wrapper in the other methods, and after the assignment in its own.
                if not (text.startswith("self.") and wrap.scope is not self.ctx.tree) or (
                        origin is not None
                        and self.ctx.enclosing(node, FUNCTION_DEFS) is self.ctx.enclosing(origin, FUNCTION_DEFS)):
                    continue
            if origin is not None and text.startswith("self.") and self._constructed_before(node, origin):
                continue
            if not self._inside(node, wrap.scope) and not (
                    text.startswith("self.") and self._in_subclass_of(node, wrap.scope, wrap.origin)
                    and not self._rebound_before(node, text)):
                continue
            if not text.startswith("self."):
                innermost = self.scope_of(node)
                if innermost is not wrap.scope and (wrap.scope is not self.ctx.tree or _binds(innermost, text)):
                    continue  # a different local of the same name
            if wrap.origin is not None and self.exclusive(wrap.origin, node):
                continue
            if wrap.roots and all(self.exclusive(root, node) for root in wrap.roots):
                continue  # `model = model.cuda()` holds the wrapper only where `if multi_gpu:` wrapped it
            yield wrap

    def _in_subclass_of(self, node: ast.AST, scope: ast.AST, origin: ast.AST | None) -> bool:
        """Is ``node`` in a method of a subclass of the class ``scope``, both of this file (`self.model`
        wrapped in `BaseTrainer.__init__`, read in `Trainer(BaseTrainer)._train_epoch`)? The subclass
        inherits what its base's methods store, unless a class on the way overrides the method that
        wraps (``origin``'s) without calling the base's (`super().__init__(...)`)."""
        if not isinstance(scope, ast.ClassDef):
            return False
        method = self.ctx.enclosing(origin, FUNCTION_DEFS) if origin is not None else None
        cls = self.ctx.enclosing(node, ast.ClassDef)
        seen: set[str] = set()
        work = [cls.name] if cls is not None else []
        while work:
            name = work.pop()
            info = self.ctx.classes.get(name)
            if name in seen or info is None or info.node is scope:
                continue
            seen.add(name)
            override = info.methods.get(method.name) if method is not None else None
            if override is not None and not any(
                    isinstance(call.func, ast.Attribute) and call.func.attr == method.name
                    for call in self.ctx.tree_index.nodes_within(override, ast.Call)):
                continue  # the override replaces the wrapping method
            for base in info.bases:
                local = self.ctx.local_name(base)
                if local is not None and local in self.ctx.classes:
                    if self.ctx.classes[local].node is scope:
                        return True
                    work.append(local)
        return False

    def _rebound_before(self, node: ast.AST, text: str) -> bool:
        """Does the function around ``node`` assign ``text`` (`self.model_with_loss = AddLossModule(...)`)
        before ``node``, outside the statement ``node`` is part of? Then what a base class's method
        stored there is gone (a subclass's `__init__` that rebuilds and rewraps after `super().__init__`)."""
        func = self.ctx.enclosing(node, FUNCTION_DEFS)
        if func is None:
            return False
        here = (node.lineno, node.col_offset)
        for target in self.ctx.tree_index.nodes_within(func, ast.Attribute):
            if isinstance(target.ctx, ast.Store) and (target.lineno, target.col_offset) < here \
                    and target_text(target) == text and self.ctx.enclosing(target, ast.stmt) is not \
                    self.ctx.enclosing(node, ast.stmt):
                return True
        return False

    def _constructed_before(self, node: ast.AST, origin: ast.AST, depth: int = 0) -> bool:
        """Is ``node`` in `__init__` and the wrap ``origin`` in another method of the class that
        `__init__` does not call before ``node`` (`def multi_gpu(self): self.model =
        nn.DataParallel(self.model)`)? The constructor runs before any other method can. So does
        a method of the class that this file calls only from there, before that call (cifr's
        `load_checkpoints`, called from `__init__` just before `self.check_and_use_multi_gpu()`),
        where the file names it nowhere else; and such a method called from `__init__` before
        `__init__` itself wraps (BLINK's `load_model`, then `self.model = DataParallel(self.model)`)."""
        init = self.ctx.enclosing(node, FUNCTION_DEFS)
        method = self.ctx.enclosing(origin, FUNCTION_DEFS)
        if depth and method is init is not None and init.name == "__init__":
            # (a call, in the constructor that wraps, of a method that reads: before the wrap, and in
            # no loop that also holds the wrap, it runs on the bare module: BLINK's `load_model`)
            loop = self.ctx.enclosing(origin, LOOP_STATEMENTS)
            return (node.lineno, node.col_offset) < (origin.lineno, origin.col_offset) and not (
                loop is not None and self._within(node, loop))
        if init is None or method is None or method is init or not self._related(
                self.ctx.enclosing(init, ast.ClassDef), self.ctx.enclosing(method, ast.ClassDef)):
            return False
        if init.name != "__init__":
            # (a subclass's override runs where the base's constructor calls `self.<method>()`)
            sites = self._self_calls_only(init)
            return depth < 4 and bool(sites) and all(self._constructed_before(site, origin, depth + 1) for site in sites)
        calls = [call for call in self.ctx.tree_index.nodes_within(init, ast.Call)
                 if call.lineno <= node.lineno and isinstance(call.func, ast.Attribute)]
        if self.ctx.enclosing(init, ast.ClassDef) is not self.ctx.enclosing(method, ast.ClassDef) \
                and any(call.func.attr == "__init__" for call in calls):
            return False  # a subclass's constructor after `super().__init__()`: the base's may have wrapped
        return not any(call.func.attr == method.name and isinstance(call.func.value, ast.Name)
                       and call.func.value.id == "self" for call in calls)

    def _related(self, a: ast.ClassDef | None, b: ast.ClassDef | None) -> bool:
        """Are two classes of this file the same, or is one a subclass of the other here?"""
        if a is None or b is None:
            return False
        return a is b or self._derives(a, b) or self._derives(b, a)

    def _derives(self, cls: ast.ClassDef, base: ast.ClassDef, depth: int = 0) -> bool:
        info = self.ctx.classes.get(cls.name)
        if info is None or depth > 8:
            return False
        for name in info.bases:
            local = self.ctx.local_name(name)
            parent = self.ctx.classes.get(local) if local is not None else None
            if parent is not None and (parent.node is base or self._derives(parent.node, base, depth + 1)):
                return True
        return False

    def _self_calls_only(self, method: ast.AST) -> list[ast.Call]:
        """The `self.<method>(...)` calls of this file, where the file names the method nowhere else
        (no other attribute read, no plain name: not handed on as a callback); empty otherwise."""
        sites = []
        for attribute in self._attribute_reads.get(method.name, ()):
            call = self.parents.get(attribute)
            if not (isinstance(call, ast.Call) and call.func is attribute and isinstance(attribute.value, ast.Name)
                    and attribute.value.id == "self"):
                return []
            sites.append(call)
        return [] if method.name in self._plain_names else sites

    @cached_property
    def _attribute_reads(self) -> dict[str, list[ast.Attribute]]:
        found: dict[str, list[ast.Attribute]] = {}
        for node in self.ctx.nodes(ast.Attribute):
            if isinstance(node.ctx, ast.Load):
                found.setdefault(node.attr, []).append(node)
        return found

    @cached_property
    def _plain_names(self) -> frozenset[str]:
        return frozenset(n.id for n in self.ctx.nodes(ast.Name))

    def _isinstance_guard(self, node: ast.AST, text: str) -> ast.AST | None | bool:
        """Inside `if isinstance(text, DataParallel)`: its test; in the else arm (or under `not`): False.
        Inside `if isinstance(text, PreTrainedModel)` (a class no wrapper is an instance of): False."""
        child, cur = node, self.parents.get(node)
        while cur is not None:
            if isinstance(cur, (ast.If, ast.IfExp, ast.While)) and child is not cur.test:
                test, positive = _unnot(cur.test)
                in_body = child in cur.body if isinstance(cur.body, list) else child is cur.body
                if self._wrapper_test(test, text):
                    return test if in_body == positive else False
                if in_body and positive and self._non_wrapper_test(test, text):
                    return False
                if in_body and isinstance(cur.test, ast.BoolOp) and isinstance(cur.test.op, ast.And):
                    # `if n_gpu > 1 and not isinstance(model, DataParallel):` holds only where the
                    # conjunct does (its else arm says nothing about `model`).
                    for conjunct in cur.test.values:
                        test, positive = _unnot(conjunct)
                        if self._wrapper_test(test, text):
                            return test if positive else False
                        if positive and self._non_wrapper_test(test, text):
                            return False
                if not in_body and isinstance(cur.test, ast.BoolOp) and isinstance(cur.test.op, ast.Or):
                    # The else arm of `isinstance(model, nn.DataParallel) or isinstance(model, DDP)`
                    # runs only where every disjunct fails (its body says nothing about `model`).
                    for disjunct in cur.test.values:
                        test, positive = _unnot(disjunct)
                        if self._wrapper_test(test, text):
                            return False if positive else test
            # After `if isinstance(m, DataParallel): return ...` m is the bare model.
            for block in ("body", "orelse", "finalbody"):
                stmts = getattr(cur, block, None)
                if isinstance(stmts, list) and child in stmts:
                    for prev in reversed(stmts[:stmts.index(child)]):
                        if isinstance(prev, ast.If) and not prev.orelse and prev.body \
                                and isinstance(prev.body[-1], (ast.Return, ast.Raise, ast.Continue, ast.Break)):
                            test, positive = _unnot(prev.test)
                            if self._wrapper_test(test, text):
                                return False if positive else test
            if isinstance(cur, _SCOPES):
                break
            child, cur = cur, self.parents.get(cur)
        return None

    def _wrapper_test(self, test: ast.AST, text: str) -> bool:
        flag = target_text(test) if isinstance(test, ast.Attribute) else None
        if flag is not None and flag.startswith("self.") and text.startswith("self."):
            return self._flag_set_with_wrap(flag, text)
        if not (isinstance(test, ast.Call) and isinstance(test.func, ast.Name) and len(test.args) == 2
                and target_text(test.args[0]) == text):
            return False
        kind = test.args[1]
        if test.func.id == "isinstance":
            kinds = kind.elts if isinstance(kind, ast.Tuple) else [kind]
            return any(self._dp_name(self.ctx.resolve(k) or "") or "DataParallel" in (self.ctx.resolve(k) or "")
                       for k in kinds)
        return test.func.id == "hasattr" and isinstance(kind, ast.Constant) and kind.value == "module"

    def _non_wrapper_test(self, test: ast.AST, text: str) -> bool:
        """`isinstance(text, <classes>)` where no class is one a DataParallel wrapper is an instance
        of (`isinstance(model, PreTrainedModel)` in a Trainer that may have wrapped `model`): where it
        holds, `text` is no wrapper."""
        if not (isinstance(test, ast.Call) and isinstance(test.func, ast.Name) and test.func.id == "isinstance"
                and len(test.args) == 2 and target_text(test.args[0]) == text):
            return False
        kind = test.args[1]
        kinds = kind.elts if isinstance(kind, ast.Tuple) else [kind]
        for k in kinds:
            resolved = self.ctx.resolve(k) or ""
            # (a wrapper is an instance of `torch.nn.Module` and of `object`: those say nothing)
            if not resolved or "Parallel" in resolved or self._dp_name(resolved) \
                    or resolved.rsplit(".", 1)[-1] in ("Module", "object"):
                return False
        return True

    def _flag_set_with_wrap(self, flag: str, text: str) -> bool:
        """Is `self.<flag> = True` a statement beside a DataParallel construction assigned to `text`
        (DrQA's `parallelize()`: `self.parallel = True; self.network = DataParallel(self.network)`)?
        Then `if self.<flag>:` tests whether `text` holds the wrapper, as `isinstance` would. Read
        from the syntax alone: this runs while the wraps are still being collected."""
        return (flag, text) in self._flags_set_with_wraps

    @cached_property
    def _flags_set_with_wraps(self) -> frozenset[tuple[str, str]]:
        found = set()
        for node in self.ctx.nodes(ast.Assign):
            if len(node.targets) != 1 or not isinstance(node.value, ast.Call) or self.dp_class(node.value) is None:
                continue
            text = target_text(node.targets[0])
            parent = self.parents.get(node)
            if text is None or not text.startswith("self."):
                continue
            for block in ("body", "orelse", "finalbody"):
                stmts = getattr(parent, block, None)
                if isinstance(stmts, list) and node in stmts:
                    found.update((flag, text) for stmt in stmts if isinstance(stmt, ast.Assign)
                                 and len(stmt.targets) == 1 and isinstance(stmt.value, ast.Constant)
                                 and stmt.value.value is True
                                 for flag in [target_text(stmt.targets[0])] if flag is not None)
        return frozenset(found)

    # --- branches ----------------------------------------------------------------------

    def _arms(self, node: ast.AST) -> list[tuple[ast.AST, str, ast.AST]]:
        """(branching node, arm, test) for each if/try/ifexp enclosing ``node`` in its function."""
        arms = []
        child, cur = node, self.parents.get(node)
        while cur is not None and not isinstance(cur, _SCOPES):
            if isinstance(cur, (ast.If, ast.IfExp)) and child is not cur.test:
                in_body = child in cur.body if isinstance(cur.body, list) else child is cur.body
                arms.append((cur, "body" if in_body else "orelse", cur.test))
            elif isinstance(cur, ast.Try) and child not in cur.finalbody:
                arm = "body" if child in cur.body or child in cur.orelse else "handler"
                arms.append((cur, arm, None))
            child, cur = cur, self.parents.get(cur)
        return arms

    def exclusive(self, a: ast.AST, b: ast.AST) -> bool:
        """Can ``a`` and ``b`` never both run: opposite arms of one `if`, or of two `if`s with
        the same or contradicting tests (`if n > 1: ...` twice, `RANK == -1` vs `RANK != -1`)?"""
        arms_a, arms_b = self._arms(a), self._arms(b)
        by_node = {id(n): arm for n, arm, _ in arms_a}
        if any(id(n) in by_node and by_node[id(n)] != arm for n, arm, _ in arms_b):
            return True
        shared = {id(n) for n, _, _ in arms_b} & by_node.keys()  # enclosing both, on the same arm
        facts_a = [f for n, arm, test in arms_a if test is not None and id(n) not in shared
                   for f in self._conditions_at(a, test, arm == "body")]
        facts_b = [f for n, arm, test in arms_b if test is not None and id(n) not in shared
                   for f in self._conditions_at(b, test, arm == "body")]
        return any(_contradict(x, y) for x in facts_a for y in facts_b)

    def _conditions_at(self, node: ast.AST, test: ast.AST, positive: bool) -> list[tuple[str, bool]]:
        """``_conditions`` of a test around ``node``; in a constructor that keeps a parameter as a flag
        (`self.multigpu = multigpu`), a test of the parameter reads as one of the flag, so that
        `if multigpu: self.net = DataParallel(self.net)` in `__init__` and `if not self.multigpu:` in
        another method are seen to exclude each other."""
        found = _conditions(test, positive)
        found += [fact for text, truth in found if text in self._test_flags
                  for fact in _conditions(self._test_flags[text], truth)]
        method = self.ctx.enclosing(node, FUNCTION_DEFS)
        flags = self._constructor_flags.get(id(method)) if method is not None and method.name == "__init__" else None
        if not flags:
            return found
        translated = []
        for text, truth in found:
            for parameter, attribute in flags.items():
                text = text.replace(f"Name(id='{parameter}', ctx=Load())", attribute)
            translated.append((text, truth))
        return translated

    @cached_property
    def _test_flags(self) -> dict[str, ast.AST]:
        """Dump of `self.<attr>` -> the test it keeps, for each attribute this file stores once, from
        a comparison or a boolean test (`self.is_multi_gpu = True if torch.cuda.device_count() > 1
        else False`, `bool(...)`, `not ...`): a test of the attribute is a test of that test."""
        stores: dict[str, list[ast.AST]] = {}
        for node in self.ctx.nodes(ast.Attribute):
            if isinstance(node.ctx, ast.Store):
                stores.setdefault(node.attr, []).append(node)
        found: dict[str, ast.AST] = {}
        for attr, targets in stores.items():
            target = targets[0]
            parent = self.parents.get(target)
            if len(targets) != 1 or target_text(target) != f"self.{attr}" or not isinstance(parent, ast.Assign) \
                    or parent.targets != [target]:
                continue
            test = _kept_test(parent.value)
            if test is not None:
                found[ast.dump(ast.Attribute(ast.Name("self", ast.Load()), attr, ast.Load()))] = test
        return found

    @cached_property
    def _constructor_flags(self) -> dict[int, dict[str, str]]:
        """id of a class's `__init__` -> {parameter: dump of `self.<attr>`} for each top-level
        `self.<attr> = <parameter>` of it, where the constructor never rebinds the parameter and the
        file stores in an attribute of that name nowhere else: both read the same value everywhere."""
        candidates = []  # (init, parameter, the target)
        for info in self.ctx.classes.values():
            init = info.methods.get("__init__")
            if init is None:
                continue
            parameters = {a.arg for a in (*init.args.posonlyargs, *init.args.args, *init.args.kwonlyargs)}
            for stmt in init.body:
                target = stmt.targets[0] if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 else None
                if isinstance(target, ast.Attribute) and target_text(target) is not None \
                        and isinstance(stmt.value, ast.Name) and stmt.value.id in parameters \
                        and not _rebinds_name(init, stmt.value.id):
                    candidates.append((init, stmt.value.id, target))
        if not candidates:
            return {}
        flag_targets = {id(target) for _, _, target in candidates}
        stored_elsewhere = {node.attr for node in self.ctx.nodes(ast.Attribute)
                            if isinstance(node.ctx, ast.Store) and id(node) not in flag_targets}
        found: dict[int, dict[str, str]] = {}
        for init, parameter, target in candidates:
            if target.attr not in stored_elsewhere:
                found.setdefault(id(init), {})[parameter] = ast.dump(
                    ast.Attribute(ast.Name("self", ast.Load()), target.attr, ast.Load()))
        return found

    def guarded_apart(self, a: ast.AST, b: ast.AST) -> bool:
        """Does ``a`` run only under an `if` test that does not also enclose ``b`` (`if args.sync_bn:`
        around one step of a script whose wrapper is elsewhere)? Then the two meet only when that
        flag is set."""
        enclosing_b = {id(n) for n, _, _ in self._arms(b)}
        return any(isinstance(n, ast.If) and id(n) not in enclosing_b for n, _, _ in self._arms(a))

    # --- structure helpers ---------------------------------------------------------------

    def scope_of(self, node: ast.AST, attribute: bool = False) -> ast.AST:
        cur = self.parents.get(node)
        while cur is not None:
            if attribute and isinstance(cur, ast.ClassDef):
                return cur
            if not attribute and isinstance(cur, _SCOPES):
                return cur
            cur = self.parents.get(cur)
        return self.ctx.tree

    def _within(self, node: ast.AST, outer: ast.AST) -> bool:
        """Is ``node`` in the subtree of ``outer``?"""
        return self.ctx.tree_index.contains(outer, node)

    def _inside(self, node: ast.AST, scope: ast.AST) -> bool:
        if scope is self.ctx.tree:
            return True
        cur = self.parents.get(node)
        while cur is not None:
            if cur is scope:
                return True
            cur = self.parents.get(cur)
        return False

    def parent(self, node: ast.AST) -> ast.AST | None:
        return self.parents.get(node)

    def batch_dims(self) -> dict[int, ast.AST]:
        """DataParallel constructions given `dim=k` (id of the call -> k's expression)."""
        return {id(c): s.dim for c in self.dp_calls for s in [self.source_of(c)] if s.dim is not None}


def _unnot(test: ast.AST) -> tuple[ast.AST, bool]:
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return test.operand, False
    return test, True


# The condition of a finding about what a DataParallel subclass of another file returns: its
# output is the stock gathered one (ClassIndex.stock_output settles it from replaced_output).
STOCK_OUTPUT_CONDITION = "stock_output:"
# Calls through which a forward may hand back the gathered output (`self.gather(outputs, ...)`,
# `super().forward(...)`).
_GATHERING_CALLS = frozenset({"gather", "forward"})


def _named_like_dataparallel(info) -> bool:
    """A class on a base named like a DataParallel (its own file cannot resolve a base of another
    file, so the name decides; the index settles the rest)."""
    return any("Parallel" in base for base in info.bases)


def replaced_output(ctx: FileContext) -> list[str]:
    """Qualified names of this file's classes on a base named like a DataParallel whose own
    `forward` calls no `gather` and no other `forward`: what it returns is not the per-device
    outputs gathered on the output device (PyTorch-Encoding's DataParallelCriterion returns
    `Reduce.apply(*outputs) / len(outputs)`, a 0-dim mean, or the module's own output)."""
    found = []
    for info in ctx.classes.values():
        forward = info.methods.get("forward")
        if forward is None or not _named_like_dataparallel(info):
            continue
        calls = [node.func for node in ast.walk(forward) if isinstance(node, ast.Call)]
        if not any((func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")) in _GATHERING_CALLS
                   for func in calls):
            found.append(info.qualname)
    return found


# The methods of DataParallel whose stock behaviour class rules reason about (a rule names one in
# ``Rule.wrapper_method``): a subclass that defines its own decides how inputs are split or outputs combined.
WRAPPER_METHODS = ("scatter", "gather")
# The condition of a class finding that is advice only where every scanned wrap of the class is by
# a DataParallel subclass defining its own <method> (ClassIndex.own_method settles it).
OWN_METHOD_CONDITION = "own_method:"
# The condition of a script finding about a call through a DataParallel subclass of another file,
# ``stock_method:<method>:<class>``: the subclass (and its bases down to DataParallel) does not define
# its own <method> (ClassIndex.defines, from dataparallel_attributes), so the stock one runs.
STOCK_METHOD_CONDITION = "stock_method:"
# The condition of a finding about an attribute read on a DataParallel subclass of another file,
# ``lacks_attribute:<name>:<class>``: neither the subclass nor a base of it down to DataParallel defines
# <name> or a `__getattr__` (ClassIndex.has_attribute, from dataparallel_attributes).
LACKS_ATTRIBUTE_CONDITION = "lacks_attribute:"
# The condition of a finding about a call of a method that such a subclass defines itself,
# ``rejects_call:<method>:<count>:<class>``: its own <method> takes fewer positional arguments than
# the <count> the call passes (ClassIndex.rejects_call, from the ``<method>(<n>)`` entries of
# dataparallel_attributes): attention_based_tbn's forwarding `get_loss(self, criterion, target, preds)`
# called with the model's fourth argument, `epoch`.
REJECTS_CALL_CONDITION = "rejects_call:"
# In ``dataparallel_attributes``: `<method>(<n>)`, the most positional arguments the method takes
# (after `self`), for a method without `*args`.
ARITY_MARK = "("
# The condition of a finding about a loss taken from what a DataParallel subclass of another file
# returns, ``unreduced_gather:<position>:<class>``: the subclass's own `gather` (or a base's on the way
# down to DataParallel) does not reduce that part of its output (ClassIndex.reduces_gather, from the
# ``gather=<position>`` entries of dataparallel_attributes). <position> is the element of the returned
# tuple (`loss, stats = model(...)`: 0), or empty for the whole output.
UNREDUCED_GATHER_CONDITION = "unreduced_gather:"
# In ``dataparallel_attributes``: `gather=<position>`, a part of the output the class's own gather
# reduces to one value on every return (`return gather(losses, ...).mean(), stats`: `gather=0`).
REDUCED_MARK = "="
# Calls that reduce the per-device values a gather collects to one (`gather(losses).mean()`,
# `torch.sum(...)`, Python's `sum(losses)`).
_REDUCING_CALLS = frozenset({"mean", "sum"})
# The method through which a class answers every attribute its instances do not have (a
# DataParallel subclass's `__getattr__` that falls back to `getattr(self.module, name)`).
FALLBACK_GETATTR = "__getattr__"


def own_attributes(info) -> set[str]:
    """The attributes a class defines itself, as read on its instances: its methods and properties,
    its class attributes and the `self.<name>` it stores in its methods (dunder names left out, but
    for ``FALLBACK_GETATTR``, which answers for all the others)."""
    names = set(info.methods)
    for stmt in info.node.body:
        targets = stmt.targets if isinstance(stmt, ast.Assign) else \
            [stmt.target] if isinstance(stmt, (ast.AnnAssign, ast.AugAssign)) else []
        names.update(t.id for t in targets if isinstance(t, ast.Name))
    for method in info.methods.values():
        for node in ast.walk(method):
            if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) \
                    and isinstance(node.value, ast.Name) and node.value.id == "self":
                names.add(node.attr)
    return {name for name in names if name == FALLBACK_GETATTR or not name.startswith("__")}


def dataparallel_attributes(ctx: FileContext) -> dict[str, list[str]]:
    """Qualified names of this file's classes on a base named like a DataParallel -> the attributes
    each defines itself (``own_attributes``): of ``WRAPPER_METHODS``, the stock ones it overrides
    (CSAILVision's `DictGatherDataParallel.gather`, which unsqueezes 0-dim outputs and gathers dicts;
    `UserScatteredDataParallel.scatter`, which hands each device one element of a list the data loader
    made), and the others, which a script reads on the wrapper without error (hfxunlp's
    `DataParallelModel.build_optimizer`)."""
    found = {}
    for info in ctx.classes.values():
        if _named_like_dataparallel(info) and (own := own_attributes(info)):
            arities = {f"{name}{ARITY_MARK}{len(args.posonlyargs) + len(args.args) - 1})"
                       for name, method in info.methods.items() if not name.startswith("__")
                       and (args := method.args).vararg is None and args.posonlyargs + args.args}
            reduced = {f"gather{REDUCED_MARK}{position}" for position in
                       reduced_positions(ctx.function(info.methods["gather"], info))} if "gather" in info.methods else set()
            found[info.qualname] = sorted(own | arities | reduced)
    return found


def reduced_positions(gather: FunctionInfo) -> set[str]:
    """The parts of its output a DataParallel subclass's own `gather` reduces to one value on every
    return: "" for the whole output (`return gather(outs, d).mean()`), "<i>" for the i-th element of a
    returned tuple (neural_sp's `return gather(losses, ...).mean(), observation_avg`: "0"). A local
    name is followed to its one assignment in the method. Returns of nested functions are theirs."""
    bound = gather.local_values
    found: set[str] | None = None
    for value in gather.returns():
        value = _bound_value(value, bound)
        parts = {""} if _reduced(value, bound) else {
            str(i) for i, element in enumerate(value.elts) if _reduced(element, bound)} \
            if isinstance(value, ast.Tuple) else set()
        found = parts if found is None else found & parts
    return found or set()


def _bound_value(node: ast.AST, bound: dict[str, list[ast.AST]]) -> ast.AST:
    """What a local name holds where the method binds it once; else the node itself."""
    if isinstance(node, ast.Name) and len(bound.get(node.id, ())) == 1:
        return bound[node.id][0]
    return node


def _reduced(node: ast.AST, bound: dict[str, list[ast.AST]], depth: int = 0) -> bool:
    """A reduction of the per-device values (`x.mean()`, `torch.sum(x)`, `sum(losses) / len(losses)`)."""
    node = _bound_value(node, bound)
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Div, ast.Mult)) and depth < 4:
        return _reduced(node.left, bound, depth + 1)
    func = node.func if isinstance(node, ast.Call) else None
    return (func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)) in _REDUCING_CALLS


def _unwraps(value: ast.AST) -> bool:
    """Is a returned value `<x>.module` (in either arm of a conditional expression)? A function
    that returns a wrapper's `.module` on its wrapped path returns the bare model on every path."""
    if isinstance(value, ast.IfExp):
        return _unwraps(value.body) or _unwraps(value.orelse)
    return isinstance(value, ast.Attribute) and value.attr == "module"


def _by_name(wraps: list[Wrap]) -> dict[str, list[Wrap]]:
    found: dict[str, list[Wrap]] = {}
    for wrap in wraps:
        found.setdefault(wrap.name, []).append(wrap)
    return found


# Imported callables from these roots are no project's: they never return a project's wrapper, nor
# wrap what a call hands them (handed.handed_calls).
LIBRARY_ROOTS = ("torch.", "torchvision.", "numpy.", "np.", "os.", "sys.", "math.", "random.", "json.", "time.",
                  "logging.", "collections.", "functools.", "itertools.", "typing.", "copy.", "argparse.",
                  "tqdm.", "yaml.", "pathlib.", "re.", "shutil.", "pickle.",
                  "builtins.", "PIL.", "cv2.", "scipy.", "sklearn.", "pandas.", "matplotlib.", "apex.")


# Imported functions that may build and wrap a model (checked against the index); other
# imported calls are not followed, which keeps the per-file cost of the condition small.
_BUILDER_WORDS = ("model", "build", "create", "make", "net", "setup", "prepare", "parallel", "wrap", "init",
                  "load", "define", "get_")


# The condition of a wrap through a function of another file, ``builder:<function>``: the function
# returns a DataParallel wrapper (ClassIndex.returns_wrapper settles it).
BUILDER_CONDITION = "builder:"
# What a call of it passes follows the function's name (`builder:utils.create_model?[[1,"False"]]`,
# see _arguments_text): the index decides by the function's ``guard:`` entry (BuilderGuard) whether
# those arguments reach a branch that wraps.
ARGUMENTS_MARK = "?"
GUARD_CONDITION = "guard:"
# An entry `["<position or keyword>.<attribute>", "<constant>"]` of a call's arguments: the truth an
# attribute of that argument has where the caller reads the builder's result (with_attribute_truths).
ATTRIBUTE_MARK = "."
# A guard's test of whether a builder's parameter already holds a wrapper (`if isinstance(module,
# nn.DataParallel):`, written HOLDS_WRAPPER_TEST(module)): a builder that re-wraps only what it was
# handed wrapped (sync-batchnorm's `convert_model`) returns no wrapper to a call handing it a bare
# model, which the call's arguments say with NO_WRAPPER_TEXT (NO_WRAPPER in the test's names).
HOLDS_WRAPPER_TEST = "__holds_wrapper__"
NO_WRAPPER_TEXT = "<no wrapper>"
NO_WRAPPER = object()
# Its negation, ``bare_builder:<function>``: the function returns no wrapper. A finding about what the
# value of such a call holds when it is not wrapped (a checkpoint loaded into it) carries it.
BARE_BUILDER_CONDITION = "bare_builder:"


def unless_wrapped(requires: tuple[frozenset[str], ...]) -> tuple[frozenset[str], ...] | None:
    """The conditions under which a name that holds a wrapper only on ``requires`` holds none, in
    the form of ``requires``: for a wrap through imported builders alone (one alternative of
    ``builder:`` leaves, none of which may return a wrapper), each negated; None for any other
    condition (a `dp:` class, several alternatives), whose negation this form cannot state."""
    if len(requires) != 1 or not all(leaf.startswith(BUILDER_CONDITION) for leaf in requires[0]):
        return None
    return tuple(frozenset({BARE_BUILDER_CONDITION + leaf[len(BUILDER_CONDITION):]}) for leaf in sorted(requires[0]))


def _root_name(node: ast.AST) -> str | None:
    """The name a dotted chain starts from (`utils` for `utils.models.build`), None for other roots."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _builder_like(name: str, resolved: str) -> bool:
    lowered = name.lower()
    return (bool(resolved) and "." in resolved and not resolved.startswith(LIBRARY_ROOTS)
            and not name[:1].isupper() and any(w in lowered for w in _BUILDER_WORDS))


def _conditions(test: ast.AST, positive: bool) -> list[tuple[str, bool]]:
    """The conjuncts a branch establishes, each as (dump of a comparison or name, truth); for an
    `and` or `or`, the whole test too, so that the arm where it fails contradicts the other
    (`if torch.cuda.device_count() > 1 and opt.NUM_GPU > 1:` wraps, its `else` elsewhere reads)."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return _conditions(test.operand, not positive)
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) and positive:
        return [c for v in test.values for c in _conditions(v, True)] + [(ast.dump(test), True)]
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or) and not positive:
        return [c for v in test.values for c in _conditions(v, False)] + [(ast.dump(test), False)]
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.NotEq, ast.IsNot)):
        flipped = ast.Compare(test.left, [ast.Eq() if isinstance(test.ops[0], ast.NotEq) else ast.Is()],
                              test.comparators)
        return [(ast.dump(flipped), not positive)]
    return [(ast.dump(test), positive)]


class _WrapperTestRewrite(ast.NodeTransformer):
    """Writes each test of whether a parameter holds a wrapper as HOLDS_WRAPPER_TEST(<param>) (see
    ScriptFacts._as_guard_test). A class of its own, not one made per call: a class object is
    cyclic, and one closing over the facts would keep the file's tree alive after its analysis."""

    def __init__(self, wrapper_test, params: set[str]) -> None:
        self.wrapper_test, self.params = wrapper_test, params

    def visit_Call(self, node: ast.Call) -> ast.AST:
        if node.args and isinstance(node.args[0], ast.Name) and node.args[0].id in self.params \
                and self.wrapper_test(node, node.args[0].id):
            return ast.Call(ast.Name(HOLDS_WRAPPER_TEST, ast.Load()), [ast.Name(node.args[0].id, ast.Load())], [])
        return node


def _kept_test(value: ast.AST) -> ast.AST | None:
    """The test a stored value is, where it is one: a comparison, `not`, `and`/`or` of such, `bool(t)`,
    `True if t else False` (and `False if t else True`, `not t`)."""
    if isinstance(value, ast.IfExp) and all(isinstance(v, ast.Constant) and isinstance(v.value, bool)
                                            for v in (value.body, value.orelse)) and value.body.value != value.orelse.value:
        return value.test if value.body.value else ast.UnaryOp(ast.Not(), value.test)
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "bool" \
            and len(value.args) == 1 and not value.keywords:
        return value.args[0]
    if isinstance(value, (ast.Compare, ast.BoolOp)) or isinstance(value, ast.UnaryOp) and isinstance(value.op, ast.Not):
        return value
    return None


def _constant_defaults(fn: ast.AST) -> dict[str, object]:
    """The parameters of ``fn`` whose default is a constant, with it."""
    args = fn.args
    positional = args.posonlyargs + args.args
    pairs = list(zip(positional[len(positional) - len(args.defaults):], args.defaults))
    pairs += list(zip(args.kwonlyargs, args.kw_defaults))
    return {param.arg: default.value for param, default in pairs if isinstance(default, ast.Constant)}


def _constant_arguments(fn: ast.AST, call: ast.Call, skip: int, rebound: set[str],
                        holds_no_wrapper=None) -> dict[str, object]:
    """The parameters of ``fn`` that ``call`` binds to a constant (passed, or left at a constant
    default), and with ``holds_no_wrapper``, to ``NO_WRAPPER`` where it says the argument holds
    none; less those the function rebinds."""
    env = _constant_defaults(fn)
    names = [a.arg for a in fn.args.posonlyargs + fn.args.args][skip:]
    if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
        return {}  # `*args` / `**kwargs`: what each parameter gets is not known
    bound = list(zip(names, call.args)) + [(k.arg, k.value) for k in call.keywords]
    for name, value in bound:
        if isinstance(value, ast.Constant):
            env[name] = value.value
        elif holds_no_wrapper is not None and holds_no_wrapper(value):
            env[name] = NO_WRAPPER
        else:
            env.pop(name, None)
    return {k: v for k, v in env.items() if k not in rebound}


def _exits(stmts: list[ast.stmt]) -> bool:
    """Does a block end by leaving the function (`return`, `raise`)?"""
    return bool(stmts) and isinstance(stmts[-1], (ast.Return, ast.Raise))


def _alternatives_fail(alternatives, env: dict[str, object]) -> bool:
    """Does some test of every alternative come out against the arm it needs, under ``env``?"""
    return bool(env) and all(any(_truth(test, env) is (not truth) for test, truth in alternative)
                             for alternative in alternatives)


def _over_names(test: ast.AST, names: set[str]) -> bool:
    """Is ``test`` built from ``names`` (and their attributes, `opt.fp16`), constants, `not`/`and`/`or`
    and comparisons alone (what _truth may decide from constant arguments, and from what a caller
    knows of an argument's attributes where it reads the result: see ``with_attribute_truths``)?"""
    found = False
    for node in ast.walk(test):
        if _holds_wrapper_test(node) in names:
            found = True
        elif isinstance(node, ast.Attribute):
            if not (isinstance(node.value, ast.Name) and node.value.id in names):
                return False
        elif isinstance(node, ast.Name):
            if node.id not in names and node.id != HOLDS_WRAPPER_TEST:
                return False
            found = True
        elif not isinstance(node, (ast.Constant, ast.UnaryOp, ast.BoolOp, ast.Compare, ast.expr_context,
                                   ast.boolop, ast.unaryop, ast.cmpop)):
            return False
    return found


def _holds_wrapper_test(node: ast.AST) -> str | None:
    """The parameter a `HOLDS_WRAPPER_TEST(<param>)` test (see ScriptFacts._as_guard_test) asks about."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == HOLDS_WRAPPER_TEST \
            and len(node.args) == 1 and isinstance(node.args[0], ast.Name):
        return node.args[0].id
    return None


def _literal_text(node: ast.AST) -> str | None:
    """The text a constant argument is carried in across files (read back with literal_eval)."""
    if isinstance(node, ast.Constant) and type(node.value) in (bool, int, str, type(None)):
        return repr(node.value)
    return None


def _arguments_text(call: ast.Call, holds_no_wrapper=None) -> str:
    """What a call of a builder of another file passes, for its ``guard:``: `?` and a JSON list of
    [position or keyword, constant's text, ``NO_WRAPPER_TEXT`` where ``holds_no_wrapper`` says the
    argument holds none, or null]; empty where `*args`/`**kwargs` hide it."""
    if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
        return ""

    def text(value: ast.AST) -> str | None:
        literal = _literal_text(value)
        if literal is None and holds_no_wrapper is not None and holds_no_wrapper(value):
            return NO_WRAPPER_TEXT
        return literal

    passed = [[i, text(a)] for i, a in enumerate(call.args)]
    passed += [[k.arg, text(k.value)] for k in call.keywords]
    return ARGUMENTS_MARK + json.dumps(passed, separators=(",", ":"))


def guard_fails(entry: str, arguments: str) -> bool:
    """For the index: does a call that passed ``arguments`` (its `?[...]` text, see _arguments_text)
    leave every wrapping return of a builder unreachable, by the builder's ``guard:`` ``entry``
    (BuilderGuard.text)?"""
    if not arguments:
        return False
    params, alternatives = json.loads(entry[len(GUARD_CONDITION):])
    env = {name: literal_eval(default) for name, (_, default) in params.items() if default is not None}
    at = {position: name for name, (position, _) in params.items() if position >= 0}
    for key, value in json.loads(arguments[len(ARGUMENTS_MARK):]):
        if isinstance(key, str) and ATTRIBUTE_MARK in key:  # `0.fp16`: an attribute of an argument
            where, _, attr = key.partition(ATTRIBUTE_MARK)
            name = at.get(int(where)) if where.isdigit() else where if where in params else None
            if name is not None:
                env[f"{name}.{attr}"] = literal_eval(value)
            continue
        name = at.get(key) if isinstance(key, int) else key if key in params else None
        if name is None:
            continue
        if value is None:
            env.pop(name, None)
        else:
            env[name] = NO_WRAPPER if value == NO_WRAPPER_TEXT else literal_eval(value)
    tests = [[(ast.parse(test, mode="eval").body, truth) for test, truth in alternative] for alternative in alternatives]
    return _alternatives_fail(tests, env)


def builder_conditions(facts: ScriptFacts, key: str) -> list[str]:
    """What other files are told of a builder of this file (FileResult.builders): the cross-file
    conditions of one of its wrapping returns, and its ``guard:`` entry where it has one."""
    guard = facts.guards.get(key)
    return sorted(facts.builders[key].requires) + ([guard.text()] if guard is not None else [])


def _truth(test: ast.AST, env: dict[str, object]) -> bool | None:
    """The value of a branch test where the names in ``env`` hold those constants (or ``NO_WRAPPER``,
    which decides only a HOLDS_WRAPPER_TEST), if it is decided."""
    param = _holds_wrapper_test(test)
    if param is not None:
        return False if env.get(param) is NO_WRAPPER else None
    if isinstance(test, ast.Name):
        return bool(env[test.id]) if test.id in env and env[test.id] is not NO_WRAPPER else None
    if isinstance(test, ast.Attribute):  # `opt.fp16`: known only from where a caller reads the result
        key = ast.unparse(test)
        return bool(env[key]) if key in env else None
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = _truth(test.operand, env)
        return None if inner is None else not inner
    if isinstance(test, ast.BoolOp):
        values = [_truth(v, env) for v in test.values]
        decisive = isinstance(test.op, ast.Or)  # True decides an `or`, False an `and`
        if decisive in values:
            return decisive
        return (not decisive) if all(v is not None for v in values) else None
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.left, ast.Name) \
            and test.left.id in env and env[test.left.id] is not NO_WRAPPER and isinstance(test.comparators[0], ast.Constant):
        left, right, op = env[test.left.id], test.comparators[0].value, test.ops[0]
        if isinstance(op, ast.Is):
            return left is right
        if isinstance(op, ast.IsNot):
            return left is not right
        if isinstance(op, ast.Eq):
            return left == right
        if isinstance(op, ast.NotEq):
            return left != right
    return None


def _contradict(x: tuple[str, bool], y: tuple[str, bool]) -> bool:
    return x[0] == y[0] and x[1] != y[1]


def _rebinds_name(fn: ast.AST, name: str) -> bool:
    """Does the body of ``fn`` assign to ``name`` (its parameters aside)?"""
    return any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store) for n in ast.walk(fn))


def _binds(scope: ast.AST, name: str) -> bool:
    """Does a function bind ``name`` itself (a parameter or an assignment)?"""
    if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        args = scope.args
        if any(a.arg == name for a in args.posonlyargs + args.args + args.kwonlyargs):
            return True
    return _rebinds_name(scope, name)


def target_text(node: ast.AST | None) -> str | None:
    """`x` or `self.x`: how a script or a method names what holds a model (a plain name or an
    attribute of self), else None."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        return f"self.{node.attr}"
    return None


# The condition of a finding about a call of `self.<attr>` in a class of a file that wraps nothing there:
# ``wrapped_attribute:<attr>@<module>`` holds where a scanned script of the module's package or above it
# (or a top-level one) stores a DataParallel wrapper in `<obj>.<attr>` of an object other than self
# (``wrapped_attributes``): the object a factory built, whose class the wrapping script does not name
# (`trainer.generator = nn.DataParallel(trainer.generator)`).
WRAPPED_ATTRIBUTE_CONDITION = "wrapped_attribute:"


def wrapped_attributes(ctx: FileContext) -> list[str]:
    """The attributes this file stores a DataParallel wrapper in on an object other than self
    (`trainer.generator = nn.DataParallel(trainer.generator)`, also `.cuda()` / `.to()` after it)."""
    if not mentions_dataparallel(ctx):
        return []
    calls = {id(call) for call in script_facts(ctx).dp_calls}
    if not calls:
        return []
    found = set()
    for node in ctx.nodes(ast.Assign):
        value = node.value
        while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr in SELF_RETURNING:
            value = value.func.value
        if id(value) not in calls:
            continue
        for target in node.targets:
            if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id != "self":
                found.add(target.attr)
    return sorted(found)


# The condition of a read of `self.<attr>.<name>` in a class whose base is a class of another file
# (``init_wrapped_attributes``): ``init_wrapped:<attr>@<base>``, the base or one of its bases stores a
# stock DataParallel wrapper in `self.<attr>` in its `__init__` (ClassIndex.init_wrapped settles it).
INIT_WRAPPED_CONDITION = "init_wrapped:"


def init_wrapped_attributes(ctx: FileContext) -> dict[str, list[str]]:
    """This file's classes -> the attributes of self their own `__init__` stores a stock DataParallel
    wrapper in, on some path (`self.model = torch.nn.DataParallel(self.model)` in a BaseTrainer whose
    subclasses, in other files, read `self.model.encoder` after `super().__init__(...)`)."""
    found: dict[str, set[str]] = {}
    for qualname, method, attr, _ in _self_wraps(ctx):
        if method.name == "__init__":
            found.setdefault(qualname, set()).add(attr)
    return {name: sorted(attrs) for name, attrs in found.items()}


# The condition of a wrap of `x` right after a call `x.<method>()` (nested wrappers): ``wrapping_method:<method>``,
# a scanned module class defines a method of that name that stores a DataParallel wrapper in an
# attribute of self (``wrapping_methods``; ClassIndex.wrapping_method settles it).
WRAPPING_METHOD_CONDITION = "wrapping_method:"
# The condition of a read of `x.<attr>.<name>` after a call `x.<method>()` in the same function:
# ``method_wraps:<method>@<attr>``, a scanned class defines a method of that name that stores a DataParallel
# wrapper in `self.<attr>` (``wrapping_methods``; ClassIndex.method_wraps settles it).
METHOD_WRAPS_CONDITION = "method_wraps:"


def wrapping_methods(ctx: FileContext) -> dict[str, list[str]]:
    """This file's classes -> `<method>@<attr>` for their methods, other than `__init__`, that store a
    stock DataParallel wrapper in an attribute of self (`def parallelise(self): self.conv1 =
    nn.DataParallel(self.conv1)`: `parallelise@conv1`): a model that wraps its own submodules when
    asked, which a trainer may then wrap whole; a trainer whose `prepare_model()` wraps `self.tagger`
    (CoLaDa's NERTrainer), whose callers then read `trainer.tagger.combine`."""
    found: dict[str, set[str]] = {}
    for qualname, method, attr, wrap in _self_wraps(ctx):
        # The wrapper built in that method, not one it only moves (`self.conv1 = self.conv1.cuda()`
        # after another method wrapped it).
        if method.name != "__init__" and ctx.enclosing(wrap.call, FUNCTION_DEFS) is method:
            found.setdefault(qualname, set()).add(f"{method.name}@{attr}")
    return {name: sorted(methods) for name, methods in found.items()}


# The condition of a read through a parameter of a module-level function, or of a class's `__init__`,
# that a call of another file may hand a DataParallel wrapper (``handed_wrappers``):
# ``handed_wrapper:<module>.<function or class>@<k>:<attr>`` (positional k, `self` not counted, or
# ``@<keyword>``; <attr> what the read takes); ClassIndex.handed_wrapper settles it.
HANDED_WRAPPER_CONDITION = "handed_wrapper:"


def handed_wrappers(ctx: FileContext) -> list[str]:
    """`<callee>@<k>` (positional k) or `<callee>@<keyword>` for each call of this file that hands a
    DataParallel wrapper to a function or class it imports (LT-OCF's `Procedure.Test(dataset, Recmodel,
    ...)` and `utils.BPRLossT(Recmodel, config)` after `Recmodel = nn.DataParallel(Recmodel)`), the
    callee as this file's imports resolve it, then `=` and the attributes the file sets on a wrapper
    (`model.LR_REGIME = [...]`, MEAL-V2: the callee reads them back without error), comma-separated. A
    wrapper that holds only on a cross-file condition (a builder of another file, a `dp:` class) is
    left out: the callee's finding could not carry it."""
    if not mentions_dataparallel(ctx):
        return []
    facts = script_facts(ctx)
    stored = ",".join(sorted({n.attr for n in ctx.nodes(ast.Attribute) if isinstance(n.ctx, ast.Store)
                              and facts.wrap_for(n.value) is not None}))
    aliases = ctx.imports.aliases
    found: set[str] = set()
    for call in ctx.nodes(ast.Call):
        if not (call.args or call.keywords) or _root_name(call.func) not in aliases or facts.is_dp_call(call):
            continue  # (a function of this file: ScriptFacts follows the wrapper into it)
        resolved = ctx.resolve(call.func) or ""
        if "." not in resolved or resolved.startswith(LIBRARY_ROOTS):
            continue
        passed = [(str(i), arg) for i, arg in enumerate(call.args) if not any(
            isinstance(a, ast.Starred) for a in call.args[:i + 1])]
        passed += [(k.arg, k.value) for k in call.keywords if k.arg is not None]
        for position, arg in passed:
            source = facts.wrapper_value(arg, call) if isinstance(arg, (ast.Name, ast.Attribute, ast.Call)) else None
            if source is not None and not source.requires:
                found.add(f"{resolved}@{position}" + (f"={stored}" if stored else ""))
    return sorted(found)


# The condition of a read, in a method of a class, of an attribute another method of the class wraps
# when a caller asks it (FOTS's `summary()` reading `self.sharedConv`, which `parallelize()` wraps):
# ``called_late:<method>``, some call of that method may run after the wrapping one (ClassIndex.called_late
# settles it from each file's ``method_calls``: not where every scanned call of it is made on an instance
# just built).
CALLED_LATE_CONDITION = "called_late:"
# The advice condition (``Violation.advice_if``) of a read in a method of a class that wraps one of its
# attributes: ``uncalled:<module>:<method>,...``, the methods through which alone the read runs (the
# method and, transitively, the class's methods that call it on self, those no method of the class
# calls), then `:<base>,...` its bases of other files. ClassIndex.uncalled settles it: advice where no
# scanned file calls any of them, a scanned file other than <module> drives instances (``method_calls``:
# a training script or trainer), and each of those bases is a scanned class (a library's base may call a
# method by name: a framework's hook, unittest's `test_*`).
UNCALLED_CONDITION = "uncalled:"


def method_calls(ctx: FileContext) -> tuple[list[str], list[str]]:
    """(fresh, later): the method names this file calls on an instance it has only just built
    (`model = eval(config["arch"])(config)` then `model.summary()`, nothing else done with `model` in
    between: no method of it, no call it is handed to, can have run), and those it calls any other way.
    Only a training script or trainer (TRAINING_TOKENS, or a DataParallel form named) is read: that is
    where the model's methods are called in order. A call of `self.<attr>.<m>()` inside a method named
    `m` hands the call on to a part (FOTS's `summary()` summarising each of its networks) and is not
    counted: it runs when the outer method does."""
    if not (mentions_training_token(ctx) or mentions_dataparallel(ctx)):
        return [], []
    fresh: set[str] = set()
    later: set[str] = set()
    for call in ctx.nodes(ast.Call):
        func = call.func
        if not isinstance(func, ast.Attribute) or func.attr.startswith("__"):
            continue
        receiver = func.value
        if isinstance(receiver, ast.Name):
            if receiver.id in ctx.imports.aliases:
                continue  # a module's function (`torch.save(...)`)
            (fresh if _on_fresh_instance(call, receiver.id, ctx) else later).add(func.attr)
        else:
            method = ctx.enclosing(call, FUNCTION_DEFS) if isinstance(receiver, ast.Attribute) else None
            if method is None or method.name != func.attr:
                later.add(func.attr)
    return sorted(fresh - later), sorted(later)


def _on_fresh_instance(call: ast.Call, name: str, ctx: FileContext) -> bool:
    """Is ``call`` (`name.m(...)`, a statement of its own) made on the instance the statements just
    before it built (`name = Net(...)`, `name = eval(arch)(config)`, `name = MODELS[key](config)`), with
    nothing between them naming ``name``?"""
    statement = ctx.parent(call)
    block_owner = ctx.parent(statement) if isinstance(statement, ast.Expr) else None
    if block_owner is None:
        return False
    block = next((stmts for field in ("body", "orelse", "finalbody")
                  if isinstance(stmts := getattr(block_owner, field, None), list) and statement in stmts), None)
    if block is None:
        return False
    for prev in reversed(block[:block.index(statement)]):
        if isinstance(prev, ast.Assign) and len(prev.targets) == 1 and isinstance(prev.targets[0], ast.Name) \
                and prev.targets[0].id == name:
            return _builds_instance(prev.value)
        if any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(prev)):
            return False
    return False


def _builds_instance(value: ast.AST) -> bool:
    """A construction: a class called by a capitalised name (`Net(...)`, `models.Net(...)`), or a class
    looked up by a computed name and called (`eval(arch)(config)`, `MODELS[key](config)`), not a
    function that may do more (`build_model(cfg)`)."""
    if not isinstance(value, ast.Call):
        return False
    func = value.func
    if isinstance(func, (ast.Call, ast.Subscript)):
        return True
    name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
    return name[:1].isupper()


def _self_wraps(ctx: FileContext) -> Iterator[tuple[str, ast.AST, str, Wrap]]:
    """(class qualname, method, attribute, wrap) for each stock DataParallel wrapper a method of a
    class of this file stores in a plain attribute of self, on some path."""
    if not mentions_dataparallel(ctx):
        return
    for wrap in script_facts(ctx).wraps:
        attr = wrap.name.removeprefix("self.")
        if wrap.parameter or wrap.source.requires or attr == wrap.name or "." in attr \
                or not isinstance(wrap.scope, ast.ClassDef) or wrap.origin is None:
            continue
        method = ctx.enclosing(wrap.origin, FUNCTION_DEFS)
        info = ctx.classes.get(wrap.scope.name)
        if method is None or info is None or info.node is not wrap.scope \
                or ctx.enclosing(method, ast.ClassDef) is not wrap.scope:
            continue
        yield info.qualname, method, attr, wrap


def script_facts(ctx: FileContext) -> ScriptFacts:
    return ctx.fact(ScriptFacts)


def mentions_dataparallel(ctx: FileContext) -> bool:
    """Can the file hold a DataParallel wrapper at all? (The script rules need one.)"""
    return ctx.fact(_mentions_dataparallel)


def _mentions_dataparallel(ctx: FileContext) -> bool:
    if mentions_script_token(ctx):
        facts = script_facts(ctx)
        return bool(facts.dp_calls or facts.wraps)
    # The imports first: scanning a large file's text for each token costs more.
    if _imports_project_function(ctx) and mentions_training_token(ctx):
        return bool(script_facts(ctx).wraps)  # only a builder imported from another file can wrap here
    return False


# The condition of a finding that needs a batch leaving one sample to a replica: some scanned script
# that wraps a model may run a partial last batch (ClassIndex.keeps_partial_batches settles it from
# each file's `partial_batches`).
PARTIAL_BATCHES_CONDITION = "partial_batches:"
# `FileResult.partial_batches` of a file that wraps a model: it builds a DataLoader (or batch
# sampler) with `drop_last=True`, or none, or it only evaluates what it wraps (EVALUATES: whatever
# its loaders keep never reaches a model in training mode).
DROPS_LAST = "dropped"
KEEPS_LAST = "kept"
EVALUATES = "evaluated"
# Text that a file training a model holds (a backward pass, an optimizer or scheduler step, a
# switch to training mode): a file without any of it, which puts its models in eval mode, evaluates.
_TRAINING_MODE_TOKENS = ("backward(", ".step(", ".train(")


def partial_batches(ctx: FileContext) -> str:
    """For a file that wraps a model in DataParallel: DROPS_LAST when it passes `drop_last=True` to a
    call (a DataLoader, a BatchSampler: its training loader, since evaluation needs none); EVALUATES
    when it only evaluates what it wraps (see ``_evaluates_only``); else KEEPS_LAST (its loader keeps
    the partial last batch, or is built elsewhere); "" for other files."""
    if not mentions_dataparallel(ctx):
        return ""
    if "drop_last" in ctx.source.text and any(is_true(keyword(call, "drop_last")) for call in ctx.nodes(ast.Call)):
        return DROPS_LAST
    return EVALUATES if _evaluates_only(ctx) else KEEPS_LAST


# The condition of a finding on a path that runs only in eval mode (`if not self.training:`, the
# `else:` of `if self.training:`): some scanned file may switch a model to eval mode, or none wraps
# one (a library, whose users evaluate). ClassIndex.may_evaluate settles it from each file's
# `switches_to_eval`.
EVALUATED_CONDITION = "evaluated:"


def switches_to_eval(ctx: FileContext) -> bool:
    """May this file put a model in eval mode: call `.eval()` (with no argument), `.train(False)` or `.train(mode)` (any
    argument but True), or set `.training`? A module starts in training mode, and only such a switch
    makes `self.training` False: where no scanned file holds one, a path taken only in eval mode never
    runs in the scanned program. (The text first: most files name neither.)"""
    text = ctx.source.text
    if ".eval(" in text or ".train(" in text:
        for node in ctx.nodes(ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute) and (
                    func.attr == "eval" and not node.args and not node.keywords  # (`Module.eval()` takes none:
                    # `editdistance.eval(a, b)`, `sympy_expr.eval(x)` are other functions)
                    or func.attr == "train" and (node.keywords or node.args and not is_true(node.args[0]))):
                return True
    return ".training" in text and _SETS_TRAINING.search(text) is not None and any(
        isinstance(target, ast.Attribute) and target.attr == "training"
        for node in ctx.nodes(ast.Assign) for target in node.targets)


_SETS_TRAINING = re.compile(r"\.training\s*=[^=]")


def _evaluates_only(ctx: FileContext) -> bool:
    """Does the file run what it wraps in eval mode only: it calls `.eval()`, holds no backward pass,
    optimizer step or `.train(` call, and hands no wrapper it holds to another call (a training
    function of another file: `train(net=model)`), nor builds one that it does not bind to a name?
    A test or inference script: a batch of one per replica reaches BatchNorm on its running
    statistics there, so its loaders do not decide whether training can hand a replica one sample.
    (`torch.no_grad()` alone is no such evidence: BatchNorm in training mode still needs two values.)"""
    text = ctx.source.text
    if ".eval()" not in text or any(token in text for token in _TRAINING_MODE_TOKENS):
        return False
    facts = script_facts(ctx)
    wraps = facts.wraps
    bound = {id(w.call) for w in wraps}
    if any(id(call) not in bound for call in facts.dp_calls):
        return False  # a wrapper handed on as it is built (`Trainer(nn.DataParallel(model))`)
    first_held: dict[str, int] = {}
    for w in wraps:
        first_held[w.name] = min(w.start, first_held.get(w.name, w.start))
    local = {node.name for node in ctx.nodes(*FUNCTION_DEFS)}
    for call in ctx.nodes(ast.Call):
        if id(call) in bound or target_text(call.func) in _INSPECTIONS:
            continue
        callee = call.func.attr if isinstance(call.func, ast.Attribute) and target_text(call.func.value) == "self" \
            else call.func.id if isinstance(call.func, ast.Name) else None
        if callee in local:
            continue  # this file's own code, which holds no training step
        for value in (*call.args, *(k.value for k in call.keywords)):
            if isinstance(value, ast.Starred):
                value = value.value
            name = target_text(value)
            if name in first_held and call.lineno >= first_held[name]:
                return False
    return True


# Calls that only look at a model they are handed.
_INSPECTIONS = frozenset({"print", "isinstance", "type", "id", "len", "repr", "str", "hasattr", "getattr"})


def mentions_script_token(ctx: FileContext) -> bool:
    """Does the text name any DataParallel form at all? Asked once per class: scanning a large
    file's text again for every class was a tenth of the analysis of a model library."""
    return ctx.fact(_mentions_script_token)


def _mentions_script_token(ctx: FileContext) -> bool:
    return any(token in ctx.source.text for token in SCRIPT_TOKENS)


def mentions_training_token(ctx: FileContext) -> bool:
    """Does the text look like a training script (``TRAINING_TOKENS``)? Asked by the script facts,
    ``mentions_dataparallel`` and the wrapper-attribute rule of the same file: each scan of a large file's text for
    five tokens that a model library never spells costs as much as a small fact."""
    return ctx.fact(_mentions_training_token)


def _mentions_training_token(ctx: FileContext) -> bool:
    return any(token in ctx.source.text for token in TRAINING_TOKENS)


def _imports_project_function(ctx: FileContext) -> bool:
    """Does the file import a lower-case name from outside the libraries (a possible builder), or
    call one through an imported project module (`import utils` ... `utils.initialize_model(m)`)?"""
    aliases = ctx.imports.aliases
    if any(_builder_like(name, target) for name, target in aliases.items()):
        return True
    modules = [name for name, target in aliases.items() if _project_module(target)]
    return any(_builder_like(attr, f"{aliases[name]}.{attr}")
               for name in modules if f"{name}." in ctx.source.text
               for attr in re.findall(rf"\b{re.escape(name)}\.(?:\w+\.)*(\w+)\s*\(", ctx.source.text))


def _project_module(target: str) -> bool:
    """Can ``target`` (an import's dotted name) be a module of the project: not a library's, nor the
    standard library's? Only its attribute calls are then read from the text."""
    root = target.partition(".")[0]
    return bool(root) and not f"{target}.".startswith(LIBRARY_ROOTS) and root not in sys.stdlib_module_names


def with_attribute_truths(requires: tuple[frozenset[str], ...], call: ast.Call,
                          truths: dict[str, bool]) -> tuple[frozenset[str], ...]:
    """``requires`` with what a read knows of the builder call's arguments added to each builder
    condition's arguments (`builder:models.create_model?[[0,null]]` -> `...?[[0,null],["0.fp16","True"]]`):
    ``truths`` maps `<name>.<attribute>` tests (pix2pixHD's `if opt.fp16:` around the read) to the truth
    they have there, for names the call passes and nothing rebinds in between (the caller checks)."""
    extra = []
    for text, truth in truths.items():
        name, _, attr = text.partition(".")
        for i, arg in enumerate(call.args):
            if isinstance(arg, ast.Name) and arg.id == name:
                extra.append([f"{i}{ATTRIBUTE_MARK}{attr}", repr(truth)])
        extra += [[f"{k.arg}{ATTRIBUTE_MARK}{attr}", repr(truth)] for k in call.keywords
                  if isinstance(k.value, ast.Name) and k.value.id == name]
    if not extra:
        return requires

    def rewrite(condition: str) -> str:
        at = condition.find(BUILDER_CONDITION)
        at = condition.find(ARGUMENTS_MARK, at) if at >= 0 else -1
        head, rest = condition[:at + 1], condition[at + 1:]
        if at < 0 or not rest.startswith("["):
            return condition
        passed, end = json.JSONDecoder().raw_decode(rest)
        return head + json.dumps(passed + extra, separators=(",", ":")) + rest[end:]

    return tuple(frozenset(rewrite(c) for c in alternative) for alternative in requires)
