"""Is a path off by default? The one answer for every rule that makes a hazard latent behind an option.

Two kinds of option decide a path the user must turn on:

- a parameter of a module's constructor or forward, or `self.<attr>` set once from one, whose
  default (or what every construction of the class in its file passes) leaves the test false
  (``dataflow.option_constructions``);
- a command-line switch: `if args.reset_decoder:` / `if self.opt.linear_add:` on an option a parser
  defines with `add_argument("--linear_add", action="store_true")`, or with a false literal
  `default=` (`default=False`, `default=0`, none at all), or the `else:` of a switch that defaults
  to true (`action="store_false"`). The switch is read off the read's own file where that file
  defines it; otherwise off the project's option table (``FileResult.options``: every scanned
  file's definitions, EnlightenGAN's `options/base_options.py` for the reads in
  `models/networks.py`). The index settles that table: a rule reports the latent finding on
  ``OPTION_DEFAULT_CONDITION`` and the finding as it stands on ``OPTION_NOT_DEFAULT_CONDITION``, so
  a switch no scanned file defines, or that two definitions give different truths, leaves the
  error and its message as they were.
"""

from __future__ import annotations

import ast

from dpcheck.analysis.dataflow import needed_parts, option_constructions, parameter_defaults
from dpcheck.analysis.names import callee_name
from dpcheck.analysis.torch_api import FUNCTION_DEFS
from dpcheck.record import record

# `option_default:<name>=<off|on>` in a finding's ``requires``: every definition of option `<name>` in
# the scanned files (at least one) gives it that truth by default (ClassIndex.option_default).
OPTION_DEFAULT_CONDITION = "option_default:"
# `option_not_default:<name>=<off|on>,...`: none of those options is shown so (no definition, or
# definitions that disagree): the path behind them may run as the program stands.
OPTION_NOT_DEFAULT_CONDITION = "option_not_default:"
OFF, ON, UNKNOWN = "off", "on", "?"

# What a parser's `default=` turns into when it is a string and a `type=` converts it (argparse
# applies `type` to string defaults): `type=str2bool, default="False"` is false, which the literal
# does not show. Only `str` leaves the literal as it is.
_KEEPS_STRINGS = frozenset({"str"})


def command_line_options(ctx) -> dict[str, str]:
    """The options the file's parsers define (`add_argument`, `set_defaults`) -> OFF where the
    default is false (`action="store_true"` without a true `default=`, a false literal, no default
    at all), ON where it is true, UNKNOWN where the file cannot tell (a computed default, a required
    or positional option, two definitions that disagree). Cheap text test first: most files define
    none."""
    return ctx.fact(_find_command_line_options)


def _find_command_line_options(ctx) -> dict[str, str]:
    text = ctx.source.text
    if "add_argument" not in text and "set_defaults" not in text:
        return {}
    found: dict[str, str] = {}
    for call in ctx.nodes(ast.Call):
        func = call.func
        if not isinstance(func, ast.Attribute):
            continue
        if func.attr == "add_argument":
            entry = _argument_definition(call)
            if entry is not None:
                define_option(found, *entry)
        elif func.attr == "set_defaults":
            for kw in call.keywords:
                if kw.arg is not None:
                    define_option(found, kw.arg, _truth(kw.value))
    return found


def define_option(found: dict[str, str], name: str, state: str) -> None:
    """Add one definition of option ``name`` to a table: two that disagree make it UNKNOWN (which
    parser a run uses is not known)."""
    found[name] = state if found.get(name, state) == state else UNKNOWN


def _argument_definition(call: ast.Call) -> tuple[str, str] | None:
    """(dest, OFF | ON | UNKNOWN) of one `add_argument(...)`; None where no name can be read."""
    options = {k.arg: k.value for k in call.keywords if k.arg is not None}
    names = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    dest = options.get("dest")
    if isinstance(dest, ast.Constant) and isinstance(dest.value, str):
        name = dest.value
    else:
        long = [n for n in names if n.startswith("--")] or names
        if not long:
            return None
        name = long[0].lstrip("-").replace("-", "_")
    if not any(n.startswith("-") for n in names) or _is_true(options.get("required")):
        return name, UNKNOWN  # a positional or required option: the command line always gives it
    action = options.get("action")
    default = options.get("default")
    if action is not None and not isinstance(action, ast.Constant):
        return name, UNKNOWN  # an action class of the project's: what it stores is its own
    if default is None:
        if isinstance(action, ast.Constant) and action.value == "store_false":
            return name, ON
        return name, OFF  # store_true's False; any other action's (or none's) None
    if isinstance(default, ast.Constant) and isinstance(default.value, str):
        kind = options.get("type")
        if kind is not None and not (isinstance(kind, ast.Name) and kind.id in _KEEPS_STRINGS):
            return name, UNKNOWN
    return name, _truth(default)


def _truth(node: ast.AST) -> str:
    if isinstance(node, ast.Constant):
        return ON if node.value else OFF
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant):
        return ON if node.operand.value else OFF
    if isinstance(node, (ast.List, ast.Tuple, ast.Dict, ast.Set)):
        return ON if (node.keys if isinstance(node, ast.Dict) else node.elts) else OFF
    return UNKNOWN


def _is_true(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and node.value is True


def summarize_options(ctx, result) -> None:
    """Fill ``result.options`` (`<name>=<off|on|?>`, see ``command_line_options``) for the project's
    option table."""
    result.options = [f"{name}={state}" for name, state in sorted(command_line_options(ctx).items())]


@record(frozen=True)
class OptionPath:
    """How a path behind an option is reported: ``latent``, the ``Violation`` keywords of the latent
    finding (a warning: the conditions under which it is an error after all, or advice only, or
    under which it stands at all); ``default_path``, where the project's option table decides it,
    the conditions (any one) under which the path runs by default after all, for the finding as the
    rule reports it on the default path (None where the read's own file decided)."""

    latent: dict
    default_path: frozenset[str] | None = None


def off_by_default(model, fn, node: ast.AST) -> OptionPath | None:
    """Does ``node``, in function ``fn`` of module class ``model``, run only with an option changed
    from its default: a constructor or forward option (``dataflow.option_constructions``), or a
    command-line switch (``behind_switch_off_by_default``)? None where neither decides it."""
    settled = option_constructions(model, fn, node)
    if settled is not None:
        return OptionPath(settled)
    return behind_switch_off_by_default(node, model.ctx)


def every_path_off(paths: list[OptionPath | None]) -> OptionPath | None:
    """One ``OptionPath`` for a hazard that needs every one of several reads (at least one), each
    behind its option (``off_by_default``): latent where every read is, on the default path where
    any is. None where one read is on the default path as its file shows."""
    if not paths or any(p is None for p in paths):
        return None
    latent: dict = {}
    requires = tuple(dict.fromkeys(c for p in paths for c in p.latent.get("requires", ())))
    if requires:
        latent["requires"] = requires
    error_if = tuple(dict.fromkeys(c for p in paths for c in p.latent.get("error_if", ())))
    if error_if:
        latent["error_if"] = error_if
    advice = {p.latent.get("advice_if", ()) for p in paths}
    if len(advice) == 1 and (advice_if := advice.pop()):
        latent["advice_if"] = advice_if  # (advice only where every read is dead, so one shared reason)
    default_path = frozenset(c for p in paths if p.default_path for c in p.default_path)
    return OptionPath(latent, default_path or None)


def behind_switch_off_by_default(node: ast.AST, ctx, excluded: frozenset[str] = frozenset()) -> OptionPath | None:
    """Is ``node`` in the body of an `if` on a command-line switch off by default (a conjunct of an
    `and` too), or in the `else:` of one on a switch on by default: `if args.reset_decoder:`,
    `if self.opt.linear_add:`, `if not opt.no_flip:` on `store_false`, or `if encoder_only:` on a
    parameter whose default is false and that every call of this file leaves out or passes such a
    switch or a false constant (`iteration(..., encoder_only=args.encoder_only)`)? Names in
    ``excluded`` (the switches the wrap itself runs under) do not count. None where no switch
    decides it; where the file's own parser defines the switch, a plain latent path; where none of
    its parsers does, one that the project's option table settles: latent where it shows one of the
    switches at the default that keeps the path off (``OPTION_DEFAULT_CONDITION``), on the default
    path where it shows none so (``OPTION_NOT_DEFAULT_CONDITION``: no definition, or definitions
    that disagree)."""
    own = command_line_options(ctx)
    gates: list[str] = []
    child, cur = node, ctx.parent(node)
    while cur is not None and not isinstance(cur, (ast.Module, ast.ClassDef)):
        if isinstance(cur, ast.If) and child is not cur.test:
            in_body = any(child is s for s in cur.body)
            tests = cur.test.values if in_body and isinstance(cur.test, ast.BoolOp) \
                and isinstance(cur.test.op, ast.And) else [cur.test]
            for test in tests:
                gate = _switch_gate(test, in_body, ctx, cur, own, excluded)
                if gate is True:
                    return OptionPath({})
                if gate:
                    gates.append(gate)
        child, cur = cur, ctx.parent(cur)
    if not gates:
        return None
    return _option_path(sorted(set(gates)))


def _option_path(gates: list[str]) -> OptionPath:
    """The path behind switches that no parser of the read's file defines: latent where the
    project's option table shows one of ``gates`` at the default that keeps it off, on the default
    path where it shows none so."""
    return OptionPath({"requires": (frozenset(OPTION_DEFAULT_CONDITION + g for g in gates),)},
                      frozenset({OPTION_NOT_DEFAULT_CONDITION + ",".join(gates)}))


def _turned_on_before_call(name: str, node: ast.AST, ctx) -> bool:
    """Does a function of this file set the switch ``name`` to something other than a false constant
    (`self.dataset_args.train_denoiser = True` in crystalsizer3d's `load_network`) and call the
    function around ``node`` by name (`self._init_optimiser('denoiser')`)? Then the path behind the
    switch runs whatever its command-line default."""
    fn = ctx.enclosing(node, FUNCTION_DEFS)
    if fn is None:
        return False
    for store in _switch_stores(ctx).get(name, ()):
        setter = ctx.enclosing(store, FUNCTION_DEFS)
        if setter is not None and any(
                (isinstance(c.func, ast.Attribute) and c.func.attr == fn.name
                 or isinstance(c.func, ast.Name) and c.func.id == fn.name)
                for c in ast.walk(setter) if isinstance(c, ast.Call)):
            return True
    return False


def _switch_stores(ctx) -> dict[str, list[ast.Assign]]:
    return ctx.fact(_find_switch_stores)


def _find_switch_stores(ctx) -> dict[str, list[ast.Assign]]:
    """Assignments of something other than a false constant to a switch (`args.x = ...`,
    `self.opt.x = ...`), by the switch's name."""
    found: dict[str, list[ast.Assign]] = {}
    for assign in ctx.nodes(ast.Assign):
        if isinstance(assign.value, ast.Constant) and not assign.value.value:
            continue
        for target in assign.targets:
            name = _switch_name(target)
            if name is not None:
                found.setdefault(name, []).append(assign)
    return found


def built_only_behind_switch(statements, ctx, reached_from: ast.AST | None = None) -> OptionPath | None:
    """Does each of ``statements`` (the assignments that make a wrapper, at least one) run only with
    a command-line switch changed from its default: in the arm of an `if` on the switch, or after an
    early exit on it (`if not self.transcoder_args.use_transcoder: self.transcoder = None; return`,
    crystalsizer3d's components that exist only when asked for)? The same answer as
    ``behind_switch_off_by_default``. A switch that some function of the file turns on before it
    calls the function around ``reached_from`` (the read) does not count: that path runs with it."""
    if not statements:
        return None
    own = command_line_options(ctx)
    gates: set[str] = set()
    for statement in statements:
        found = _gates_before(statement, ctx, own, reached_from)
        if found is True:
            return OptionPath({})
        if not found:
            return None
        gates.update(found)
    return _option_path(sorted(gates))


def wrap_switches(statement: ast.AST, ctx) -> list[str]:
    """The command-line switches off by default that ``statement`` (a wrap, or the construction of
    what it wraps) runs behind in its function (``_gates_before``): `<name>` for one the file itself
    decides (its own parser's default, a parameter every call of the file leaves false),
    `<name>=<off|on>` for one the project's option table settles (``ClassIndex.option_default``).
    Empty where it runs as the program stands. A switch that turns the GPU on (``_preconditions``)
    or that the program exits without (`if not args.do_train and not args.do_eval: raise ...`) is
    no option here: DataParallel runs only with it set."""
    decided: list[str] = []
    gates = _gates_before(statement, ctx, command_line_options(ctx), None, decided, ctx.fact(_preconditions))
    return sorted(set(decided) | gates)


def _preconditions(ctx) -> frozenset[str]:
    """The switches a run of the file's program on GPUs sets: the one every move to the GPU of the
    file runs behind (`if opt.cuda: crnn.cuda()`, `"cuda" if args.gpu else "cpu"`, with no other
    `.cuda()` or `"cuda"` in the file: without it nothing runs on a GPU), and those the program stops
    without (a negated conjunct of an `if` whose body ends in a `raise`: SpanBERT's
    `if not args.do_train and not args.do_eval: raise ValueError(...)`)."""
    found: set[str] = set()
    for node in ctx.nodes(ast.If):
        if node.body and isinstance(node.body[-1], ast.Raise):
            tests = node.test.values if isinstance(node.test, ast.BoolOp) else [node.test]
            found.update(name for t in tests if isinstance(t, ast.UnaryOp) and isinstance(t.op, ast.Not)
                         and (name := _switch_name(t.operand)))
    gpu: set[str] | None = None
    for move in _gpu_moves(ctx):
        behind: set[str] = set()
        child, cur = move, ctx.parent(move)
        while cur is not None:
            if isinstance(cur, ast.If) and any(child is s for s in cur.body) \
                    or isinstance(cur, ast.IfExp) and child is cur.body:
                tests = cur.test.values if isinstance(cur.test, ast.BoolOp) and isinstance(cur.test.op, ast.And) \
                    else [cur.test]
                behind.update(name for t in tests if (name := _switch_name(t)))
            child, cur = cur, ctx.parent(cur)
        gpu = behind if gpu is None else gpu & behind
        if not gpu:
            break
    return frozenset(found | (gpu or set()))


def _gpu_moves(ctx) -> list[ast.AST]:
    """The file's `.cuda()` calls and `"cuda..."` strings: where it puts something on a GPU."""
    if "cuda" not in ctx.source.text:
        return []
    moves: list[ast.AST] = [n for n in ctx.nodes(ast.Call) if isinstance(n.func, ast.Attribute) and n.func.attr == "cuda"]
    moves += [n for n in ctx.nodes(ast.Constant) if isinstance(n.value, str) and n.value.startswith("cuda")]
    return moves


def _gates_before(statement: ast.AST, ctx, own: dict[str, str], reached_from,
                  decided: list[str] | None = None, excluded: frozenset[str] = frozenset()) -> set[str] | bool:
    """The switch gates (``_switch_gate``) that ``statement`` runs behind in its function: the arms of
    the `if`s around it and the early exits (`if <test>: ... return`) before it in each block; True
    where one is decided by this file's own parser (with ``decided``, its name goes there instead,
    and the walk goes on)."""
    gates: set[str] = set()
    child, cur = statement, ctx.parent(statement)
    while cur is not None and not isinstance(cur, (ast.Module, ast.ClassDef)):
        arms = []
        if isinstance(cur, ast.If) and child is not cur.test:
            arms.append((cur, any(child is s for s in cur.body)))
        for block in _blocks(cur):
            if any(child is s for s in block):
                arms.extend((s, False) for s in block[:next(i for i, s in enumerate(block) if s is child)]
                            if isinstance(s, ast.If) and not s.orelse and s.body
                            and isinstance(s.body[-1], (ast.Return, ast.Raise)))
        for where, in_body in arms:
            for test in needed_parts(where.test, in_body):
                gate = _switch_gate(test, in_body, ctx, where, own, excluded, reached_from)
                if gate is True and decided is not None:
                    decided.append(_gate_name(test))
                elif gate is True:
                    return True
                elif gate:
                    gates.add(gate)
        if isinstance(cur, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            break
        child, cur = cur, ctx.parent(cur)
    return gates


def _blocks(node: ast.AST) -> list[list[ast.stmt]]:
    return [b for b in (getattr(node, f, None) for f in ("body", "orelse", "finalbody")) if isinstance(b, list)]


def _switch_gate(test: ast.AST, in_body: bool, ctx, where: ast.If, own: dict[str, str], excluded: frozenset[str],
                 reached_from: ast.AST | None = None):
    """How ``test`` keeps the arm of its `if` off by default: True where the file shows it does;
    `<name>=<off|on>`, the default the switch must have for that, where no parser of this file
    defines it (the project's option table settles it); None where it does not, or where a function
    of this file turns the switch on and then calls the function around ``reached_from`` (the
    code behind the arm, where that is not ``where``'s own)."""
    negated = False
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        test, negated = test.operand, True
    # The arm runs when the test is true (the body) or false (the else): it is off by default where
    # the switch's default makes the test take the other way.
    wanted = OFF if in_body != negated else ON
    name = _switch_name(test)
    if name is not None and name not in excluded:
        if wanted == OFF and _turned_on_before_call(name, reached_from or where, ctx):
            return None
        if name in own:
            return True if own[name] == wanted else None
        return f"{name}={wanted}"
    flags = {n for n, state in own.items() if state == OFF} - excluded
    if isinstance(test, ast.Name) and wanted == OFF:
        fn = ctx.enclosing(where, FUNCTION_DEFS)
        if fn is not None and _parameter_switch_off(test.id, fn, ctx, flags):
            return True
    return None


def _gate_name(test: ast.AST) -> str:
    """The switch a gate ``_switch_gate`` decided tests: `args.x`, `not opt.x` -> `x`; a parameter's name."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        test = test.operand
    return _switch_name(test) or getattr(test, "id", "")


def _switch_name(test: ast.AST) -> str | None:
    """`args.x`, `opt.x`, `self.opt.x` -> `x`: an attribute read off a name (not `self` itself, whose
    attributes are the class's own options) or off one attribute of `self`."""
    if not isinstance(test, ast.Attribute):
        return None
    holder = test.value
    if isinstance(holder, ast.Name):
        return test.attr if holder.id != "self" else None
    if isinstance(holder, ast.Attribute) and isinstance(holder.value, ast.Name) and holder.value.id == "self":
        return test.attr
    return None


def _parameter_switch_off(name: str, fn, ctx, flags: set[str]) -> bool:
    """`if encoder_only:` on a parameter of ``fn`` whose default is false and that every call of it in
    this file (at least one) leaves out, or passes a false constant or one of the file's switches
    off by default (``flags``): a function's `fn(...)`, a method's `self.fn(...)` (crystalsizer3d's
    `predict(X, latent_input=False)`, which every call leaves at its default)."""
    default = parameter_defaults(fn.args).get(name)
    if not (isinstance(default, ast.Constant) and not default.value):
        return False
    positional = fn.args.posonlyargs + fn.args.args
    method = ctx.enclosing(fn, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
    bound = 1 if isinstance(method, ast.ClassDef) and positional and positional[0].arg == "self" else 0
    if bound and (fn.name == "forward" or fn.name.startswith("__")):
        return False  # called through the module or by Python itself: its callers are not calls of its name
    named = _calls_by_name(ctx).get(fn.name, ())
    # A method's calls are any `<x>.<name>(...)` of the file (another instance's count too), at least
    # one of them on self.
    calls = [c for c in named if isinstance(c.func, ast.Attribute)] if bound else \
        [c for c in named if isinstance(c.func, ast.Name)]
    if not calls or bound and not any(_is_self(c.func.value) for c in calls):
        return False
    positional = positional[bound:]
    index = next((i for i, a in enumerate(positional) if a.arg == name), None)
    for call in calls:
        if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
            return False
        passed = [k.value for k in call.keywords if k.arg == name]
        if index is not None and index < len(call.args):
            passed.append(call.args[index])
        if not all(isinstance(v, ast.Constant) and not v.value or isinstance(v, ast.Attribute)
                   and isinstance(v.value, ast.Name) and v.attr in flags for v in passed):
            return False
    return True


def _calls_by_name(ctx) -> dict[str, list[ast.Call]]:
    return ctx.fact(_find_calls_by_name)


def _find_calls_by_name(ctx) -> dict[str, list[ast.Call]]:
    """The file's calls by the name they call (`f(...)`, `<x>.f(...)`), for the parameter switches."""
    found: dict[str, list[ast.Call]] = {}
    for call in ctx.nodes(ast.Call):
        if name := callee_name(call):
            found.setdefault(name, []).append(call)
    return found


def _is_self(node: ast.AST) -> bool:
    return isinstance(node, ast.Name) and node.id == "self"
