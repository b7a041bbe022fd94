"""
## What it does
Flags mutation of a plain Python container held on `self` in code that runs during
`forward`: `self.items.append(...)`, `extend`, `insert`, `pop`, `remove`, `clear`,
`self.d[k] = ...`, `self.d.update(...)`, `self.s.add(...)`, `del self.d[k]`.

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

from dpcheck.findings import Severity
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
                if name is None:
                    continue
                facts = attrs.get(name)
                known_container = facts is not None and "container" in facts.kinds \
                    and not facts.registered
                unknown = facts is None and not model.has_property(name) \
                    and model.find_method(name) is None
                if known_container or (unknown and func.attr in _LIST_ONLY):
                    yield self.violation(node, f"`self.{name}.{func.attr}(...)` in forward mutates "
                                         "one container shared by every DataParallel replica "
                                         "thread: it runs once per GPU, in any order")
            for node in fn.nodes(ast.Assign, ast.AugAssign, ast.Delete):
                targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
                for target in targets:
                    if not isinstance(target, ast.Subscript):
                        continue
                    name = fn.self_attr(target.value)
                    facts = attrs.get(name) if name else None
                    if facts is None or "container" not in facts.kinds or facts.registered:
                        continue
                    if _keyed_by_device(fn, target.slice):
                        continue  # keyed by device: each replica keeps its own entry
                    verb = "deletes from" if isinstance(node, ast.Delete) else "writes into"
                    if any(w in name.lower() for w in ("cache", "memo")):
                        yield self.violation(target, f"Cache `self.{name}[...]` {verb} a dict shared by "
                                             "every DataParallel replica thread: entries written by "
                                             "one replica (on its GPU) are read by the others; key "
                                             "it by device", severity=Severity.WARNING)
                        continue
                    yield self.violation(target, f"`self.{name}[...]` {verb} a container shared by "
                                         "every DataParallel replica thread: the last replica to "
                                         "write wins, holding only its slice of the batch")


def _keyed_by_device(fn, key) -> bool:
    texts = [ast.unparse(key)]
    if isinstance(key, ast.Name):
        texts += [ast.unparse(v) for v in fn.local_values.get(key.id, ())]
    return any("device" in text for text in texts)
