"""
## What it does
Flags an `nn.DataParallel` wrapped around another `nn.DataParallel`:
`nn.DataParallel(nn.DataParallel(net))`, or wrapping a name that already holds a
wrapper (often a helper that wraps again a model its caller already wrapped, or a builder
that returns one), or wrapping a module whose constructor was handed a wrapper and keeps it as a
submodule it calls (`DataParallel(Holder(nn.DataParallel(net)))`, the holder's `__init__` doing
`self.net = net` and a method calling `self.net(...)`, in this file or another), or wrapping a model
right after calling a method on it (`model.parallelise()`) that a module class of the project
defines to wrap its own submodules in DataParallel (`self.conv1 = nn.DataParallel(self.conv1)`, in
this file or another). One wrapper in each arm of an `if`/`else` is not nesting.

Also flags the functional `nn.parallel.data_parallel(self.net, x, ...)` (or a helper function of the
project that passes its arguments on to it) in the forward code of a module that another module
of the same file runs, alone or in an `nn.Sequential`, under the functional data_parallel
(crnn.pytorch's `BidirectionalLSTM` inside `CRNN`'s `data_parallel(self.rnn, ...)`).

## Why is this bad?
On more than one GPU it crashes at the first call. The outer wrapper replicates the inner
one onto every device; the inner wrapper's forward on replica 1 finds its module's buffers
on cuda:1, not its `device_ids[0]` ("module must have its parameters and buffers on device
cuda:0 ... but found one of them on device: cuda:1"), and a model without buffers fails
one step later, when the inner wrapper scatters its chunk to devices whose replicas still
hold cuda:1 weights (replicas have no parameters of their own to broadcast). On one GPU
or none DataParallel calls the module directly and the nesting only costs. Its
state dict keys get a `module.module.` prefix that nothing else loads.

This is an error, not cost only: the second wrap is typically in a multi-GPU branch
(`if n_gpu > 1:`), exactly where it fails (transformers fixed its `run_*.py` examples'
evaluation-time re-wrap for this error, huggingface/transformers#3842).

## How to fix
Wrap once; check `isinstance(model, nn.DataParallel)` before wrapping in helpers.
"""

from __future__ import annotations

import ast

from dpcheck.analysis.bindings import statements_before
from dpcheck.analysis.functional import functional_calls_by_class, stored_constructions
from dpcheck.analysis.model_class import file_models
from dpcheck.analysis.scripts import WRAPPING_METHOD_CONDITION, mentions_dataparallel, script_facts
from dpcheck.analysis.wrapping import KEPT_MODULE_CONDITION, without_conversions
from dpcheck.findings import Severity
from dpcheck.rule import TRAINING_SCRIPT, Rule


class NestedDataParallel(Rule):
    code = "DP705"
    name = "nested-dataparallel"
    severity = Severity.ERROR
    not_confirmable = TRAINING_SCRIPT
    summary = "DataParallel inside DataParallel fails on more than one GPU (replica devices); keys get module.module."
    fix_hint = "Wrap once; test isinstance(model, nn.DataParallel) before wrapping"
    bad_example = """
        model = nn.DataParallel(Net().cuda())
        model = nn.DataParallel(model)
    """
    good_example = """
        model = Net().cuda()
        if not isinstance(model, nn.DataParallel):
            model = nn.DataParallel(model)
    """

    def check_file(self, ctx):
        if len(ctx.fact(_functional_by_class)) > 1:  # (nesting takes two classes that run one)
            for model in file_models(ctx):
                yield from self._functional_in_replicas(model)
        if not mentions_dataparallel(ctx):
            return
        facts = script_facts(ctx)
        for call in facts.dp_calls:
            inner = call.args[0] if call.args else None
            if inner is None:
                continue
            source = facts.wrapper_value(inner)
            # `self.net = self.net.cuda()` in another method carries this very wrapper back to its
            # own argument (`self.net = DataParallel(self.net)`): a wrapper never wraps itself.
            if source is not None and source.call is not call:
                requires = tuple(frozenset({c}) for c in sorted(source.requires | facts.source_of(call).requires))
                yield self.violation(call, "This DataParallel wraps a model that is already wrapped in "
                                     "DataParallel: on more than one GPU the inner wrapper's replicas find their "
                                     "module off its device_ids[0] and the first call fails, and state dict keys "
                                     "get `module.module.`", requires=requires,
                                     fix=self.offer_fix("Remove the second DataParallel wrapper"))
                continue
            yield from self._wrapper_kept_by_constructor(call, inner, facts)
            yield from self._wrapped_after_wrapping_method(call, inner, facts)

    def _functional_in_replicas(self, model):
        """A module whose forward code runs the functional data_parallel (torch's, or a project helper
        that passes it on) while another module of this file runs one that holds it (alone or in an
        `nn.Sequential`) under the functional data_parallel: the inner call runs on the outer one's
        replicas."""
        own = model.ctx.fact(_functional_by_class).get(model.name)
        outer = _run_in_replicas_by(model) if own else None
        if outer is None:
            return
        other, outer_call, outer_requires = outer
        for call, _, requires in own:
            yield self.violation(call, f"The functional data_parallel runs inside the replicas of `{other}`'s "
                                 f"data_parallel (line {outer_call.lineno}), which holds this module: on more than "
                                 "one GPU the replica on cuda:k finds its module off device_ids[0] and the call fails",
                                 requires=((model.requires,) if model.requires else ()) + requires + outer_requires)

    def _wrapper_kept_by_constructor(self, call, inner, facts):
        """`DataParallel(holder)` where `holder = Holder(wrapper, ...)`: the holder's class keeps that
        argument as a submodule it calls (a cross-file condition the project index settles)."""
        built = facts.constructed_value(inner)
        if built is None:
            return
        resolved = facts.ctx.resolve(built.func)
        if not resolved or any(isinstance(a, ast.Starred) for a in built.args):
            return
        handed = [(f"@{k}", arg) for k, arg in enumerate(built.args)]
        handed += [(k.arg, k.value) for k in built.keywords if k.arg is not None]
        for where, arg in handed:
            source = facts.wrapper_value(arg)
            if source is None or source.call is call:
                continue
            requires = tuple(frozenset({c}) for c in sorted(source.requires | facts.source_of(call).requires))
            requires += (frozenset({f"{KEPT_MODULE_CONDITION}{resolved}:{where}"}),)
            yield self.violation(call, f"This DataParallel wraps `{ast.unparse(built.func)}(...)`, whose constructor "
                                 f"keeps `{ast.unparse(arg)}`, a DataParallel wrapper, as a submodule it calls: on "
                                 "more than one GPU the inner wrapper's replicas find their module off its "
                                 "device_ids[0] and the first call fails", requires=requires)
            return

    def _wrapped_after_wrapping_method(self, call, inner, facts):
        """`x.parallelise()` and then `DataParallel(x)` in the same block, where a module class of the
        project defines `parallelise` to store DataParallel wrappers of its own submodules in self
        (scripts.wrapping_methods: a condition the project index settles, since the class of `x`, a
        trainer's constructor argument, is seldom named here)."""
        if not isinstance(inner, (ast.Name, ast.Attribute)):
            return
        ctx = facts.ctx
        stmt = ctx.enclosing(call, ast.stmt)
        if stmt is None:
            return
        wrapped = ast.unparse(inner)
        for earlier in reversed(statements_before(ctx.parent(stmt), stmt)):
            if _rebinds(earlier, wrapped):
                return
            asked = earlier.value if isinstance(earlier, ast.Expr) else None
            if isinstance(asked, ast.Call) and isinstance(asked.func, ast.Attribute) and not asked.args \
                    and not asked.keywords and ast.unparse(asked.func.value) == wrapped:
                method = asked.func.attr
                requires = tuple(frozenset({c}) for c in sorted(facts.source_of(call).requires))
                requires += (frozenset({f"{WRAPPING_METHOD_CONDITION}{method}"}),)
                yield self.violation(call, f"This DataParallel wraps `{ast.unparse(inner)}` right after "
                                     f"`{ast.unparse(asked)}` (line {asked.lineno}), and a module class of the "
                                     f"project defines `{method}` to wrap its own submodules in DataParallel: on "
                                     "more than one GPU the inner wrappers' replicas find their module off "
                                     "device_ids[0] and the first call fails", requires=requires)
                return

    def fix(self, finding, editor):
        import libcst as cst

        call = editor.node  # the outer DataParallel(...)
        if not isinstance(call, cst.Call) or not call.args or call.args[0].keyword is not None:
            return
        inner = call.args[0].value
        parent = editor.parent(call)
        if isinstance(parent, cst.Assign) and len(parent.targets) == 1 and \
                parent.targets[0].target.deep_equals(inner):
            line = editor.enclosing(parent, cst.SimpleStatementLine)
            if line is not None and len(line.body) == 1:  # `model = DataParallel(model)`: drop it
                editor.replace(line, cst.RemovalSentinel.REMOVE)
                return
        editor.replace(call, inner.with_changes(lpar=call.lpar, rpar=call.rpar) if call.lpar else inner)


def _rebinds(stmt: ast.stmt, text: str) -> bool:
    """Does ``stmt`` (or a statement nested in it) assign another object to the expression that reads
    ``text``? Moving or switching a module (`model = model.cuda()`, `.to(device)`, `.eval()`) returns
    the module itself."""
    for node in ast.walk(stmt):
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For)) else ()
        if any(ast.unparse(t) == text for t in targets):
            value = getattr(node, "value", None)
            if value is None or ast.unparse(without_conversions(value)) != text:
                return True
    return False


def _functional_by_class(ctx) -> dict[str, list[tuple[ast.Call, str, tuple[frozenset[str], ...]]]]:
    """Each class of the file -> its forward-code calls that run a module of self under the functional
    data_parallel: (call, the attribute of self, the conditions on which one does: any reading of a
    helper's parameters)."""
    found = {}
    for name, calls in functional_calls_by_class(ctx).items():
        grouped: dict[int, tuple[ast.Call, str, set]] = {}
        for call in calls:
            grouped.setdefault(id(call.call), (call.call, call.attr, set()))[2].add(call.requires)
        found[name] = [(call, attr, () if () in conditions else (frozenset(c for r in conditions for c in r[0]),))
                       for call, attr, conditions in grouped.values()]
    return found


def _run_in_replicas_by(model) -> tuple[str, ast.Call, tuple[frozenset[str], ...]] | None:
    """Another module of this file whose forward code runs one that holds ``model`` under the functional
    data_parallel: (its name, that call, the conditions on which the call is one); else None."""
    calls = model.ctx.fact(_functional_by_class)
    for other in file_models(model.ctx):
        for call, attr, requires in calls.get(other.name, ()) if other is not model else ():
            if _holds_instance(other, attr, model.name):
                return other.name, call, requires
    return None


def _holds_instance(holder, attr, name) -> bool:
    """Is `self.<attr>` of ``holder`` built as an instance of the class ``name`` of this file (alone
    or in an `nn.Sequential`/`nn.ModuleList`)?"""
    return any(isinstance(c.func, ast.Name) and c.func.id == name for c in stored_constructions(holder, attr))
