"""The analysis skips work that cannot change a finding (session cold7): each skip gives the
findings of the plain analysis it short-cuts, on the fixtures and on inputs made to trip it.

* rules that report only forward-run code are not asked about classes that have none
  (``Rule.forward_code_only``), and file-only rules are not asked about classes at all;
* the name prefilters of DP105, DP106, DP205, DP602 and ``registers_hooks`` read the file's
  code names (``context.code_names``), which spell identifiers as Python reads them;
* ``returned_leaves`` is followed once per class;
* ``read_bytes`` reads with the descriptor, ``TreeIndex.position`` is keyed by the nodes.
"""

import ast
import os
import textwrap
from pathlib import Path

import pytest
from conftest import file_context

import dpcheck.analysis.model_class as model_class
from dpcheck.analysis import outputs
from dpcheck.analysis.context import code_names
from dpcheck.analysis.file import analyze_source, read_bytes
from dpcheck.analysis.tree import TreeIndex
from dpcheck.registry import rules_by_code

REPO = Path(__file__).resolve().parent.parent
FIXTURES = sorted((REPO / "fixtures").rglob("*.py"))
RULES = [rule() for rule in rules_by_code().values() if rule.kind == "static"]

# Inputs made to trip the skips: layers named through aliases, attributes, fullwidth letters
# (Python reads `ＢatchNorm2d` as `BatchNorm2d`), hooks on a class without forward, a stored
# forward on a class without one, autograd through a module alias, compile on self.
TRICKY = [
    '''
    import torch
    import torch.nn as nn
    from torch.nn import BatchNorm2d as BN
    from torch import autograd

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Conv2d(3, 3, 1), BN(3))
            self.extra = nn.ModuleList([nn.ＢatchNorm1d(3)])
            self.head = torch.compile(self.body)
            self.compiled = self.compile()

        def forward(self, x):
            g, = autograd.grad(x.sum(), self.body.parameters())
            x.backward()
            handle = self.register_forward_hook(lambda m, i, o: None)
            handle.remove()
            return self.body(x)
    ''',
    '''
    import torch.nn as nn

    class Hooked(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(2, 2)
            self.fc.register_forward_hook(self.grab)
            self.seen = []

        def grab(self, module, inputs, output):
            self.seen.append(output)
            self.last = output

    class Stored(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(2, 2)
            self.forward = self.run

        def run(self, x):
            return self.fc(x)

    class NoForward(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = nn.BatchNorm2d(3)
            self.blocks = [nn.Linear(2, 2)]
    ''',
    '''
    import torchvision
    import torch.nn as nn
    from torch.autograd import backward as run_backward

    class Backbone(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = torchvision.models.resnet18()

        def forward(self, x):
            y = self.net(x)
            run_backward(y.sum())
            self.zero_grad()
            return y
    ''',
]


def _findings(text, name="m.py", module="m"):
    result = analyze_source(textwrap.dedent(text), name, RULES, module)
    return [f.to_dict() for f in result.findings]


def _sources():
    return [(str(p), p.read_text(encoding="utf-8")) for p in FIXTURES] + \
        [(f"tricky{i}.py", text) for i, text in enumerate(TRICKY)]


def test_the_tricky_inputs_are_flagged_at_all():
    """The inputs below are worth comparing on: the skipped checks do fire on them."""
    codes = {f["code"] for text in TRICKY for f in _findings(text)}
    assert {"DP104", "DP105", "DP106", "DP205", "DP602"} <= codes


def test_asking_every_rule_about_every_class_finds_the_same(monkeypatch):
    fast = [_findings(text, name) for name, text in _sources()]
    for rule in rules_by_code().values():
        monkeypatch.setattr(rule, "forward_code_only", False, raising=False)
    # (File-only rules stay unasked: they inherit Rule.check_class, which answers nothing, and
    # the analysis recognises them by that.)
    slow = [_findings(text, name) for name, text in _sources()]
    assert fast == slow


def test_forward_code_only_rules_find_nothing_in_classes_without_forward_code(monkeypatch):
    """Each rule that declares it finds nothing in a class whose reachable code is empty, asked anyway."""
    asked = []
    from dpcheck.analysis import file as file_analysis

    original = file_analysis._run_rules

    def record(ctx, rules, result):
        models = [model_class.ModelClass(ctx, info, needs) for name, info in ctx.classes.items()
                  for sure, needs in [ctx.class_is_module(name)] if sure or needs]
        for model in models:
            if model.reachable:
                continue
            for rule in RULES:
                if rule.forward_code_only:
                    asked.append(rule.code)
                    assert list(rule.check_class(model)) == [], (rule.code, model.name)
        return original(ctx, rules, result)

    monkeypatch.setattr(file_analysis, "_run_rules", record)
    for _, text in _sources():
        analyze_source(textwrap.dedent(text), "m.py", [], "m")
    assert asked  # classes without forward code were met


@pytest.mark.parametrize("prefilter", [
    ("rules.dp602_batchnorm_statistics_per_replica", "_may_build_batchnorm"),
    ("rules.dp105_hook_registered_in_forward", "_touches_hooks"),
    ("rules.dp205_autograd_in_forward", "_may_call_autograd"),
    ("rules.dp106_bound_method_stored", "_may_compile"),
    ("dpcheck.analysis.model_class", "registers_hooks"),
])
def test_a_name_prefilter_skips_only_files_where_the_full_check_finds_nothing(monkeypatch, prefilter):
    import importlib

    module_name, function = prefilter
    module = importlib.import_module(module_name if module_name.startswith("dpcheck") else f"dpcheck.{module_name}")
    fast = [_findings(text, name) for name, text in _sources()]
    monkeypatch.setattr(module, function, lambda ctx: True)
    slow = [_findings(text, name) for name, text in _sources()]
    assert fast == slow


def test_code_names_spell_identifiers_as_python_reads_them():
    ctx = file_context('''
        import torch.nn as tnn
        from .blocks import ConvNormAct as Block
        # BatchNorm in a comment, "register_forward_hook" in a string
        layer = tnn.ＢatchNorm2d(3)
        ﬁlter = Block()
    ''', "pkg.m")
    names = ctx.fact(code_names).split("\n")
    assert {"BatchNorm2d", "tnn", "torch.nn", "pkg.blocks.ConvNormAct", "filter", "Block", "pkg.m"} <= set(names)
    assert "register_forward_hook" not in names
    assert not model_class.registers_hooks(ctx)


def test_returned_leaves_are_followed_once_and_read_alike(monkeypatch):
    ctx = file_context('''
        import torch.nn as nn
        from transformers.utils import ModelOutput

        class Net(nn.Module):
            def forward(self, x):
                loss = x.mean()
                out = {"loss": loss}
                out["logits"] = x
                return ModelOutput(loss=loss, logits=x), out
    ''', "pkg.m")
    model = model_class.ModelClass(ctx, ctx.classes["Net"], frozenset())
    plain = list(outputs._returned_leaves(model))
    calls = []
    original = outputs._leaves

    def counting(*args):
        calls.append(1)
        return original(*args)

    monkeypatch.setattr(outputs, "_leaves", counting)
    first, second = list(outputs.returned_leaves(model)), list(outputs.returned_leaves(model))
    assert first == second == plain and len(plain) >= 3
    followed = len(calls)
    list(outputs.returned_leaves(model))
    assert len(calls) == followed  # not followed again


def test_returned_leaves_that_cannot_be_followed_fail_in_every_rule_that_asks(monkeypatch):
    ctx = file_context('''
        import torch.nn as nn

        class Net(nn.Module):
            def forward(self, x):
                return x, x
    ''', "pkg.m")
    model = model_class.ModelClass(ctx, ctx.classes["Net"], frozenset())

    def broken(*args):
        raise RecursionError("too deep")
        yield  # a generator, as _leaves is

    monkeypatch.setattr(outputs, "_leaves", broken)
    for _ in range(2):
        with pytest.raises(RecursionError):
            list(outputs.returned_leaves(model))


def test_read_bytes_reads_the_whole_file(tmp_path):
    big = tmp_path / "big.py"
    data = b"x = 1  # " + b"y" * (3 << 20) + b"\n"
    big.write_bytes(data)
    assert read_bytes(big) == data
    empty = tmp_path / "empty.py"
    empty.write_bytes(b"")
    assert read_bytes(empty) == b""
    if hasattr(os, "mkfifo"):
        fifo = tmp_path / "fifo.py"
        os.mkfifo(fifo)
        with pytest.raises(OSError):
            read_bytes(fifo)


def test_positions_and_parents_are_keyed_by_the_nodes():
    tree = ast.parse("def f(a):\n    return a + 1\n")
    index = TreeIndex(tree)
    ret = tree.body[0].body[0]
    assert index.position[ret] == index.order.index(ret)
    assert index.parents[ret.value] is ret and index.parents.get(tree) is None
    assert ret.value in index.parents and tree not in index.parents
    # A node that is not in the tree (an equal copy) has no position or parent.
    copy = ast.parse("def f(a):\n    return a + 1\n").body[0].body[0]
    assert copy not in index.position and index.parents.get(copy) is None
