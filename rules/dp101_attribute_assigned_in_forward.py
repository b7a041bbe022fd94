"""
## What it does
Flags `self.x = ...`, `self.x += ...` and `setattr(self, "x", ...)` in code that runs
during `forward` (forward itself, the methods it calls, hooks), when `x` is not a
registered buffer, Parameter or submodule.

## Why is this bad?
`DataParallel` runs `forward` on *replicas*: shallow copies of the module made for
each call. An assignment on `self` lands in the replica's own `__dict__`, which is
thrown away when the call returns. Counters stay at their initial value, stashed
intermediates (`self.attn = ...`) are missing or stale after the call, lazily built
state is rebuilt on every step. Nothing fails: the numbers are silently wrong.

Only a value that a later call reads back is an error: an accumulation (`self.n += 1`, a
value combining the old one) or a value forward reads before writing it. Lighter cases:

- a value forward clears to None on another path (`else: self.state = None`, a decoding
  cache under `use_cache`) carries over only in that mode, and a write behind a non-default
  option matters only with it on, as does state the model reads back only behind one (a step
  counter bumped every call but read only under `if self.drop_rate > 0:`, `drop_rate=0.0`): warnings; so is sequence state that forward starts afresh
  when an argument says a sequence begins (`if t == 0: self.init_attention(x)`) in a model
  that may be driven step by step through the wrapper;
- caches, lazily built or converted tables, a table kept with the key it was built for and
  rebuilt when the key differs (pytorch_ssim's `if channel == self.channel and ...: window =
  self.window else: ...; self.window = window; self.channel = channel`), warn-once flags and
  latches are rebuilt or re-checked on every call (a speed cost or a repeated message): warnings
  (cost-only);
- a stash the model never reads back matters only to code that reads it after forward:
  info (advice);
- a value written before every use within the call (`self.idx = 0` at the start of forward,
  a setter that skips an unchanged value, a literal default filled in under
  `if self.x is None:`, step state that a helper starts afresh in the caller before every call
  of the method that reads and updates it: an attention decoder's `self.init_states(memory)`
  at the top of forward, then `self.step(x)` in its loop), a conversion of a value this call rebuilt first through a helper
  handed `self` (`create_grids(self, size)`, unless an attribute that helper sets guards the
  call: a lazy memo), or a per-call chunk cache that another module's
  forward resets on its layers at the start of each call (a causal video VAE's
  `module._clear_conv_cache()`, or that it starts afresh under a restart flag the owner sets on
  it each call: SRFBN's `self.block.reset_state()`), or such sequence state in a layer, whose parent runs the
  whole sequence within one call (Tacotron's location-sensitive attention), is not reported:
  nothing is lost. On the judged
  real-code sample (issue 10) none of these 72 per-call values was a hazard.

A write behind a constructor flag (`if self.keep_hidden:`, `self.keep_hidden = keep_hidden` in
`__init__`) is latent where the flag is off as the model is built: its parameter defaults to
False or None (a warning, as above), or it is required and every construction of the class in
its file passes it off, a constant or a parameter of the building class's `__init__` handed on
whose default (or what every construction of that class passes) is off. A warning then, unless
another scanned file builds or imports the class (or a class in that chain): its constructions
are not read, so the flag may be on, an error. A construction with `*args`/`**kwargs` or any
other value leaves a required flag unknown: an error. With no construction of the class in its
file at all, whether the path runs is up to the code that builds it elsewhere: a warning, "behind
the required constructor flag `keep_hidden`, which no construction in this file sets".

`self.step += 1` on a plain tensor attribute (`self.step = torch.zeros(1)` in `__init__`, not a
buffer) is not lost: `+=` updates that tensor in place, and every replica's `__dict__` copy holds
the same object, so the original is advanced once per replica on every call, from several
threads at once. A warning with that message (a buffer keeps only replica 0's update).

A write behind an optional argument of forward (`if has_mask:`, `if mask is not None:`, with a
False or None default) that no call reaching the class under the wrap passes never runs there:
advice only (info), "it runs only when `has_mask` is passed, and no scanned caller passes it"
(see DP204 for which calls count).

## How to fix
Return the value from `forward`, or keep state in a buffer updated in place
(`self.register_buffer("steps", torch.zeros((), dtype=torch.long))` then
`self.steps += 1`), knowing that in-place buffer updates keep only replica 0's result.
"""

from __future__ import annotations

import ast

from dpcheck.analysis.dataflow import (
    accumulation_started_in_call,
    behind_non_default_option,
    behind_undecided_flag,
    cleared_in_forward,
    old_value_use,
    option_constructions,
    read_back_constructions,
    read_back_only_behind_option,
    read_in_forward,
    reads_before_write,
    rebuilt_on_key_change,
    scripting_only,
    under_lazy_guard,
)
from dpcheck.analysis.guards import optional_argument_guard
from dpcheck.analysis.torch_api import FUNCTION_DEFS
from dpcheck.analysis.wrapping import SUBMODULE, wrap_evidence
from dpcheck.findings import ObservationKind as K
from dpcheck.findings import Severity, Subject
from dpcheck.rule import Rule


class AttributeAssignedInForward(Rule):
    code = "DP101"
    name = "attribute-assigned-in-forward"
    severity = Severity.ERROR
    forward_code_only = True
    confirms = frozenset({K.STATE_LOST_ON_REPLICA, K.STATE_DIFFERS, K.VALUES_DIFFER})
    summary = "Attribute assigned on `self` during forward is lost on DataParallel replicas"
    fix_hint = "Return the value from forward, or keep it in a buffer updated in place"
    bad_example = """
        class Counter(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
                self.steps = 0

            def forward(self, x):
                self.steps += 1
                return self.fc(x)
    """
    good_example = """
        class Counter(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
                self.register_buffer("steps", torch.zeros((), dtype=torch.long))

            def forward(self, x):
                self.steps += 1
                return self.fc(x)
    """

    def check_class(self, model):
        attrs = model.attrs
        for fn in model.in_forward:
            for node in fn.nodes(ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Call):
                for target, name, value in _assigned_attrs(fn, node):
                    facts = attrs.get(name)
                    if facts is not None and facts.registered:
                        continue  # buffers, Parameters and submodules have rules of their own
                    if value is not None and _constructs_module(model, value):
                        continue  # DP203: a module or Parameter created in forward
                    if scripting_only(fn, node):
                        continue  # runs only in TorchScript, never in DataParallel's eager replicas
                    kind = _kind(model, fn, name, value, node)
                    if kind == "scratch":
                        continue  # rebuilt before every use within the call: nothing is lost
                    guard = optional_argument_guard(model, fn, node)
                    if guard is None:
                        continue  # behind a guard no run of the wrapped model takes
                    where = "" if fn.name == "forward" else f" (in `{fn.name}`, called from forward)"
                    if isinstance(node, ast.AugAssign) and facts is not None and facts.kinds == {"tensor"}:
                        # `self.step += 1` on a plain tensor: `+=` updates the tensor in place, and
                        # every replica's __dict__ copy holds that one object, so nothing is lost; the
                        # original is advanced once per replica, from several threads at once.
                        yield self.violation(target, _SHARED_TENSOR.format(name=name, where=where),
                                             severity=Severity.WARNING, subject=Subject(attr=name), **guard)
                        continue
                    if kind == "state" and (flag := behind_undecided_flag(model, fn, node)) is not None:
                        # Latent as far as this file shows: the write runs only when the code that
                        # builds the class elsewhere turns the flag on.
                        yield self.violation(target, _UNDECIDED_FLAG.format(name=name, where=where, flag=flag),
                                             severity=Severity.WARNING, subject=Subject(attr=name), **guard)
                    elif kind == "state":
                        yield self.violation(target, f"`self.{name}` assigned in forward{where} is "
                                             "lost: DataParallel runs forward on a replica whose "
                                             "attributes are discarded after the call",
                                             fix=_counter_fix(model, fn, node, name),
                                             subject=Subject(attr=name), **guard)
                    else:
                        settled = (option_constructions(model, fn, node) or {}) if kind == "option" else \
                            read_back_constructions(model, name) if kind == "read_option" else {}
                        message = (_CONSTRUCTED_OFF if kind == "option" else _READ_CONSTRUCTED_OFF) if settled \
                            else _LIGHTER[kind]
                        # A cost or a latch on a path that every construction keeps off is advice too
                        # (BYOL's `self.hook_registered = True`, behind `if self.layer == -1: return`).
                        dead_path = () if settled or kind == "stash" else \
                            (option_constructions(model, fn, node) or {}).get("advice_if", ())
                        # (all may make it advice: an unpassed argument, constructions that keep the option off)
                        advice = guard.get("advice_if", ()) + settled.get("advice_if", ()) + dead_path
                        yield self.violation(target, message.format(name=name, where=where),
                                             severity=_SEVERITY[kind], subject=Subject(attr=name),
                                             **{**guard, **settled, **({"advice_if": advice} if advice else {})})

    def fix(self, finding, editor):
        import libcst as cst

        step = editor.enclosing(editor.node, cst.AugAssign)  # `self.<name> += k` in forward
        init = editor.node_at(*(int(v) for v in finding.fix.get("init", "").split(":"))) \
            if finding.fix.get("init") else None
        assign = editor.enclosing(init, cst.Assign) if init is not None else None
        if step is None or assign is None or len(assign.targets) != 1:
            return
        owner, name = editor.code(init.value), init.attr.value
        torch = finding.fix.get("torch", "torch")
        buffer = cst.parse_expression(
            f'{owner}.register_buffer("{name}", {torch}.tensor({editor.code(assign.value)}), persistent=False)')
        editor.replace(assign, cst.Expr(buffer))
        update = cst.parse_expression(f"{editor.code(step.target)}.add_({editor.code(step.value)})")
        editor.replace(step, cst.Expr(update))


# Lost with the replica but latent: the value matters only on a path that is not the default.
# Lighter than lost state, by the severity policy: latent (the value matters only on a path
# that is not the default) or cost-only (a table rebuilt, a conversion or a check repeated,
# a warn-once message repeated on every call) is a warning. A value the model never reads
# back matters only to code outside it that might read the attribute after forward: advice.
_SEVERITY = {"option": Severity.WARNING, "read_option": Severity.WARNING, "decoding": Severity.WARNING, "cache": Severity.WARNING,
             "flag": Severity.WARNING, "lazy": Severity.WARNING, "converted": Severity.WARNING,
             "latch": Severity.WARNING, "stash": Severity.INFO}

_LIGHTER = {
    "cache": "Cache `self.{name}` assigned in forward{where} lives on a DataParallel replica: it is "
             "recomputed on every call and the model never keeps it (a speed cost)",
    "flag": "Flag `self.{name}` set in forward{where} is lost with the DataParallel replica, so it "
            "never sticks (a warn-once warning repeats every call)",
    "lazy": "Lazily initialised `self.{name}`{where} is rebuilt on every DataParallel call because "
            "the replica's copy is discarded: a speed cost while it is a pure function of the input",
    "converted": "`self.{name}` is converted to the input's device/dtype in forward{where}: under "
                 "DataParallel each replica converts its own copy and discards it, so the original "
                 "keeps the old one and the conversion repeats every call",
    "stash": "`self.{name}` is set in forward{where} but the model never reads it back: under "
             "DataParallel it is set on a replica, so code that reads it from the model after "
             "forward sees the old value",
    "latch": "Flag `self.{name}` set in forward{where} is lost with the DataParallel replica: the "
             "condition it records is checked again on every call",
    "option": "`self.{name}` assigned in forward{where} on a path behind a non-default option is lost "
              "with the DataParallel replica when that option is on",
    "read_option": "`self.{name}` assigned in forward{where} is lost with the DataParallel replica, but the "
                   "model reads it back only on a path behind a non-default option: state that matters "
                   "only when that option is on",
    "decoding": "`self.{name}` assigned in forward{where} carries state to the next call only in the mode "
                "where forward does not clear it (incremental decoding): driven step by step through "
                "DataParallel, each step's state is lost with the replica",
}


_UNDECIDED_FLAG = ("`self.{name}` assigned in forward{where} is lost with the DataParallel replica, on a path "
                   "behind the required constructor flag `{flag}`, which no construction in this file sets: "
                   "state kept only when the code that builds the class turns it on")


_SHARED_TENSOR = ("`self.{name}`, a plain tensor, is updated in place in forward{where}: every DataParallel "
                  "replica shares that one tensor, so each call advances it once per GPU, from several "
                  "threads at once (keep it in a buffer: only replica 0's update then reaches the model)")


# "option" where no default decides it but the constructions of the file do (a required flag):
# an error where another scanned file builds the class (error_if built_outside:).
_CONSTRUCTED_OFF = ("`self.{name}` assigned in forward{where} is lost with the DataParallel replica, on a path "
                    "behind a constructor flag that every construction of the class in this file leaves off: "
                    "state kept only when the flag is on")


_READ_CONSTRUCTED_OFF = ("`self.{name}` assigned in forward{where} is lost with the DataParallel replica, but the "
                         "model reads it back only on a path behind a constructor flag that every construction "
                         "of the class in this file leaves off: state that matters only when the flag is on")


def _assigned_attrs(fn, node):
    """(target node, attribute name, assigned value or None) for writes to self.<attr>."""
    if isinstance(node, ast.Call):
        if (isinstance(node.func, ast.Name) and node.func.id == "setattr" and len(node.args) == 3
                and fn.is_self(node.args[0])):
            name = node.args[1].value if isinstance(node.args[1], ast.Constant) else "<dynamic>"
            yield node, str(name), node.args[2]
        return
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    value = node.value if not isinstance(node, ast.AugAssign) else None
    stack = list(targets)
    while stack:
        target = stack.pop()
        if isinstance(target, (ast.Tuple, ast.List)):
            stack.extend(target.elts)
            continue
        if isinstance(target, ast.Starred):
            stack.append(target.value)
            continue
        name = fn.self_attr(target)
        if name is not None:
            yield target, name, value


def _constructs_module(model, value) -> bool:
    kind, _, _ = model.classify(value)
    return kind in ("module", "parameter", "maybe_module")


_CACHE_WORDS = ("cache", "cached", "_memo", "lookup")
_FLAG_WORDS = ("warn", "logged", "printed", "shown", "_once", "notified")


def _kind(model, fn, name: str, value, node) -> str:
    """state (an error), or one of the lighter cases that are reported as warnings.

    Only a value that a later call reads back is state: an accumulation (the new value
    combines the old one) or a value that forward reads before writing it. A value rebuilt
    on every call, read only after it is written, or never read by the model is not.
    """
    if _reset_by_owner_per_call(model, name):
        return "scratch"
    lowered = name.lower()
    if any(word in lowered for word in _CACHE_WORDS):
        return "cache"
    is_bool = isinstance(value, ast.Constant) and isinstance(value.value, bool)
    if is_bool and any(w in lowered for w in _FLAG_WORDS):
        return "flag"
    if is_bool and _memoises_condition(fn, node):
        return "latch"
    if under_lazy_guard(fn, node):
        return "scratch" if _constant_default(fn, node) else "lazy"
    if _setter_called_under_lazy_guard(model, fn):
        return "lazy"
    if behind_non_default_option(model, fn, node):
        return "option"
    # A value this call started afresh before the write (earlier in the method, or in its caller
    # before every call of it: an attention decoder's `self.init_states(memory)` at the top of
    # forward, then `self.decode(x)` steps that read and update the states): an update of it, or a
    # read before the write, uses this call's value, nothing of the last call's.
    started = accumulation_started_in_call(model, fn, name, node)
    if isinstance(node, ast.AugAssign):
        use = None if started else "accumulates"
    else:
        use = old_value_use(model, fn, name, value)
        if use == "accumulates" and started:
            use = None
    if use == "converted":
        return "converted"
    if use == "memo":
        return "lazy"
    if use == "accumulates" or (not started and reads_before_write(model, fn, name, node)):
        if rebuilt_on_key_change(fn, node, name):
            return "lazy"  # a table kept with its key and rebuilt when the key differs (pytorch_ssim's window)
        if _restarted_by_argument(model, name):
            # Sequence state its caller restarts (`if t == 0: self.init_attention(...)`): a layer's
            # lives for its parent's step loop, within one call; driven step by step from outside
            # (through the wrapper, or a parent that passes the step on) it is lost between steps.
            steps_within_call = wrap_evidence(model) == SUBMODULE and model.ctx.fact(_steps_layers_in_a_loop)
            return "scratch" if steps_within_call else "decoding"
        if cleared_in_forward(model, name):
            return "decoding"
        # Kept across calls but read back only with an option on (`if self.drop_rate > 0:` around
        # the only read of a step counter): latent on the default path.
        return "read_option" if read_back_only_behind_option(model, name) else "state"
    if read_in_forward(model, name):
        return "scratch"
    return "stash"


def _restarted_by_argument(model, name: str) -> bool:
    """Does forward start `self.<name>` afresh when an argument says a new sequence begins: under
    `if <test on a forward parameter>:` (`if t == 0:`), a write of a value that does not read the
    old one, or a call of a method of this class that makes such a write (Tacotron's location-
    sensitive attention: `if t == 0: self.init_attention(x)`)? Then the value is state carried
    between the calls of one sequence, which the caller drives and restarts."""
    forward = model.forward
    if forward is None:
        return False
    params = {a.arg for a in (*forward.node.args.posonlyargs, *forward.node.args.args,
                              *forward.node.args.kwonlyargs)[1:]}
    if not params:
        return False
    methods = {m.name: m for m in model.all_methods}
    for branch in forward.nodes(ast.If):
        if not any(isinstance(n, ast.Name) and n.id in params for n in ast.walk(branch.test)):
            continue
        for stmt in branch.body:
            if _writes_fresh(forward, stmt, name):
                return True
            call = stmt.value if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) else None
            method = methods.get(forward.self_attr(call.func)) if call is not None else None
            if method is not None and method is not forward and any(
                    _writes_fresh(method, s, name) for s in method.node.body):
                return True
    return False


def _steps_layers_in_a_loop(ctx) -> bool:
    """Does a module's forward in this file run a layer step by step within the call, passing it
    the loop's index (`for t in range(steps): ... self.decoder(x, t)`, Tacotron's decoder loop)?
    Then a layer's sequence restarts (`if t == 0:`) come from inside one call of the model."""
    for cls in ctx.nodes(ast.ClassDef):
        for fn in cls.body:
            if not isinstance(fn, FUNCTION_DEFS) or fn.name != "forward":
                continue
            for loop in ast.walk(fn):
                if not isinstance(loop, ast.For) or not isinstance(loop.target, ast.Name):
                    continue
                index = loop.target.id
                for call in (n for stmt in loop.body for n in ast.walk(stmt) if isinstance(n, ast.Call)):
                    func = call.func
                    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) \
                            and func.value.id == "self" and any(
                            isinstance(a, ast.Name) and a.id == index
                            for a in (*call.args, *(k.value for k in call.keywords))):
                        return True
    return False


def _writes_fresh(fn, stmt, name: str) -> bool:
    """Is ``stmt`` `self.<name> = <value>` whose value does not read `self.<name>`?"""
    return isinstance(stmt, ast.Assign) and any(fn.self_attr(t) == name for t in stmt.targets) \
        and not any(isinstance(n, ast.Attribute) and fn.self_attr(n) == name for n in ast.walk(stmt.value))


def _reset_by_owner_per_call(model, name: str) -> bool:
    """Does another module's forward reset `<layer>.<name>` to None at the start of each call
    (`module.causal_cache = None` over its submodules, or a reset method of this class that
    does it, diffusers' `module._clear_conv_cache()`)? Then the value is a per-call chunk
    cache: written and read by the layer's forwards within one call of the owner, which runs on
    one replica whose submodules live for the whole call, and never meant to outlive the call."""
    resets = model.ctx.fact(_external_resets)
    hits = list(resets.get(("attr", name), ()))
    flag = _restart_flag(model, name)
    for fn in model.all_methods:
        if fn.name != "__init__" and any(
                isinstance(n.value, ast.Constant) and (n.value.value is None and any(
                    fn.self_attr(t) == name for t in n.targets) or flag is not None and n.value.value is True
                    and any(fn.self_attr(t) == flag for t in n.targets)) for n in fn.nodes(ast.Assign)):
            hits.extend(resets.get(("call", fn.name), ()))
    for owner, function in hits:
        if owner is model.info.node:
            continue
        if any(r.node is function for r in _owner_reachable(model, owner)):
            return True
    return False


def _restart_flag(model, name: str) -> str | None:
    """The flag forward restarts `self.<name>` on (SRFBN's feedback block):

        if self.should_reset:
            self.last_hidden = torch.zeros(x.size()).to(x.device)
            self.last_hidden.copy_(x)
            self.should_reset = False

    a statement of forward's top level, before any read of `self.<name>`, whose body writes it
    afresh (the value does not read it). A method that sets the flag to True then starts the value
    afresh for the next call, as one that sets it to None does."""
    forward = model.forward
    if forward is None:
        return None
    for stmt in forward.node.body:
        flag = forward.self_attr(stmt.test) if isinstance(stmt, ast.If) else None
        if flag is not None and any(_writes_fresh(forward, s, name) for s in stmt.body):
            return flag
        if any(isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Load) and forward.self_attr(n) == name
               for n in ast.walk(stmt)):
            return None
    return None


def _external_resets(ctx) -> dict[tuple[str, str], list[tuple[ast.ClassDef, ast.AST]]]:
    """("attr", a) -> where `<obj>.a = None` is written, ("call", m) -> where `<obj>.m()` is called,
    on an object other than `self` (a name, or a submodule `self.<layer>`), inside a method of a
    class of this file: (class, method)."""
    found: dict[tuple[str, str], list] = {}
    for node in ctx.nodes(ast.Assign, ast.Call):
        if isinstance(node, ast.Assign):
            if not (isinstance(node.value, ast.Constant) and node.value.value is None):
                continue
            keys = [("attr", t.attr) for t in node.targets
                    if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id != "self"]
        else:
            func = node.func
            owner = func.value if isinstance(func, ast.Attribute) else None
            # `module._clear_conv_cache()` over the submodules, or `self.block.reset_state()`
            on_other = isinstance(owner, ast.Name) and owner.id != "self" or isinstance(owner, ast.Attribute) \
                and isinstance(owner.value, ast.Name) and owner.value.id == "self"
            keys = [("call", func.attr)] if on_other and not node.args else []
        if not keys:
            continue
        function, cur = None, ctx.parent(node)
        while cur is not None and not isinstance(cur, ast.ClassDef):
            if isinstance(cur, FUNCTION_DEFS):
                function = cur
            cur = ctx.parent(cur)
        if cur is not None and function is not None:
            for key in keys:
                found.setdefault(key, []).append((cur, function))
    return found


def _owner_reachable(model, owner: ast.ClassDef):
    """Forward-reachable code of another class of this file (built once per file and class)."""
    from dpcheck.analysis.model_class import ModelClass

    cache = model.ctx.fact(_owner_models)
    if id(owner) not in cache:
        info = model.ctx.classes.get(owner.name)
        cache[id(owner)] = ModelClass(model.ctx, info, frozenset()).reachable \
            if info is not None and info.node is owner else []
    return cache[id(owner)]


def _owner_models(ctx) -> dict:
    return {}


def _counter_fix(model, fn, node, name):
    """A counter (`self.n += 1` in forward, `self.n = 0` once in __init__) becomes a buffer
    updated in place: replica 0's buffers are the model's own, so the update sticks (once
    per call, as on one device). Offered only for that mechanical pattern (unsafe: the
    attribute becomes a 0-dim tensor)."""
    if not (isinstance(node, ast.AugAssign) and isinstance(node.op, (ast.Add, ast.Sub))
            and isinstance(node.value, ast.Constant) and isinstance(node.value.value, (int, float))):
        return None
    facts = model.attrs.get(name)
    torch = next((local for local, target in model.ctx.imports.aliases.items() if target == "torch"), None)
    if facts is None or len(facts.assignments) != 1 or torch is None:
        return None
    target, value, owner = facts.assignments[0]
    if owner.name != "__init__" or not (isinstance(value, ast.Constant) and type(value.value) in (int, float)) \
            or not isinstance(owner.parent(target), ast.Assign):
        return None
    writes = [n for f in model.in_forward for n in f.nodes(ast.Assign, ast.AugAssign, ast.AnnAssign)
              if any(f.self_attr(t) == name for t in (n.targets if isinstance(n, ast.Assign) else [n.target]))]
    if len(writes) != 1:
        return None
    source = model.ctx.source
    row, col, end_row, end_col = source.span(target)
    return Rule.offer_fix(f"Keep `{name}` in a buffer updated in place (`.add_()`), which replica 0 shares "
                          "with the model", init=f"{row}:{col}:{end_row}:{end_col}", torch=torch)


def _constant_default(fn, node) -> bool:
    """`if self.scale is None: self.scale = 1.0` and nothing else under the guard: each replica
    fills in the same literal, so losing it repeats no work and changes no value."""
    parent = fn.parent(node)
    return isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) \
        and isinstance(parent, ast.If) and parent.body == [node] and not parent.orelse


def _memoises_condition(fn, node) -> bool:
    """`if <condition>: self.done = True; return`: the flag only records a condition that
    forward checks again on every call, so losing it re-checks rather than changes anything."""
    parent = fn.parent(node)
    if not isinstance(parent, ast.If) or not any(s is node for s in parent.body):
        return False
    return all(isinstance(s, (ast.Return, ast.Pass)) or (
        isinstance(s, ast.Assign) and isinstance(s.value, ast.Constant) and isinstance(s.value.value, bool))
        for s in parent.body) and any(isinstance(s, ast.Return) for s in parent.body)


def _setter_called_under_lazy_guard(model, fn) -> bool:
    """A helper that forward calls only under `if self.x is None:` (reformer's
    `_set_num_buckets(sequence_length)`): its writes build a missing value lazily, as if they
    stood under the guard themselves, so each DataParallel call rebuilds it on the replica."""
    if fn is model.forward:
        return False
    sites = [(caller, call) for caller in model.in_forward if caller is not fn
             for call in caller.nodes(ast.Call)
             if isinstance(call.func, ast.Attribute) and call.func.attr == fn.name and caller.is_self(call.func.value)]
    return bool(sites) and all(under_lazy_guard(caller, call) for caller, call in sites)
