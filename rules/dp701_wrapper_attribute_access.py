"""
## What it does
In training scripts, flags attribute access on a name that holds an `nn.DataParallel`
wrapper when the attribute is the model's own (`model.generate(...)`,
`model.encoder`, `model.num_classes`). The wrapper is followed across functions: returned
by a builder (in this file or another scanned one, imported by name or called through its
module: `utils.initialize_model(model, device)`), passed as an argument
(`train(model)`), kept in `self.model` (also by a base class of this file, for the methods of
a subclass that inherits the wrapping method, and by the `__init__` of a base class of another
scanned file, for reads in the subclass's `__init__` after `super().__init__(...)`), or narrowed
by `isinstance(model, nn.DataParallel)`.
A use in the branch opposite to the one that wrapped (`if n_gpu > 1: model = DP(model)`
... `else: model.classifier`) is not the wrapper, also where the wrap sits under a second test
and a `.cuda()` rebinds the name after it; a read under `if hasattr(model,
"set_scale"):` cannot raise, nor one under `if hasattr(model, "fc2"):` (a name the wrapper
lacks, so the test fails for it and the body never runs on it). A builder whose every wrapping return runs under a branch on its own parameter (`def
create_model(opt, data_parallel=False): if data_parallel: model = DataParallel(model)`, or an
early `if not parallel: return model`) gives the bare model to a call whose constants, or the
defaults it leaves, turn that branch off (`create_model(opt)`). A function that returns `<wrapper>.module` on its wrapped path
(`return self.model.module if n_gpu > 1 else self.model`) gives the bare model. An attribute the
script sets on the wrapper itself (`model.optimize = False` after wrapping) is the wrapper's: it
is read back without error, also by a function the wrapper is passed to. Where the wrap, the
store and the read are in one function (or in module code), statement order decides: a read
before the first store on the wrapper (`assert model.forward_mode == "cnn"` above a later
`model.forward_mode = "gru"`), on the right of its own store (`model.centers = model.centers -
delta`), or after a store made on the model before it was wrapped, still raises. So is an attribute the
wrapper's class defines, when it is a DataParallel subclass (`DataParallelMT(model).build_optimizer(...)`:
its methods, class attributes and `self.<name>` stores, or any name if it defines `__getattr__`; a
class of another scanned file, or a base there, is settled by the project index). A read of `self.model`
in `__init__` sees the bare model when another method wraps it (`def multi_gpu(self): self.model
= nn.DataParallel(self.model)`) and `__init__` does not call that method first; so does a read in
another method of the class (`summary()` reading `self.net`, which `parallelize()` wraps) where every
scanned call of that method is made on an instance just built, before anything else is done with it
(`model = eval(arch)(config)` then `model.summary()`, and a trainer calls `parallelize()` later).

A read in a method of the class that keeps the wrapper (`self.vq = nn.DataParallel(...)` in
`__init__` or in a `to_parallel()`), where neither that method nor any method of the class that calls it
on self is called by any scanned file, while other scanned files drive the project's objects (a
training script or trainer calls their methods), is advice: the scripts scanned never run it
(probtalk's inference-only `infer_on_batch`). A file checked without its callers keeps the error. A
read of a parameter under a test of another parameter (`if model_parallel:`) is not the wrapper where
every call that hands it one fills that parameter from the test the wrapper was built on the other
arm of (`else: model = DataParallel(model)` under `if args.model_parallel:`, then
`save(model, model_parallel=args.model_parallel)`), followed through callers that hand on their own
parameters.

A read behind a command-line switch off by default (`if args.reset_decoder:` on an
`add_argument("--reset_decoder", action="store_true")`, or `if encoder_only:` on a parameter that
defaults to False and that every call of the file, `f(...)` or `self.f(...)`, leaves out or fills
from such a switch) is latent, a warning, except behind a switch the wrap itself runs under (`if
args.multi_gpu:`). So is every read of a wrapper kept in `self.<x>` that is None unless such a
switch is on (`if not self.args.use_transcoder: self.transcoder = None; return` before the build
and the wrap): the component exists only with the option. A switch a function of the file turns on
(`self.args.train_denoiser = True`) before it calls the reading method does not count. A builder of
another file that wraps only under `not opt.fp16` gives a read under `if opt.fp16:` (with `opt`
handed to it) the bare model, and a wrapper handed in only by calls that cannot bind (a keyword the
function does not take) is never read.

Across files, the wrapper is also followed into a module-level function or a class's `__init__` that
a script hands it to (`Procedure.Test(dataset, model)`, `utils.BPRLoss(model, config)` after `model =
nn.DataParallel(model)`: the parameter's reads, where the function uses it as a module, and
`self.<attr>.<name>` in the class's other methods where `__init__` keeps it there), also where other
calls hand it the bare model (the call that hands the wrapper raises); and through a method of
another file's class that wraps an attribute of its instance (`trainer.prepare_model(...)`, which stores
`nn.DataParallel(self.tagger)`, then `trainer.tagger.combine(...)` in the same function).

Also flags a store on the wrapper of a mode the wrapped model's class compares with a string in
its own `forward` (`model.forward_mode = "gru"`, `model.mode = "encoder"`, where forward has `if
self.forward_mode == "cnn":`): the class is traced from the wrapper's construction (a class of
another scanned file is settled by the project index, `forward_flag:`), and a store on a parameter
is checked for every call that passes it a wrapper. It raises nothing and changes nothing the
model sees. A flag forward takes for its truth (`if self.use_aux:`) is not known to the index,
so its store is not reported.

## Why is this bad?
The wrapper is a different object: it has `module`, `forward`, `device_ids` and the
`nn.Module` API, nothing else. `model.generate` raises `AttributeError: 'DataParallel'
object has no attribute 'generate'`. A store goes the other way silently: `model.forward_mode =
"gru"` gives the wrapper an attribute of its own, while each replica is a copy of `model.module`,
whose forward still tests its old `forward_mode` (a two-phase schedule trains the first phase's
head throughout). The usual fix, `model.module.generate(...)`,
is correct (it runs on `device_ids[0]`, as a method of the original module; only
`forward` is parallelised), and is never reported.

## How to fix
Reach the model through `model.module` for attributes (`model.module.forward_mode = "gru"`) and
non-forward methods, and do the parallel work in `forward` (dispatch on an argument if needed).
"""

from __future__ import annotations

import ast
import functools

from dpcheck.analysis.dataflow import OPTION_PATH_NOTE, argument, binding_error, option_constructions
from dpcheck.analysis.model_class import FORWARD_FLAG_CONDITION, file_models, forward_flags
from dpcheck.analysis.options import behind_switch_off_by_default, built_only_behind_switch
from dpcheck.analysis.scripts import (
    BUILDER_CONDITION,
    CALLED_LATE_CONDITION,
    FALLBACK_GETATTR,
    HANDED_WRAPPER_CONDITION,
    INIT_WRAPPED_CONDITION,
    LACKS_ATTRIBUTE_CONDITION,
    LIBRARY_ROOTS,
    METHOD_WRAPS_CONDITION,
    REJECTS_CALL_CONDITION,
    SELF_RETURNING,
    UNCALLED_CONDITION,
    mentions_dataparallel,
    mentions_training_token,
    own_attributes,
    script_facts,
    with_attribute_truths,
)
from dpcheck.analysis.torch_api import FUNCTION_DEFS, LOOP_STATEMENTS
from dpcheck.analysis.wrapping import classes_of
from dpcheck.constants import DATAPARALLEL_CLASSES
from dpcheck.findings import Applicability, Severity
from dpcheck.rule import TRAINING_SCRIPT, Rule

# The public API of nn.DataParallel and nn.Module: fine to reach through the wrapper.
MODULE_API = frozenset({
    "module", "forward", "device_ids", "output_device", "dim", "src_device_obj", "training",
    "parameters", "named_parameters", "buffers", "named_buffers", "children", "named_children",
    "modules", "named_modules", "state_dict", "load_state_dict", "to", "cuda", "cpu", "type", "float",
    "double", "half", "bfloat16", "train", "eval", "zero_grad", "requires_grad_", "apply", "share_memory",
    "register_buffer", "register_parameter", "add_module", "register_module", "get_submodule",
    "get_parameter", "get_buffer", "register_forward_hook", "register_forward_pre_hook",
    "register_full_backward_hook", "register_full_backward_pre_hook", "register_backward_hook",
    "register_state_dict_pre_hook", "register_load_state_dict_post_hook", "extra_repr", "replicate",
    "scatter", "parallel_apply", "gather", "compile", "to_empty", "ipu", "xpu", "mtia", "set_extra_state",
    "get_extra_state", "__class__", "__dict__", "_modules", "_parameters", "_buffers", "dump_patches",
    "call_super_init", "T_destination", "__call__",
})


class WrapperAttributeAccess(Rule):
    code = "DP701"
    name = "wrapper-attribute-access"
    severity = Severity.ERROR
    not_confirmable = TRAINING_SCRIPT
    summary = "Custom attributes are not on the DataParallel wrapper; model.module.method() runs on one GPU"
    fix_hint = "Use model.module.<attr> for attributes; keep parallel work in forward"
    bad_example = """
        model = nn.DataParallel(Net().cuda())
        tokens = model.generate(prompt)
    """
    good_example = """
        model = nn.DataParallel(Net().cuda())
        logits = model(batch)
        classes = model.module.num_classes
        tokens = model.module.generate(prompt)
        model.eval()
    """

    def check_file(self, ctx):
        yield from self._reads_of_inherited_wrappers(ctx)
        yield from self._reads_of_handed_wrappers(ctx)
        yield from self._reads_after_wrapping_calls(ctx)
        if not mentions_dataparallel(ctx):
            return
        facts = script_facts(ctx)
        # `model.class_weights = w` on the wrapper makes `model.class_weights` readable from it, under
        # that name and under the names the wrapper is passed as (`train(model)` reading `net.optimize`:
        # the parameter's wrapper comes from the call site, so the attribute name alone is matched).
        stores = [n for n in ctx.nodes(ast.Attribute) if isinstance(n.ctx, ast.Store)]
        stored: dict[tuple[str | None, str], list[ast.Attribute]] = {}
        for n in stores:
            stored.setdefault((_text(n.value), n.attr), []).append(n)
        stored_on_wrapper = {n.attr for n in stores if facts.wrap_for(n.value) is not None}
        yield from self._stores_missing_the_module(stores, ctx, facts)
        for node in ctx.nodes(ast.Attribute):
            if not isinstance(node, ast.Attribute) or node.attr in MODULE_API or node.attr.startswith("__"):
                continue
            if not isinstance(node.ctx, ast.Load):
                continue  # setting an attribute on the wrapper does not raise
            base = node.value
            same_attribute = stored.get((_text(base), node.attr), ())
            wrap = facts.wrap_for(base) if same_attribute else None
            if same_attribute and (not _wrapped_in_same_code(node, wrap, ctx)
                                   or _stored_before(node, same_attribute, ctx, facts)):
                continue  # set on the wrapper before this read, or in code whose order is not known
            if _hasattr_guarded(node, facts):
                continue
            if not same_attribute:
                wrap = facts.wrap_for(base)
            if wrap is not None and wrap.parameter and node.attr in stored_on_wrapper:
                continue
            lacks = _wrapper_lacks(wrap.source, node.attr, ctx, facts) if wrap is not None else ()
            if lacks is None or wrap is not None and wrap.parameter and _sites_define(wrap, node.attr, ctx, facts):
                continue  # the wrapper's own class defines it
            if wrap is not None and wrap.parameter and _callers_exclude(node, wrap, facts):
                continue  # `if model_parallel:` where every caller wraps only when it passes False
            if wrap is not None and wrap.parameter and wrap.sites and isinstance(wrap.scope, FUNCTION_DEFS) and all(
                    binding_error(call, wrap.scope, skip) is not None for call, skip in wrap.sites):
                continue  # every call that hands the wrapper in raises TypeError first (Skip-BART)
            if wrap is not None and _told_apart_by_hasattr(node, facts, functools.partial(
                    _surely_lacked, source=wrap.source, ctx=ctx, facts=facts, stored_on_wrapper=stored_on_wrapper)):
                continue  # `if hasattr(net, "fc2"):` holds only for the bare model: the wrapper has no fc2
            if wrap is not None and _misspells_module(node.attr):
                # `model.moduel`: the hazard is the typo, and `model.module.moduel` would keep it.
                fix = self.offer_fix("Spell it `module`", Applicability.UNSAFE, rename="module")
                yield self.violation(node, f"`{wrap.name}` holds an nn.DataParallel wrapper, which has no attribute "
                                     f"`{node.attr}`: AttributeError (did you mean `{wrap.name}.module`?)",
                                     requires=wrap.requires + lacks, fix=fix)
            elif wrap is not None:
                # (`called_late:` rides on this finding alone: the rejected-call one below reads `lacks`)
                requires = with_attribute_truths(wrap.requires + lacks, wrap.call, _argument_truths(node, wrap, ctx, facts)) \
                    + _late_read_condition(node, wrap, ctx)
                note = f" ({wrap.source.note})" if wrap.source.note else ""
                called = isinstance(facts.parent(node), ast.Call) and facts.parent(node).func is node
                fix = self.offer_fix(
                    f"Use `{wrap.name}.module.{node.attr}`" + (" (a call then runs on one GPU, outside "
                                                               "DataParallel)" if called else ""),
                    Applicability.UNSAFE if called else Applicability.SAFE)
                message = f"`{wrap.name}` holds an nn.DataParallel wrapper{note}, which has no attribute " \
                          f"`{node.attr}`: AttributeError (use `{wrap.name}.module.{node.attr}`)"
                # In a module's method, behind a constructor or forward option off by default
                # (multimodal-meta-learn's `if new_words:` in `__init__`): latent, as for state rules.
                settled, switch = _option_path(ctx, node), None
                if settled is None and (switch := behind_switch_off_by_default(
                        node, ctx, _switches_around(wrap, ctx))) is not None:
                    settled = dict(switch.latent)  # a command-line switch, off unless the user turns it on
                if settled is None and (switch := _component_behind_switch(node, wrap, ctx)) is not None:
                    settled = dict(switch.latent)  # the wrapped component exists only with a switch on
                # A method of the class that holds the wrapper runs only where something calls it.
                advice = _uncalled_condition(node, wrap, ctx)
                if settled is not None:
                    latent_advice = advice + settled.pop("advice_if", ())
                    yield self.violation(node, message + OPTION_PATH_NOTE, fix=fix, severity=Severity.WARNING,
                                         advice_if=latent_advice,
                                         **{**settled, "requires": requires + settled.get("requires", ())})
                if settled is None or switch is not None and switch.default_path:
                    yield self.violation(node, message, fix=fix, advice_if=advice, requires=requires + (
                        (switch.default_path,) if switch is not None else ()))
                call = facts.parent(node)
                if called and lacks and not any(isinstance(a, ast.Starred) for a in call.args):
                    # Where the wrapper's class of another file does define it (a forwarding method),
                    # the same call may still not fit that method's arguments: the other finding of
                    # this position, under the opposite condition.
                    rejects = (frozenset(f"{REJECTS_CALL_CONDITION}{node.attr}:{len(call.args)}:"
                                         f"{c.partition(':')[2].partition(':')[2]}" for s in lacks for c in s),)
                    yield self.violation(node, f"`{wrap.name}` holds an nn.DataParallel wrapper{note} whose own "
                                         f"`{node.attr}` takes fewer positional arguments than the {len(call.args)} "
                                         f"this call passes: TypeError (use `{wrap.name}.module.{node.attr}`)",
                                         requires=wrap.requires + rejects, fix=fix)

    def _reads_of_inherited_wrappers(self, ctx):
        """`self.model.encoder` in the `__init__` of a class whose base is a class of another file (a
        training script's `Trainer(BaseTrainer)`), after `super().__init__(...)`, where that base's
        `__init__` may store a DataParallel wrapper in `self.model` (``init_wrapped:``, settled by the
        project index): the constructor surely runs. Reads in the class's other methods are not
        followed (whether anything calls them is not known here). Not where the class, or a base of
        it in this file, stores `self.model` itself (the stores of this file are followed by
        ``script_facts``)."""
        if not mentions_training_token(ctx):
            return  # a trainer class: model libraries subclass other files' classes everywhere
        for info in ctx.classes.values():
            init = info.methods.get("__init__")
            after = _base_init_line(init) if init is not None else None
            if after is None:
                continue
            chain, outside = _in_file_chain(info, ctx)
            if not outside:
                continue
            stored = {node.attr for c in chain for method in c.methods.values() for node in ast.walk(method)
                      if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store)
                      and _is_self(node.value, method)}
            for node in ast.walk(init):
                if not (isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load) and node.lineno > after
                        and isinstance(node.value, ast.Attribute) and _is_self(node.value.value, init)):
                    continue
                attr = node.value.attr
                if attr in stored or node.attr in MODULE_API or node.attr.startswith("__"):
                    continue
                facts = script_facts(ctx)
                if facts._isinstance_guard(node.value, f"self.{attr}") is False or _hasattr_guarded(node, facts):
                    continue  # the bare model's arm of `isinstance(self.model, DataParallel)`
                yield self.violation(
                    node, f"`self.{attr}` holds the nn.DataParallel wrapper a base class's `__init__` stores "
                    f"in it, which has no attribute `{node.attr}`: AttributeError (use "
                    f"`self.{attr}.module.{node.attr}`)",
                    requires=(frozenset(f"{INIT_WRAPPED_CONDITION}{attr}@{base}" for base in outside),))

    def _reads_of_handed_wrappers(self, ctx):
        """`recmodel.get_time()` in a module-level function or a class's `__init__` whose parameter
        another scanned file may hand a DataParallel wrapper (LT-OCF's main.py wraps `Recmodel`, then
        calls `utils.BPRLossT(Recmodel, config)` and `Procedure.Test(dataset, Recmodel, ...)`):
        ``handed_wrapper:`` (scripts.handed_wrappers), settled by the project index. Only a parameter
        the function uses as a module (`.parameters()`, `.eval()`, `.state_dict()`...) and never reaches
        through `.module`; a read after the parameter is rebound to anything but itself
        (`model = model.eval()` keeps it, `model = model.module` does not) or under `hasattr` /
        `isinstance` tests that rule the wrapper out is not reported. So is `self.<attr>.<name>` in the
        class's other methods where `__init__` keeps the parameter in `self.<attr>` and nothing else of
        the class stores there. A parameter that other calls hand the bare model is reported all the
        same: the call that hands the wrapper raises."""
        text = ctx.source.text
        if not any(f".{name}(" in text for name in _MODULE_ONLY_API):
            return
        facts = script_facts(ctx)
        wrapping_here = mentions_dataparallel(ctx)
        for fn, owner, skip in _handed_candidates(ctx):
            callee = f"{ctx.module}.{owner.name if owner is not None else fn.name}"
            positional = [a.arg for a in fn.args.posonlyargs + fn.args.args][skip:]
            params = positional + [a.arg for a in fn.args.kwonlyargs]
            reads = [n for n in ctx.tree_index.nodes_within(fn, ast.Attribute)
                     if isinstance(n.value, ast.Name) and n.value.id in params]
            used = {n.value.id for n in reads if n.attr in _MODULE_ONLY_API}
            unwraps = {n.value.id for n in reads if n.attr == "module"}
            for param in sorted(used - unwraps):
                positions = [param] + ([str(positional.index(param))] if param in positional else [])
                shown = owner.name if owner is not None else fn.name
                rebinds = _rebindings(fn, param)
                for node in reads:
                    if node.value.id != param or not self._handed_read(node, facts, wrapping_here) \
                            or any(line < node.lineno for line in rebinds):
                        continue
                    yield self._handed_violation(node, param, shown, callee, positions)
                if owner is None:
                    continue
                for attr in _kept_in_self(owner, fn, param):
                    for method in owner.body:
                        if not isinstance(method, FUNCTION_DEFS) or method is fn:
                            continue
                        for node in ctx.tree_index.nodes_within(method, ast.Attribute):
                            inner = node.value
                            if isinstance(inner, ast.Attribute) and inner.attr == attr \
                                    and _is_self(inner.value, method) and self._handed_read(node, facts, wrapping_here):
                                yield self._handed_violation(node, f"self.{attr}", shown, callee, positions,
                                                             _uncalled_advice(method, owner, ctx))

    def _reads_after_wrapping_calls(self, ctx):
        """`trainer.tagger.combine(...)` after `trainer.prepare_model(...)` in the same function, where
        a scanned class's `prepare_model` stores a DataParallel wrapper in `self.tagger` (CoLaDa's
        TSTrainer.get_word_repr and NERTrainer): ``method_wraps:`` (scripts.wrapping_methods), settled
        by the project index, since the class of `trainer` is not known here. Not where `trainer` or
        `trainer.tagger` is bound again between the call and the read, nor under tests that rule
        the wrapper out."""
        facts = None
        calls: dict[tuple[int, str], list[ast.Call]] = {}  # (function, receiver) -> its method calls
        aliases = ctx.imports.aliases
        for call in ctx.nodes(ast.Call):
            func = call.func
            # (Not `self`: this file's wrapping methods are followed by ``script_facts``; not a module.)
            if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id != "self" \
                    and func.value.id not in aliases and func.attr not in MODULE_API \
                    and func.attr not in SELF_RETURNING and isinstance(ctx.parent(call), ast.Expr):
                scope = ctx.enclosing(call, _FUNCTIONS)
                if scope is not None:
                    calls.setdefault((id(scope), func.value.id), []).append(call)
        if not calls:
            return
        receivers = {name for _, name in calls}
        for node in ctx.nodes(ast.Attribute):
            inner = node.value
            if not (isinstance(inner, ast.Attribute) and isinstance(inner.value, ast.Name)
                    and inner.value.id in receivers):
                continue
            scope = ctx.enclosing(node, _FUNCTIONS)
            before = [c for c in calls.get((id(scope), inner.value.id), ()) if c.lineno < node.lineno] \
                if scope is not None else ()
            if not before:
                continue
            facts = facts or script_facts(ctx)
            wrapping_here = mentions_dataparallel(ctx)
            if not self._handed_read(node, facts, wrapping_here):
                continue
            rebound = _rebound_between(scope, inner.value.id, inner.attr, before[0].lineno, node.lineno)
            name = f"{inner.value.id}.{inner.attr}"
            # One finding for each method called before: settling keeps one per position, of those whose
            # method wraps.
            for method in dict.fromkeys(c.func.attr for c in before if c.lineno > rebound):
                fix = self.offer_fix(f"Use `{name}.module.{node.attr}`", Applicability.UNSAFE)
                yield self.violation(node, f"`{name}` holds the nn.DataParallel wrapper `{inner.value.id}.{method}()` "
                                     f"stores there, which has no attribute `{node.attr}`: AttributeError (use "
                                     f"`{name}.module.{node.attr}`)",
                                     requires=(frozenset({f"{METHOD_WRAPS_CONDITION}{method}@{inner.attr}"}),), fix=fix)

    @staticmethod
    def _handed_read(node, facts, wrapping_here) -> bool:
        """Is ``node`` a read of an attribute the wrapper lacks, not ruled out by a test around it,
        and not already followed by this file's own wraps (``script_facts``)?"""
        if not isinstance(node.ctx, ast.Load) or node.attr in MODULE_API or node.attr.startswith("__"):
            return False
        text = _text(node.value)
        if text is None or facts._isinstance_guard(node.value, text) is False or _hasattr_guarded(node, facts):
            return False
        return not (wrapping_here and facts.wrap_for(node.value) is not None)

    def _handed_violation(self, node, name, shown, callee, positions, advice=()):
        requires = (frozenset(f"{HANDED_WRAPPER_CONDITION}{callee}@{p}:{node.attr}" for p in positions),)
        fix = self.offer_fix(f"Use `{name}.module.{node.attr}` (only right where every caller hands a wrapper)",
                             Applicability.UNSAFE)
        return self.violation(node, f"`{name}` holds the nn.DataParallel wrapper another scanned file hands "
                              f"`{shown}`, which has no attribute `{node.attr}`: AttributeError (use "
                              f"`{name}.module.{node.attr}`)", requires=requires, fix=fix, advice_if=advice)

    def _stores_missing_the_module(self, stores, ctx, facts):
        """`model.forward_mode = "gru"` on a wrapper whose wrapped class's forward tests
        `self.forward_mode`: the store makes an attribute of the wrapper, and the replicas, copies of
        the module, still test the module's own (ASVspoof_PA's GRU phase trained the CNN head again)."""
        for node in stores:
            if node.attr in MODULE_API or node.attr.startswith("__"):
                continue
            wrap = facts.wrap_for(node.value)
            if wrap is None or not isinstance(wrap.call, ast.Call):
                continue
            lacks = _wrapper_lacks(wrap.source, node.attr, ctx, facts)
            if lacks is None:
                continue  # the wrapper's own class defines it (a DataParallel subclass that forwards it)
            classes = _wrapped_classes(wrap, ctx, facts)
            if not classes:
                continue
            local = [info for c in classes if (info := ctx.classes.get(ctx.local_name(c) or "")) is not None]
            if len(local) == len(classes):  # every candidate class is this file's: settled here
                tested = [info.name for info in local if node.attr in ctx.fact(forward_flags).get(info.qualname, ())]
                if len(tested) < len(classes):
                    continue
                requires: tuple[frozenset[str], ...] = ()
            else:
                requires = (frozenset(f"{FORWARD_FLAG_CONDITION}{c}:{node.attr}" for c in classes),)
            wrapped = classes[0].rpartition(".")[2] if len(classes) == 1 else "the wrapped model"
            fix = self.offer_fix(f"Set `{wrap.name}.module.{node.attr}`", Applicability.UNSAFE)
            yield self.violation(node, f"`{wrap.name}` holds an nn.DataParallel wrapper: this sets the "
                                 f"wrapper's own `{node.attr}`, while {wrapped}'s forward tests its own "
                                 f"`self.{node.attr}`, which keeps its old value on every replica (set "
                                 f"`{wrap.name}.module.{node.attr}`)", requires=wrap.requires + lacks + requires,
                                 fix=fix)

    def fix(self, finding, editor):
        import libcst as cst

        node = editor.node  # `<wrapper>.<attr>`
        if isinstance(node, cst.Attribute) and finding.fix.get("rename"):
            editor.replace(node, node.with_changes(attr=cst.Name(finding.fix.get("rename"))))
        elif isinstance(node, cst.Attribute):
            inner = cst.Attribute(value=node.value, attr=cst.Name("module"))
            editor.replace(node, node.with_changes(value=inner))


# nn.Module methods a tensor, a dataset or a config does not have: a parameter read so holds a model.
_MODULE_ONLY_API = frozenset({"parameters", "named_parameters", "state_dict", "load_state_dict", "eval", "train",
                              "zero_grad", "modules", "named_modules", "children", "named_children"})


def _handed_candidates(ctx):
    """(function, its class or None, leading parameters a call binds itself) for the module-level
    functions and top-level classes' `__init__` of the file: what another file calls by name."""
    for stmt in ctx.tree.body:
        if isinstance(stmt, FUNCTION_DEFS):
            yield stmt, None, 0
        elif isinstance(stmt, ast.ClassDef):
            init = next((f for f in stmt.body if isinstance(f, ast.FunctionDef) and f.name == "__init__"), None)
            if init is not None:
                yield init, stmt, 1


def _rebindings(fn, name: str) -> list[int]:
    """Lines where ``fn`` binds ``name`` to anything but itself through a method that returns the
    module (`model = model.eval()`, `model = model.to(device)` keep the wrapper)."""
    lines = []
    # (`Recmodel: model.LTGCCF`, an annotation without a value, binds nothing)
    annotated = {id(node.target) for node in ast.walk(fn) if isinstance(node, ast.AnnAssign) and node.value is None}
    for node in ast.walk(fn):
        if isinstance(node, ast.Name) and node.id == name and not isinstance(node.ctx, ast.Load) \
                and id(node) not in annotated:
            lines.append(node.lineno)
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                and node.targets[0].id == name:
            value = node.value
            while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) \
                    and value.func.attr in SELF_RETURNING:
                value = value.func.value
            if isinstance(value, ast.Name) and value.id == name:
                lines.remove(node.targets[0].lineno)
    return lines


def _late_read_condition(read: ast.Attribute, wrap, ctx) -> tuple[frozenset[str], ...]:
    """``called_late:<method>`` for a read of `self.<x>` in a method of the class whose other methods,
    never `__init__` nor a method `__init__` calls, wrap `self.<x>` (FOTS's `summary()` and
    `parallelize()`): the read sees the wrapper only where the method runs after the wrapping one, which
    the callers decide (the project index: not where every scanned call of it is on an instance just
    built). Empty where this file calls the method on `self` (its order is this file's) or where it is
    part of nn.Module's API."""
    if not wrap.name.startswith("self.") or not isinstance(wrap.scope, ast.ClassDef):
        return ()
    method = ctx.enclosing(read, _FUNCTIONS)
    cls = ctx.enclosing(method, ast.ClassDef) if method is not None else None
    if method is None or cls is None or method.name == "__init__" or method.name in MODULE_API \
            or method.name.startswith("__"):
        return ()
    wrapping = {ctx.enclosing(root, _FUNCTIONS) for root in (wrap.roots or (wrap.origin,)) if root is not None}
    if not wrapping or any(fn is None or fn.name == "__init__" or fn is method for fn in wrapping):
        return ()
    names = {fn.name for fn in wrapping} | {method.name}
    for node in ctx.nodes(ast.Attribute):
        if node.attr in names and isinstance(node.value, ast.Name) and node.value.id == "self":
            return ()  # called by the class itself (from `__init__`, or in an order this file decides)
    return (frozenset({f"{CALLED_LATE_CONDITION}{method.name}"}),)


def _sites_define(wrap, attr: str, ctx, facts) -> bool:
    """Does every call handing the parameter ``wrap`` a wrapper build one whose own class defines ``attr`` or a
    `__getattr__` (CompressAI's `CustomDataParallel(net)` handed to `train_one_epoch(net, ...)`)?"""
    fn = wrap.scope
    if not isinstance(fn, FUNCTION_DEFS) or not wrap.sites:
        return False
    params = [a.arg for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs]
    for call, skip in wrap.sites:
        held = _passed_arguments(call, params, skip).get(wrap.name)
        source = facts.wrapper_value(held, call) if held is not None else None
        if source is None or source is wrap.source or _wrapper_lacks(source, attr, ctx, facts) is not None:
            return False
    return True


def _callers_exclude(read: ast.Attribute, wrap, facts) -> bool:
    """Is ``read``, of a parameter that the file's calls hand a wrapper, under a test of another parameter
    (`if model_parallel:`) that each such call fills from the test its wrapper was built on the other arm of
    (genienlp: `if args.model_parallel: ... else: model = DataParallel(model)`, then `train(args, model)`,
    whose `maybe_save(model, ..., model_parallel=args.model_parallel)` reads)? Then no wrapper reaches it."""
    return _sites_exclude(_truths_around(read, wrap.scope, facts), wrap, facts, 3)


def _sites_exclude(needed: dict[str, bool], wrap, facts, depth: int) -> bool:
    """Does every call handing the parameter ``wrap`` its wrapper build that wrapper only where one of the
    tests ``needed`` (texts over the function's parameters, and the truth the read needs) is the other way,
    followed through callers that hand on a parameter of their own (``depth`` of them)?"""
    fn = wrap.scope
    if depth == 0 or not needed or not isinstance(fn, FUNCTION_DEFS) or not wrap.sites:
        return False
    params = [a.arg for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs]
    for call, skip in wrap.sites:
        passed = _passed_arguments(call, params, skip)
        there = {}  # the same tests, as the caller spells them (`model_parallel` -> `args.model_parallel`)
        for text, truth in needed.items():
            head, dot, rest = text.partition(".")
            if head in passed and head in params:
                there[ast.unparse(passed[head]) + dot + rest] = truth
        held = passed.get(wrap.name)
        site_wrap = facts.wrap_for(held) if isinstance(held, (ast.Name, ast.Attribute)) else None
        if not there or site_wrap is None:
            return False
        if site_wrap.parameter:
            if not _sites_exclude(there, site_wrap, facts, depth - 1):
                return False
            continue
        for origin in site_wrap.roots or (site_wrap.origin,):
            built_under = _truths_around(origin, None, facts) if origin is not None else {}
            if not any(built_under.get(text) == (not truth) for text, truth in there.items()):
                return False
    return True


def _passed_arguments(call: ast.Call, params: list[str], skip: int) -> dict[str, ast.AST]:
    """What ``call`` passes each parameter by name (`self`, bound by the call itself, is ``skip``)."""
    passed = {k.arg: k.value for k in call.keywords if k.arg is not None}
    for i, value in enumerate(call.args):
        if isinstance(value, ast.Starred):
            break
        if 0 <= i + skip < len(params):
            passed.setdefault(params[i + skip], value)
    return passed


def _truths_around(node: ast.AST, stop, facts) -> dict[str, bool]:
    """The tests (their text, `not` taken off) that hold, and their truth, where ``node`` runs: each `if`
    around it up to ``stop`` (or the scope it is in), true in its body and false in its `else` arm."""
    found: dict[str, bool] = {}
    child, cur = node, facts.parent(node)
    while cur is not None and cur is not stop and not isinstance(cur, (ast.Module, ast.ClassDef) + _FUNCTIONS):
        if isinstance(cur, ast.If) and child is not cur.test:
            test, truth = cur.test, child in cur.body
            while isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
                test, truth = test.operand, not truth
            found.setdefault(ast.unparse(test), truth)
        child, cur = cur, facts.parent(cur)
    return found


def _argument_truths(read: ast.Attribute, wrap, ctx, facts) -> dict[str, bool]:
    """The `<name>.<attribute>` tests that hold or fail where ``read`` runs (the `if`s around it) on a
    name the builder call that made the wrapper passes (`model = create_model(opt)`, then `if
    opt.fp16:` around the read), in the same code, with nothing binding the name or that attribute
    in between: the index checks them against the builder's own wrap test (pix2pixHD's `if
    opt.isTrain and len(opt.gpu_ids) and not opt.fp16:`), see ``with_attribute_truths``."""
    call = wrap.call
    if not isinstance(call, ast.Call) or not any(BUILDER_CONDITION in c for s in wrap.requires for c in s):
        return {}
    scope = ctx.enclosing(read, _FUNCTIONS)
    if ctx.enclosing(call, _FUNCTIONS) is not scope or read.lineno <= call.lineno:
        return {}
    passed = {a.id for a in call.args if isinstance(a, ast.Name)}
    passed |= {k.value.id for k in call.keywords if isinstance(k.value, ast.Name)}
    start = (call.end_lineno or call.lineno) + 1
    truths = {}
    for text, truth in _truths_around(read, None, facts).items():
        name, dot, attr = text.partition(".")
        if dot and name in passed and attr.isidentifier() \
                and _rebound_between(scope or ctx.tree, name, attr, start, read.lineno) < start:
            truths[text] = truth
    return truths


def _uncalled_condition(read: ast.Attribute, wrap, ctx) -> tuple[str, ...]:
    """``uncalled:<module>:<methods>`` (scripts.UNCALLED_CONDITION) for a read of `self.<x>...` in a
    method of the class that stores the wrapper in `self.<x>` (probtalk's `infer_on_batch`, which only an
    inference script calls): the methods through which alone it runs, ``_entry_methods``. Empty where a
    name does not show how the method is entered."""
    if not wrap.name.startswith("self.") or not isinstance(wrap.scope, ast.ClassDef):
        return ()
    method = ctx.enclosing(read, _FUNCTIONS)
    while method is not None and ctx.parent(method) is not wrap.scope:
        method = ctx.enclosing(method, _FUNCTIONS)
    return _uncalled_advice(method, wrap.scope, ctx) if method is not None else ()


def _uncalled_advice(method, cls: ast.ClassDef, ctx) -> tuple[str, ...]:
    """``uncalled:`` for a read in ``method`` of ``cls`` (see ``_entry_methods``), or nothing. Its bases of
    other files follow (`:<base>,...`): a method a library's base calls by name (a framework's hook) has
    no caller in the project, so each must be a scanned class."""
    info = ctx.classes.get(cls.name)
    if info is None or info.node is not cls:
        return ()
    chain, outside = _in_file_chain(info, ctx)
    entries = _entry_methods(method, [c.node for c in chain])
    if not entries:
        return ()
    return (f"{UNCALLED_CONDITION}{ctx.module}:{','.join(entries)}" + (f":{','.join(outside)}" if outside else ""),)


# Decorators that leave a method called by its name (`Net.build(...)`, `self.step(...)`).
_PLAIN_DECORATORS = frozenset({"staticmethod", "classmethod"})


def _entry_methods(method, chain: list[ast.ClassDef]) -> list[str] | None:
    """The methods of a class (``chain``: it, then its bases of this file) through which alone ``method``
    runs: it and, transitively, the methods that name it on self (`self.infer(...)`, `hook=self.infer`),
    those that no method of the class names. None where one of them runs without a caller naming it: a
    dunder (`__call__`, `__init__`), `forward`, nn.Module's API, a property or other decorated method,
    or a class that looks its methods up by a computed name (`getattr(self, name)`)."""
    methods: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
    for cls in chain:
        for f in cls.body:
            if isinstance(f, FUNCTION_DEFS):
                methods.setdefault(f.name, f)
    named_by: dict[str, set[str]] = {}
    for name, fn in methods.items():
        first = (fn.args.posonlyargs + fn.args.args)[:1]
        for node in ast.walk(fn):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr" \
                    and len(node.args) > 1 and isinstance(node.args[0], ast.Name) and first \
                    and node.args[0].id == first[0].arg and not isinstance(node.args[1], ast.Constant):
                return None
            if isinstance(node, ast.Attribute) and node.attr in methods and first \
                    and isinstance(node.value, ast.Name) and node.value.id == first[0].arg:
                named_by.setdefault(node.attr, set()).add(name)
    reached, work, roots = set(), [method.name], []
    while work:
        name = work.pop()
        if name in reached:
            continue
        reached.add(name)
        fn = methods.get(name)
        if fn is None or name.startswith("__") or name == "forward" or name in MODULE_API or any(
                not (isinstance(d, ast.Name) and d.id in _PLAIN_DECORATORS) for d in fn.decorator_list):
            return None
        callers = named_by.get(name, set()) - {name}
        if not callers:
            roots.append(name)
        work.extend(callers)
    return sorted(roots) or None


def _rebound_between(fn, name: str, attr: str, start: int, end: int) -> int:
    """The last line in (start, end) where ``fn`` binds `name` or `name.attr` (a call before it no longer
    decides what the read sees); ``start`` - 1 where none does."""
    last = start - 1
    for node in ast.walk(fn):
        stored = not isinstance(getattr(node, "ctx", None), (ast.Load, type(None)))
        if stored and start <= node.lineno < end and (
                isinstance(node, ast.Name) and node.id == name or isinstance(node, ast.Attribute)
                and node.attr == attr and isinstance(node.value, ast.Name) and node.value.id == name):
            last = max(last, node.lineno)
    return last


def _kept_in_self(cls, init, param: str) -> list[str]:
    """The attributes `__init__` stores ``param`` in (`self.model = recmodel`) that no other statement of
    the class stores into."""
    kept = []
    stores: dict[str, int] = {}
    for node in ast.walk(cls):
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and isinstance(node.value, ast.Name) \
                and node.value.id == "self":
            stores[node.attr] = stores.get(node.attr, 0) + 1
    for stmt in ast.walk(init):
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.value, ast.Name) \
                and stmt.value.id == param:
            target = stmt.targets[0]
            if isinstance(target, ast.Attribute) and _is_self(target.value, init) and stores.get(target.attr) == 1:
                kept.append(target.attr)
    return kept


def _in_file_chain(info, ctx) -> tuple[list, list[str]]:
    """The class and its bases of this file (first the class), and its other bases that may be a
    project's classes (not a library's: `torch.nn.Module`, `object`)."""
    chain, outside, work, seen = [], [], [info], set()
    while work:
        cls = work.pop(0)
        if cls.qualname in seen:
            continue
        seen.add(cls.qualname)
        chain.append(cls)
        for base in cls.bases:
            local = ctx.local_name(base)
            if local is not None and local in ctx.classes:
                work.append(ctx.classes[local])
            elif "." in base and not base.startswith(LIBRARY_ROOTS):
                outside.append(base)
    return chain, outside


def _is_self(node, method) -> bool:
    args = method.args.posonlyargs + method.args.args
    return isinstance(node, ast.Name) and bool(args) and node.id == args[0].arg


def _base_init_line(init) -> int | None:
    """The line of `super().__init__(...)` (or `Base.__init__(self, ...)`) in ``init``, None if none."""
    lines = [call.lineno for call in ast.walk(init) if isinstance(call, ast.Call)
             and isinstance(call.func, ast.Attribute) and call.func.attr == "__init__"
             and (isinstance(call.func.value, ast.Call) and isinstance(call.func.value.func, ast.Name)
                  and call.func.value.func.id == "super"
                  or call.args and _is_self(call.args[0], init))]
    return min(lines) if lines else None


def _wrapper_lacks(source, attr: str, ctx, facts) -> tuple[frozenset[str], ...] | None:
    """The conditions under which the wrapper ``source`` builds lacks ``attr`` (each its own singleton
    set), or None where its class defines it: a DataParallel subclass of this file, or a base of it in
    this file, that defines ``attr`` or a `__getattr__`. A subclass of another file, or a base there,
    or a builder of another file that returns the wrapper, leaves it to the project index
    (``lacks_attribute:``)."""
    classes = [c.partition(":")[2] for c in sorted(source.requires) if c.startswith("dp:")]
    # A wrapper returned by a builder of another file: the index knows what that builder wraps with.
    classes += [c for c in sorted(source.requires) if c.startswith(BUILDER_CONDITION)]
    call = source.call
    local = ctx.local_name(ctx.resolve(call.func)) if isinstance(call, ast.Call) else None
    work = [local] if local in facts.local_dataparallel_classes else []
    seen: set[str] = set()
    while work:
        name = work.pop()
        info = ctx.classes.get(name)
        if name in seen or info is None:
            continue
        seen.add(name)
        own = own_attributes(info)
        if attr in own or FALLBACK_GETATTR in own:
            return None
        for base in info.bases:
            if ctx.local_name(base) in ctx.classes:
                work.append(ctx.local_name(base))
            elif base not in DATAPARALLEL_CLASSES:
                classes.append(base)
    return tuple(frozenset({f"{LACKS_ATTRIBUTE_CONDITION}{attr}:{name}"}) for name in dict.fromkeys(classes))


def _wrapped_classes(wrap, ctx, facts) -> list[str]:
    """The classes (or imported callables) whose instance ``wrap`` wraps, each site's for a parameter
    (`def prototypes(model, ...)` called with `nn.DataParallel(ProtoNet())`); empty where one
    wrapper's module is not traced to a construction."""
    if not wrap.parameter:
        sources = [(wrap.source, wrap.origin or wrap.call)]
    else:
        fn = wrap.scope
        params = [a.arg for a in fn.args.posonlyargs + fn.args.args]
        sources = []
        for call, skip in wrap.sites:
            position = params.index(wrap.name) - skip if wrap.name in params else -1
            passed = [k.value for k in call.keywords if k.arg == wrap.name] or \
                ([call.args[position]] if 0 <= position < len(call.args) else [])
            source = facts.wrapper_value(passed[0], call) if passed else None
            if source is not None:
                sources.append((source, source.call))
    classes: list[str] = []
    for source, at in sources:
        call = source.call
        if not (isinstance(call, ast.Call) and facts.is_dp_call(call)):
            return []  # a builder's wrapper, or one handed on from another call
        found = [c for c in classes_of(argument(call, 0, "module"), at, ctx, imported_calls=True) if c]
        if not found:
            return []
        classes += found
    return list(dict.fromkeys(classes))


def _wrapped_in_same_code(read: ast.Attribute, wrap, ctx) -> bool:
    """Is ``wrap``, the wrapper ``read`` reads through, built in the function (or module code) that
    reads it, where statement order is the order things run (a `self.network` wrapped by
    `parallelize()` and read in `expand_dictionary()` depends on the order a script calls them)?"""
    if wrap is None or wrap.origin is None or wrap.parameter:
        return False
    return ctx.enclosing(wrap.origin, _FUNCTIONS) is ctx.enclosing(read, _FUNCTIONS)


_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


def _stored_before(read: ast.Attribute, stores, ctx, facts) -> bool:
    """Can one of ``stores`` (`model.x = ...` of the read's name and attribute) have run before
    ``read``? A store in another function or scope may (the order of calls is not known); one in
    the read's own scope must be made on the wrapper (not on the model before it was wrapped) and
    come before the read's statement, or share a loop with it where the read is conditional there
    (a later iteration may read what an earlier one stored). The read on the right of its own
    store (`model.centers = model.centers - delta`), and a read before the first store of
    straight-line code, run before any store."""
    if not stores:
        return False
    scope = facts.scope_of(read)
    guard = ctx.enclosing(read, ast.Try)
    if guard is not None and facts.scope_of(guard) is scope:
        return True  # `try: model.x` / `except AttributeError: model.x = ...`: the error is handled
    statement = ctx.enclosing(read, ast.stmt)
    for store in stores:
        if facts.scope_of(store) is not scope:
            return True
        if facts.wrap_for(store.value) is None:
            continue  # set on the bare model before it was wrapped: the wrapper still lacks it
        before = ctx.enclosing(store, ast.stmt)
        if before is None or statement is None:
            return True
        if before is not statement and (before.end_lineno, before.end_col_offset) <= (statement.lineno,
                                                                                    statement.col_offset):
            return True
        if _conditional_in_shared_loop(read, store, ctx):
            return True
    return False


# Where code inside a loop may be skipped on its first iteration (or its AttributeError caught).
_CONDITIONALS = (ast.If, ast.IfExp, ast.While, ast.Try, ast.BoolOp, ast.ListComp, ast.GeneratorExp,
                 ast.SetComp, ast.DictComp, ast.Match)


def _conditional_in_shared_loop(read, store, ctx) -> bool:
    """Is there a loop around both ``read`` and ``store`` inside which ``read`` is conditional?"""
    loop = ctx.enclosing(read, LOOP_STATEMENTS)
    while loop is not None:
        if ctx.tree_index.contains(loop, store):
            cur = ctx.enclosing(read, _CONDITIONALS + LOOP_STATEMENTS)
            while cur is not None and cur is not loop:
                if isinstance(cur, _CONDITIONALS):
                    return True
                cur = ctx.enclosing(cur, _CONDITIONALS + LOOP_STATEMENTS)
            return False
        loop = ctx.enclosing(loop, LOOP_STATEMENTS)
    return False


def _hasattr_guarded(node: ast.Attribute, facts) -> bool:
    """Is `x.attr` read only where `hasattr(x, "attr")` holds (the body of `if hasattr(...)`,
    alone or in an `and`, or after it in the same `and`)? Then it cannot raise."""
    text = _text(node.value)
    if text is None:
        return False
    checks = functools.partial(_checks_hasattr, text=text, attr=lambda name: name == node.attr)
    child, cur = node, facts.parent(node)
    while cur is not None and not isinstance(cur, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.Module)):
        if isinstance(cur, (ast.If, ast.IfExp, ast.While)) and child is not cur.test:
            in_body = child in cur.body if isinstance(cur.body, list) else child is cur.body
            if in_body and checks(cur.test):
                return True
        if isinstance(cur, ast.BoolOp) and isinstance(cur.op, ast.And) and child in cur.values \
                and any(checks(v) for v in cur.values[:cur.values.index(child)]):
            return True
        child, cur = cur, facts.parent(cur)
    return False


def _surely_lacked(name: str, source, ctx, facts, stored_on_wrapper) -> bool:
    """Does the wrapper ``source`` builds lack ``name`` on every condition: not nn.Module's or
    DataParallel's API, not set on the wrapper by the script, not defined by its class?"""
    return name not in MODULE_API and not name.startswith("__") and name not in stored_on_wrapper \
        and _wrapper_lacks(source, name, ctx, facts) == ()


def _told_apart_by_hasattr(node: ast.Attribute, facts, lacked) -> bool:
    """Is `x.attr` read in the body of `if hasattr(x, "<name>"):` for a name the wrapper lacks
    (``lacked``)? The test fails for the wrapper, so the read never runs on it: 3D-FoodCalorie's
    `if hasattr(net, 'fc2'): net.get_last_shared_layer() else: net.module.get_last_shared_layer()`,
    and crystalsizer3d's `if hasattr(self.predictor, 'img_mean'): ... self.predictor.img_std`, whose
    body is skipped under DataParallel (a fallback then runs instead: no AttributeError to report)."""
    text = _text(node.value)
    if text is None:
        return False
    child, cur = node, facts.parent(node)
    while cur is not None and not isinstance(cur, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.Module)):
        if isinstance(cur, (ast.If, ast.IfExp)) and child is not cur.test:
            in_body = child in cur.body if isinstance(cur.body, list) else child is cur.body
            if in_body and _checks_hasattr(cur.test, text, lacked):
                return True
        child, cur = cur, facts.parent(cur)
    return False


def _checks_hasattr(test, text: str, attr) -> bool:
    """Does ``test`` establish `hasattr(text, name)` for a name ``attr`` accepts (alone or as a
    conjunct of an `and`)?"""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return any(_checks_hasattr(v, text, attr) for v in test.values)
    return isinstance(test, ast.Call) and isinstance(test.func, ast.Name) and test.func.id == "hasattr" \
        and len(test.args) == 2 and _text(test.args[0]) == text \
        and isinstance(test.args[1], ast.Constant) and isinstance(test.args[1].value, str) and attr(test.args[1].value)


def _misspells_module(attr: str) -> bool:
    """`moduel`, `modlue`, `modul`, `modules`: one edit or one swap away from `module`."""
    import difflib

    return attr != "module" and difflib.SequenceMatcher(None, attr.lower(), "module").ratio() >= 0.8


def _text(node) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return f"{node.value.id}.{node.attr}"
    return None


def _switches_around(wrap, ctx) -> frozenset[str]:
    """The `args.<x>` switches the `if`s around the wrap test (`if args.multi_gpu: model = DP(model)`): a
    read behind the same switch runs whenever the model is wrapped."""
    found = set()
    for root in wrap.roots or (wrap.origin,):
        cur = ctx.parent(root) if root is not None else None
        while cur is not None and not isinstance(cur, ast.Module):
            if isinstance(cur, (ast.If, ast.IfExp, ast.While)):
                found.update(n.attr for n in ast.walk(cur.test) if isinstance(n, ast.Attribute))
                found.update(n.id for n in ast.walk(cur.test) if isinstance(n, ast.Name))
            cur = ctx.parent(cur)
    return frozenset(found)


def _option_path(ctx, node: ast.AST) -> dict | None:
    """``option_constructions`` for a read in a method of one of the file's module classes: the
    ``Violation`` keywords that make it lighter where it runs only behind a non-default option;
    None elsewhere (a script's code, a plain class)."""
    method = ctx.enclosing(node, FUNCTION_DEFS)
    owner = ctx.enclosing(method, ast.ClassDef) if method is not None else None
    if owner is None:
        return None
    for model in file_models(ctx):
        if model.info.node is owner:
            fn = next((f for f in model.all_methods if f.node is method), None)
            return option_constructions(model, fn, node) if fn is not None else None
    return None


def _component_behind_switch(read: ast.Attribute, wrap, ctx):
    """``built_only_behind_switch`` for a wrapper kept in `self.<x>` that is None wherever it is not
    the wrapper (every other store of `self.<x>` in the class is `None`): crystalsizer3d's
    `_init_transcoder`, `if not self.transcoder_args.use_transcoder: self.transcoder = None; return`
    before it builds and wraps the transcoder. Then every read of the wrapper runs only with that
    switch on. None where something else may be kept there (`self.model = Net()` and, under `if
    args.multi_gpu:`, its wrapper: the switch decides the wrap, not whether the model exists)."""
    if not wrap.name.startswith("self.") or wrap.parameter or wrap.origin is None:
        return None
    cls = ctx.enclosing(wrap.origin, ast.ClassDef)
    if cls is None or ctx.enclosing(read, ast.ClassDef) is not cls:
        return None
    made = set(wrap.roots) | {wrap.origin}
    attr = wrap.name.partition(".")[2]
    for store in ctx.nodes(ast.Assign):
        if store in made or not any(isinstance(t, ast.Attribute) and t.attr == attr and _is_self_name(t.value)
                                    for t in store.targets):
            continue
        if ctx.enclosing(store, ast.ClassDef) is cls and not (
                isinstance(store.value, ast.Constant) and store.value.value is None):
            return None
    return built_only_behind_switch(sorted(made, key=lambda n: (n.lineno, n.col_offset)), ctx, read)


def _is_self_name(node) -> bool:
    return isinstance(node, ast.Name) and node.id == "self"
