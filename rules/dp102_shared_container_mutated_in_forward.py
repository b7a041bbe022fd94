"""
## What it does
Flags mutation of a plain Python container held on `self` in code that runs during
`forward`: `self.items.append(...)`, `extend`, `insert`, `pop`, `remove`, `clear`,
`self.d[k] = ...`, `self.d.update(...)`, `self.s.add(...)`, `del self.d[k]`.

A call that runs only behind a non-default option (inside `if self.keep:` with `keep=False`, or
after `if self.layer == -1: return self.net(x)` with `layer=-1`, also in a helper that forward calls
only there) is latent: a warning, with the message saying so.

## Why is this bad?
A DataParallel replica is a shallow copy: its `__dict__` holds the *same* list, dict
or set objects as the original module. Every replica thread mutates that one object at
once, so each call appends N entries (one per GPU) in a nondeterministic order, and
unsynchronised writes can interleave. A `history` list grows twice as fast on two GPUs;
a dict keyed by layer name keeps whichever replica wrote last, holding only that
replica's slice of the batch.

## How to fix
Keep forward free of side effects: return what you want to record and collect it in
the training loop, after DataParallel has gathered the full batch.
"""

from __future__ import annotations

import ast

from dpcheck.analysis.dataflow import OPTION_PATH_NOTE, option_constructions
from dpcheck.analysis.torch_api import MOVE_METHODS
from dpcheck.findings import ObservationKind as K
from dpcheck.findings import Severity, Subject
from dpcheck.rule import Rule

# Methods that exist only on containers (lists, deques): safe to flag even when we
# could not see how the attribute was created.
_LIST_ONLY = frozenset({"append", "extend", "appendleft", "extendleft"})
_MUTATORS = _LIST_ONLY | frozenset({"insert", "pop", "remove", "clear", "update", "add",
                                    "setdefault", "popitem", "discard", "popleft", "sort",
                                    "reverse", "__setitem__", "__delitem__"})


class SharedContainerMutatedInForward(Rule):
    code = "DP102"
    name = "shared-container-mutated-in-forward"
    severity = Severity.ERROR
    forward_code_only = True
    confirms = frozenset({K.STATE_MUTATED_PER_REPLICA, K.STATE_DIFFERS, K.VALUES_DIFFER,
                          K.SHARED_CONTAINER_TENSOR_ON_OTHER_DEVICE})
    summary = "A list, dict or set on `self` is mutated in forward by every replica thread at once"
    fix_hint = "Return the data from forward and collect it outside the model"
    bad_example = """
        class Recorder(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
                self.history = []

            def forward(self, x):
                y = self.fc(x)
                self.history.append(y.detach())
                return y
    """
    good_example = """
        class Recorder(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
                self.layers = nn.ModuleList([nn.Linear(4, 4)])

            def forward(self, x):
                outputs = []
                for layer in self.layers:
                    outputs.append(layer(x))
                return torch.stack(outputs, dim=1)
    """

    def check_class(self, model):
        attrs = model.attrs
        for fn in model.in_forward:
            for node in fn.nodes(ast.Call):
                func = node.func
                if not (isinstance(func, ast.Attribute) and func.attr in _MUTATORS):
                    continue
                name = fn.self_attr(func.value)
                if name is None or _rebound_before(model, fn, name, node):
                    continue
                facts = attrs.get(name)
                known_container = facts is not None and "container" in facts.kinds \
                    and not facts.registered
                unknown = facts is None and not model.has_property(name) \
                    and model.find_method(name) is None
                if known_container or (unknown and func.attr in _LIST_ONLY):
                    message = f"`self.{name}.{func.attr}(...)` in forward mutates one container shared by " \
                              "every DataParallel replica thread: it runs once per GPU, in any order"
                    opt_in = _created_only_in(model, facts) if known_container else None
                    if opt_in:
                        yield self.violation(node, f"{message} (the container exists only once `{opt_in}()` "
                                             "has been called)", severity=Severity.WARNING)
                    elif (settled := option_constructions(model, fn, node)) is not None:
                        yield self.violation(node, message + OPTION_PATH_NOTE, severity=Severity.WARNING, **settled)
                    else:
                        yield self.violation(node, message)
            for node in fn.nodes(ast.Assign, ast.AugAssign, ast.Delete):
                targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
                for target in targets:
                    if not isinstance(target, ast.Subscript):
                        continue
                    name = fn.self_attr(target.value)
                    facts = attrs.get(name) if name else None
                    if facts is None or "container" not in facts.kinds or facts.registered:
                        continue
                    if _rebound_before(model, fn, name, target):
                        continue  # this call's fresh container, on the replica's own __dict__
                    if _keyed_by_device(fn, target.slice):
                        continue  # keyed by device: each replica keeps its own entry
                    verb = "deletes from" if isinstance(node, ast.Delete) else "writes into"
                    value = getattr(node, "value", None)
                    if _memo_read(model, name):
                        if _moved_where_read(model, name):
                            continue  # every read moves the entry to the reader's device first
                        if value is not None and _device_bound(model, value):
                            yield self.violation(target, f"Cache `self.{name}[...]` is shared by every "
                                                 "DataParallel replica thread and not keyed by device: an "
                                                 "entry built on one replica's GPU is read by the others, "
                                                 "a device mismatch; key it by device", subject=Subject(attr=name))
                            continue
                    if any(w in name.lower() for w in ("cache", "memo")) or _memo_read(model, name):
                        yield self.violation(target, f"Cache `self.{name}[...]` {verb} a dict shared by "
                                             "every DataParallel replica thread: entries written by "
                                             "one replica (on its GPU) are read by the others; key "
                                             "it by device", severity=Severity.WARNING, subject=Subject(attr=name))
                        continue
                    yield self.violation(target, f"`self.{name}[...]` {verb} a container shared by "
                                         "every DataParallel replica thread: the last replica to "
                                         "write wins, holding only its slice of the batch", subject=Subject(attr=name))


def _rebound_before(model, fn, name, node) -> bool:
    """Does ``fn`` bind ``self.<name>`` to a fresh container in a statement of its own body (not
    under a branch or loop) before ``node``? Assigning on a replica sets the replica's own
    ``__dict__`` entry, so what follows mutates a container of this call and this replica only.
    Not when a method outside forward reads the container back (`def last_maps(self): return
    self.maps`): it reads the original's, which no replica fills, so the finding stays."""
    if _read_outside_forward(model, name):
        return False
    for statement in fn.node.body:
        if statement.lineno >= node.lineno:
            return False
        if isinstance(statement, ast.Assign) and model.classify(statement.value, fn)[0] == "container" \
                and any(fn.self_attr(target) == name for target in statement.targets):
            return True
    return False


def _read_outside_forward(model, name) -> bool:
    """Does a method that forward does not reach (other than `__init__`) read `self.<name>` back,
    rather than fill it (`self.d[k] = v`, `self.items.append(v)`)?"""
    reachable = {id(fn.node) for fn in model.reachable}
    for fn in model.all_methods:
        if id(fn.node) in reachable or fn.name == "__init__":
            continue
        for node in fn.nodes(ast.Attribute):
            if not isinstance(node.ctx, ast.Load) or fn.self_attr(node) != name:
                continue
            parent = fn.parent(node)
            filled = isinstance(parent, ast.Subscript) and not isinstance(parent.ctx, ast.Load) \
                or isinstance(parent, ast.Attribute) and parent.attr in _MUTATORS
            if not filled:
                return True
    return False


def _keyed_by_device(fn, key) -> bool:
    texts = [ast.unparse(key)]
    if isinstance(key, ast.Name):
        texts += [ast.unparse(v) for v in fn.local_values.get(key.id, ())]
    return any("device" in text for text in texts)


def _memo_read(model, name) -> bool:
    """Is the container read back by key in forward (`self.d[k]`, `self.d.get(k)`, `k in self.d`)?
    Then it memoises entries across calls rather than recording per-call data."""
    for fn in model.reachable:
        for n in fn.nodes(ast.Subscript):
            if isinstance(n.ctx, ast.Load) and fn.self_attr(n.value) == name:
                return True
        for n in fn.nodes(ast.Call):
            if isinstance(n.func, ast.Attribute) and n.func.attr == "get" and fn.self_attr(n.func.value) == name:
                return True
        for n in fn.nodes(ast.Compare):
            if any(isinstance(op, (ast.In, ast.NotIn)) for op in n.ops) and any(
                    fn.self_attr(c) == name for c in n.comparators):
                return True
    return False


def _moved_where_read(model, name) -> bool:
    """`v = self.d.get(k)` ... `v = v.to(device)`: the reader converts the entry before use."""
    for fn in model.reachable:
        readers = set()
        for node in fn.nodes(ast.Assign):
            value = node.value
            if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr == "get":
                value = value.func.value
            elif isinstance(value, ast.Subscript):
                value = value.value
            if fn.self_attr(value) == name:
                readers |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        for local in readers:
            for bound in fn.local_values.get(local, ()):
                if isinstance(bound, ast.Call) and isinstance(bound.func, ast.Attribute) \
                        and bound.func.attr in MOVE_METHODS and isinstance(bound.func.value, ast.Name) \
                        and bound.func.value.id == local:
                    return True
    return False


def _device_bound(model, value) -> bool:
    """Does the stored value live on a device: built for one (`device=...`) or by a torch factory?"""
    for n in ast.walk(value):
        if isinstance(n, ast.Attribute) and n.attr == "device" or isinstance(n, ast.Name) and "device" in n.id:
            return True
        if isinstance(n, ast.keyword) and n.arg == "device":
            return True
        if isinstance(n, ast.Call) and (model.ctx.resolve(n.func) or "").startswith("torch."):
            return True
    return False


def _created_only_in(model, facts) -> str | None:
    """The method the user must call for the container to exist: `__init__` leaves it None and
    only that method (not reachable from forward) makes it a container."""
    makers = {fn.name for _, value, fn in facts.assignments if model.classify(value, fn)[0] == "container"}
    others = [value for _, value, fn in facts.assignments if fn.name == "__init__"]
    if len(makers) == 1 and "__init__" not in makers and others and all(
            isinstance(v, ast.Constant) and v.value is None for v in others):
        return next(iter(makers))
    return None
