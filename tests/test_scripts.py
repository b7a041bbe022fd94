"""Training-script facts (dpcheck.analysis.scripts) and wrap evidence (dpcheck.analysis.wrapping)."""

import ast
import json
import textwrap
from pathlib import Path

from conftest import file_context, run_cli, run_json

from dpcheck.analysis.file import analyze_source
from dpcheck.analysis.model_class import ModelClass
from dpcheck.analysis.scripts import guard_fails, script_facts
from dpcheck.analysis.wrapping import harness_condition, parallelises_own_submodule, wrap_evidence, wrapped_batch_dim
from dpcheck.registry import rules_by_code


def held(text, line, name="model"):
    """Does ``name`` hold a wrapper where it is read on ``line``?"""
    ctx = file_context(text)
    facts = script_facts(ctx)
    nodes = [n for n in ctx.nodes(ast.Name, ast.Attribute) if n.lineno == line
             and isinstance(getattr(n, "ctx", None), ast.Load) and ast.unparse(n) == name]
    assert nodes, f"no `{name}` read on line {line}"
    return facts.wrap_for(nodes[0]) is not None


def test_every_dataparallel_form_is_a_construction():
    text = """
        import torch
        from torch.nn import DataParallel as DP
        from torch.nn.parallel import DataParallel
        import torch.nn as nn

        class Mine(nn.DataParallel):
            def gather(self, outputs, device):
                return outputs

        a = DP(net)
        b = torch.nn.parallel.DataParallel(net)
        c = DataParallel(net, dim=1)
        d = Mine(net)
        e = nn.Linear(4, 4)
    """
    ctx = file_context(text)
    facts = script_facts(ctx)
    by_target = {n.targets[0].id: n.value for n in ctx.nodes(ast.Assign)}
    assert all(facts.dp_class(by_target[k]) is not None for k in "abcd")
    assert facts.dp_class(by_target["e"]) is None
    assert "overrides gather" in facts.source_of(by_target["d"]).note
    assert ast.unparse(facts.source_of(by_target["c"]).dim) == "1"


def test_star_import_and_imported_subclass():
    star = file_context("from torch.nn import *\nmodel = DataParallel(net)\n")
    assert script_facts(star).dp_calls
    plain = file_context("model = DataParallel(net)\n")  # an undefined name is not torch's class
    assert not script_facts(plain).dp_calls
    imported = file_context("from lib.sync import DataParallelWithCallback\nm = DataParallelWithCallback(net)\n")
    (call,) = script_facts(imported).dp_calls
    assert script_facts(imported).source_of(call).requires == {"dp:lib.sync.DataParallelWithCallback"}


def test_builders_parameters_and_attributes():
    text = """
        import torch.nn as nn

        def build(net, n):
            model = net.cuda()
            if n > 1:
                model = nn.DataParallel(model)
            return model

        def train(model, steps):
            return model.fc

        class Trainer:
            def __init__(self, model):
                self.model = model

            def step(self):
                return self.model.fc

        def main(net):
            model = build(net, 2)
            train(model, 1)
            Trainer(model=model)
            plain = net
            train2(plain)
    """
    assert held(text, 11)  # parameter of train
    assert held(text, 18, "self.model")  # attribute set from a constructor argument
    assert held(text, 22)  # the builder's result
    assert not held(text, 5, "net")


def test_exclusive_arms_and_isinstance_guards():
    text = """
        import torch.nn as nn

        def main(model, gpus, rank):
            if len(gpus) > 1:
                model = nn.DataParallel(model)
                a = model.module
            else:
                b = model.fc
            if len(gpus) > 1:
                c = model.module
            else:
                d = model.fc
            e = model.fc

        def save(model):
            if isinstance(model, nn.DataParallel):
                return model.module
            return model.fc
    """
    assert held(text, 7)
    assert not held(text, 9)  # the other arm of the same if
    assert held(text, 11)
    assert not held(text, 13)  # the else arm of an if with the same test
    assert held(text, 14)  # after the if: maybe wrapped, which is what multi-GPU runs see
    assert held(text, 18)  # narrowed by isinstance
    assert not held(text, 19)  # after the early return


def test_inner_of_rewrap_is_not_the_new_wrapper():
    text = """
        import torch.nn as nn

        class T:
            def __init__(self, net):
                self.model = net.cuda()
                self.model = nn.DataParallel(
                    self.model)
    """
    assert not held(text, 8, "self.model")


def test_wrap_evidence_wrapped_submodule_top_level():
    text = """
        import torch.nn as nn

        class Block(nn.Module):
            def forward(self, x):
                return x

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.block = Block()

            def forward(self, x):
                return self.block(x)

        class Alone(nn.Module):
            def forward(self, x):
                return x

        class Replicated(nn.Module):
            def forward(self, x):
                return x

        class Outer(nn.Module):
            def __init__(self):
                super().__init__()
                self.inner = Replicated()

            def forward(self, x):
                return nn.parallel.data_parallel(self.inner, x, dim=1)

        model = nn.DataParallel(Net().cuda())
    """
    ctx = file_context(text)
    models = {name: ModelClass(ctx, info, frozenset()) for name, info in ctx.classes.items()}
    assert wrap_evidence(models["Net"]) == "wrapped"
    assert models["Net"].wrap_evidence == "wrapped"
    assert wrap_evidence(models["Block"]) == "submodule"
    assert wrap_evidence(models["Alone"]) == "top-level"
    assert wrap_evidence(models["Replicated"]) == "wrapped"  # data_parallel in another forward
    assert ast.unparse(wrapped_batch_dim(models["Replicated"])) == "1"


def test_a_class_that_replicates_its_own_submodule_by_hand_is_a_harness():
    text = """
        import torch.nn as nn
        from torch.nn.parallel.replicate import replicate
        from torch.nn.parallel import parallel_apply, scatter, gather

        class Mlp(nn.Module):
            def forward(self, x):
                return x

        class ByHand(nn.Module):
            def __init__(self):
                super().__init__()
                self.bot = Mlp()

            def forward(self, x):
                replicas = replicate(self.bot, [0, 1])
                return gather(parallel_apply(replicas, scatter(x, [0, 1])), 0)

        class GivenModel(nn.Module):
            def forward(self, model, x):
                return parallel_apply(replicate(model, [0, 1]), scatter(x, [0, 1]))
    """
    ctx = file_context(text)
    models = {name: ModelClass(ctx, info, frozenset()) for name, info in ctx.classes.items()}
    assert parallelises_own_submodule(models["ByHand"]) == "bot"
    assert harness_condition(models["ByHand"]) == "wrapped:m.ByHand"
    assert parallelises_own_submodule(models["GivenModel"]) is None  # replicates an argument, not its own layer
    assert parallelises_own_submodule(models["Mlp"]) is None


def test_in_model_holds_for_wrapped_classes_and_layers_only():
    text = textwrap.dedent("""
        import torch.nn as nn

        class FocalLoss(nn.Module):
            def forward(self, x):
                return x.sum(0)

        class NCECriterion(nn.Module):
            def forward(self, x):
                return x.sum(0)

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.loss = FocalLoss()

        class Alone(nn.Module):
            def forward(self, x):
                return x

        model = nn.DataParallel(Alone().cuda())
        criterion = NCECriterion()
    """)
    from dpcheck.analysis.index import ClassIndex

    index = ClassIndex([analyze_source(text, "m.py", [], "m")])
    assert index.condition("in_model:m.FocalLoss")  # a layer of Net
    assert index.condition("in_model:m.Alone")  # wrapped
    assert not index.condition("in_model:m.NCECriterion")  # built by the script, applied on one device
    assert not index.condition("in_model:m.Net")  # built nowhere: its forward runs on no replica we see


def test_file_result_summarises_builders_wrapped_and_submodules():
    text = textwrap.dedent("""
        import torch.nn as nn
        from .layers import Mlp

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.mlp = Mlp()

        def create_model():
            return nn.DataParallel(Net())
    """)
    result = analyze_source(text, "pkg/models.py", [], "pkg.models")
    assert result.builders == {"pkg.models.create_model": []}
    assert result.wrapped == ["pkg.models.Net"]
    assert result.submodules == ["pkg.layers.Mlp"]
    assert result.layer_owners == {"pkg.layers.Mlp": ["Net"]}
    assert type(result).from_dict(json.loads(json.dumps(result.to_dict()))) == result


def test_builder_reached_through_an_imported_module():
    """`import utils` ... `model = utils.initialize_model(model, device)` is a builder call like
    `from utils import initialize_model`: the name holds a wrapper on condition `builder:` of the same
    dotted name (also through a package module and an `import a.b as c` alias). A call of a
    standard-library or torch module function is not one."""
    ctx = file_context("""
        import os
        import torch
        import utils
        import tools.setup as setup_tools
        from models import factory

        def train(model, device, other):
            model = utils.initialize_model(model, device)
            model.step()
            other = setup_tools.build_model(other)
            other.step()
            net = factory.create_net()
            net.step()
            path = os.path.join("a", "b")
            opt = torch.optim.Adam(model.parameters())
            loss = backward(opt)
    """)
    facts = script_facts(ctx)
    assert {w.name: w.requires for w in facts.wraps} == {
        "model": (frozenset({"builder:utils.initialize_model?[[0,null],[1,null]]"}),),
        "other": (frozenset({"builder:tools.setup.build_model?[[0,null]]"}),),
        "net": (frozenset({"builder:models.factory.create_net?[]"}),),
    }


def test_builder_that_wraps_only_under_its_own_flag():
    """A builder whose every wrapping return runs under a branch on one of its parameters (an `if`
    around the wrap, or an early `return` before it) gives the bare model to a call whose constant
    arguments, or the defaults it leaves, turn that branch off; in this file the call holds no
    wrapper, and another file's call carries its arguments in the ``builder:`` condition, which the
    builder's ``guard:`` entry decides. A flag passed as a variable, or a wrap under no parameter
    test, stays a wrapper."""
    ctx = file_context("""
        import torch.nn as nn

        def create_model(net, device, data_parallel=False):
            if data_parallel:
                net = nn.DataParallel(net)
            return net.to(device)

        def build_pair(net, parallel=True):
            if not parallel:
                return net.cuda(), nn.MSELoss()
            return nn.DataParallel(net).cuda(), nn.MSELoss()

        def always(net, flag):
            net = nn.DataParallel(net)
            if flag:
                net.tag = 1
            return net

        def train(net, flag):
            a = create_model(net, "cuda")
            b = create_model(net, "cuda", True)
            c = create_model(net, "cuda", data_parallel=flag)
            d, loss = build_pair(net, False)
            e, loss = build_pair(net)
            f = always(net, False)
            loss.backward()
    """)
    facts = script_facts(ctx)
    assert sorted(w.name for w in facts.wraps if ctx.enclosing(w.origin, ast.FunctionDef).name == "train") == \
        ["b", "c", "e", "f"]
    assert set(facts.guards) == {"create_model", "build_pair#0"}
    create, pair = facts.guards["create_model"].text(), facts.guards["build_pair#0"].text()
    assert guard_fails(create, '?[[0,null],[1,"\'cuda\'"]]')  # the default, off
    assert not guard_fails(create, '?[[0,null],[1,"\'cuda\'"],[2,"True"]]')
    assert not guard_fails(create, '?[[0,null],[1,"\'cuda\'"],["data_parallel",null]]')  # not a constant
    assert guard_fails(create, '?[[0,null],[1,"\'cuda\'"],["data_parallel","0"]]')
    assert not guard_fails(create, "")  # `*args`: what it passes is not known
    assert guard_fails(pair, '?[[0,null],[1,"False"]]') and not guard_fails(pair, '?[[0,null]]')


def test_builder_condition_carries_the_call_arguments():
    """A builder of another file called with constants: the condition names the function, then what
    the call passes (position or keyword, the constant's text or null), none for `*args`."""
    ctx = file_context("""
        import torch
        from helpers import create_model

        def train(net, opts, flag):
            a = create_model(net, "cuda", data_parallel=False)
            b = create_model(net, flag)
            c = create_model(*opts)
            torch.save(a.state_dict(), "a.pt")
    """)
    assert {w.name: w.requires for w in script_facts(ctx).wraps} == {
        "a": (frozenset({'builder:helpers.create_model?[[0,null],[1,"\'cuda\'"],["data_parallel","False"]]'}),),
        "b": (frozenset({"builder:helpers.create_model?[[0,null],[1,null]]"}),),
        "c": (frozenset({"builder:helpers.create_model"}),),
    }


def test_attribute_read_in_another_method_prefers_the_unconditional_wrap():
    """`self.model` is a builder's value (a wrapper only if the builder wraps) and then, at the end of
    `__init__`, surely a wrapper: read in another method, it is the unconditional wrap."""
    ctx = file_context("""
        import torch
        import torch.nn as nn
        from models import get_model

        class Trainer:
            def __init__(self, n_gpu):
                self.model = get_model()
                if n_gpu > 1:
                    self.model = nn.DataParallel(self.model)

            def save(self, path):
                torch.save(self.model.state_dict(), path)
    """)
    facts = script_facts(ctx)
    assert [w.requires for w in facts.wraps if w.name == "self.model"] == [
        (frozenset({"builder:models.get_model?[]"}),), ()]  # a wrapper only if get_model wraps; then surely one
    read = next(n for n in ctx.nodes(ast.Attribute) if n.attr == "state_dict").value
    wrap = facts.wrap_for(read)
    assert wrap is not None and not wrap.requires and wrap.start == 10


def test_bare_builder_condition_is_the_negation_of_builder():
    """``bare_builder:<function>`` holds where the function returns no wrapper: a factory that wraps, one
    that does not, and one no scanned file defines (unknown: no wrapper is shown)."""
    from dpcheck.analysis.index import ClassIndex
    from dpcheck.analysis.scripts import unless_wrapped

    text = textwrap.dedent("""
        import torch.nn as nn

        def wrapped_model():
            return nn.DataParallel(nn.Linear(2, 2))

        def bare_model():
            return nn.Linear(2, 2)
    """)
    index = ClassIndex([analyze_source(text, "pkg/models.py", [], "pkg.models")])
    for name, wraps in (("pkg.models.wrapped_model", True), ("pkg.models.bare_model", False),
                        ("other.build_model", False)):
        assert index.condition(f"builder:{name}") is wraps
        assert index.condition(f"bare_builder:{name}") is not wraps
    # Only a wrap through builders alone has a negation in the form of `requires`.
    assert unless_wrapped((frozenset({"builder:a.f", "builder:b.g"}),)) == (
        frozenset({"bare_builder:a.f"}), frozenset({"bare_builder:b.g"}))
    assert unless_wrapped((frozenset({"builder:a.f", "dp:a.Wrapper"}),)) is None
    assert unless_wrapped((frozenset({"builder:a.f"}), frozenset({"builder:b.g"}))) is None


def test_classes_in_use_follow_layers_from_the_wrapped_classes_only():
    text = textwrap.dedent("""
        import torch.nn as nn

        class Bank(nn.Module):
            def forward(self, x):
                return x

        class Scorer(nn.Module):
            def __init__(self):
                super().__init__()
                self.bank = Bank()

        class Queue(nn.Module):
            def forward(self, x):
                return x

        class Head(nn.Module):
            def __init__(self):
                super().__init__()
                self.queue = Queue()

        class Encoder(nn.Module):
            def forward(self, x):
                return x

        class Model(nn.Module):
            def __init__(self, encoder):
                super().__init__()
                self.head = Head()
                self.encoder = encoder

        model = nn.DataParallel(Model(Encoder()).cuda())
        scorer = Scorer()
    """)
    from dpcheck.analysis.index import ClassIndex

    result = analyze_source(text, "m.py", [], "m")
    assert result.layer_owners == {"m.Bank": ["Scorer"], "m.Queue": ["Head"], "m.Head": ["Model"],
                                   "m.Encoder": ["Model"]}
    index = ClassIndex([result])
    assert index.unwrapped("Queue") is None  # a layer of a layer of the wrapped Model
    assert index.unwrapped("Encoder") is None  # handed to the wrapped Model's constructor
    assert "`Bank`" in index.unwrapped("Bank")  # a layer only of Scorer, which runs on one device
    assert "`Scorer`" in index.unwrapped("Scorer")


LAYER = """
import torch
import torch.nn as nn


class Pool(nn.Module):
    def forward(self, x):
        return x.sum()
"""

USER = """
import torch.nn as nn

from layers import Pool


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = Pool()

    def forward(self, x):
        return self.pool(x)
"""


def test_output_rules_skip_a_class_another_file_uses_as_a_layer(project):
    (project / "layers.py").write_text(LAYER)
    alone = run_cli("layers.py", "--no-cache", "--output-format", "json", "--select", "DP401", cwd=project)
    assert [f["code"] for f in json.loads(alone.stdout)] == ["DP401"]
    (project / "user.py").write_text(USER)
    both = run_cli(".", "--no-cache", "--output-format", "json", "--select", "DP401", cwd=project)
    # Pool is a layer of Net: not gathered. Net, top-level, returns what Pool's forward returns, 0-dim.
    assert [(Path(f["filename"]).name, f["location"]["row"]) for f in json.loads(both.stdout)] == [("user.py", 13)]
    (project / "train.py").write_text("import torch.nn as nn\nfrom layers import Pool\n"
                                      "model = nn.DataParallel(Pool().cuda())\n")
    wrapped = run_cli(".", "--no-cache", "--output-format", "json", "--select", "DP401", cwd=project)
    assert sorted(Path(f["filename"]).name for f in json.loads(wrapped.stdout)) == ["layers.py", "user.py"]


ENCODER_ON_BASE = '''
import torch.nn as nn
from {base_module} import BaseEncoder


class Encoder(BaseEncoder):
    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(4, 4, batch_first=True)

    def forward(self, packed):
        out, _ = self.rnn(packed)
        return nn.utils.rnn.pad_packed_sequence(out, batch_first=True)[0]
'''

SUBCLASS = '''
import torch.nn as nn
from enc import Encoder


class Deeper(Encoder):
    def forward(self, packed):
        return nn.utils.rnn.pad_packed_sequence(self.rnn(packed)[0], batch_first=True)[0]
'''


def _dp405_rows(project, *extra):
    proc = run_cli(".", "--no-cache", "--isolated", "--output-format", "json", "--select", "DP405", *extra,
                   cwd=project)
    assert proc.returncode in (0, 1), proc.stderr
    return sorted((f["filename"].rsplit("/", 1)[-1], f["location"]["row"]) for f in json.loads(proc.stdout))


def test_a_class_that_reads_like_a_module_on_an_unscanned_base_is_checked(project):
    """The base's file is not in the scan: the class (forward, torch.nn layers) is taken for a
    module, and so is its subclass in another file."""
    (project / "enc.py").write_text(ENCODER_ON_BASE.format(base_module="external.encoders"))
    (project / "deeper.py").write_text(SUBCLASS)
    assert _dp405_rows(project) == [("deeper.py", 8), ("enc.py", 13)]


def test_a_scanned_base_that_is_no_module_decides(project):
    """When the base is in the scan and is a plain class, reading like a module is not enough."""
    (project / "enc.py").write_text(ENCODER_ON_BASE.format(base_module="base"))
    (project / "deeper.py").write_text(SUBCLASS)
    (project / "base.py").write_text("class BaseEncoder:\n    def forward(self, x):\n        return x\n")
    assert _dp405_rows(project) == []
    (project / "base.py").write_text("import torch.nn as nn\n\n\nclass BaseEncoder(nn.Module):\n    pass\n")
    assert _dp405_rows(project) == [("deeper.py", 8), ("enc.py", 13)]


def test_reading_like_a_module_needs_forward_and_a_torch_nn_name():
    ctx = file_context("""
        import torch.nn as nn
        from ext import Base

        class Layered(Base):
            kinds = {"lstm": nn.LSTM}
            def forward(self, x):
                return x

        class Registered(Base):
            def __init__(self):
                self.register_buffer("b", None)
            def forward(self, x):
                return x

        class NoForward(Base):
            layer = nn.Linear

        class NoTorch(Base):
            def forward(self, x):
                return x
    """)
    unknown = {name: any(n.startswith("unknown:") for n in ctx.class_is_module(name)[1])
               for name in ("Layered", "Registered", "NoForward", "NoTorch")}
    assert unknown == {"Layered": True, "Registered": True, "NoForward": False, "NoTorch": False}


SEQ_MODEL = '''
import torch.nn as nn


class TimeMajor(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(4, 4)

    def forward(self, x):
        return self.lstm(x)[0]
'''


def test_a_class_wrapped_with_another_dim_in_another_file_has_that_batch_dim(project):
    """`DataParallel(Model(), dim=1)` in a script makes dim 1 the batch of Model (defined elsewhere):
    its sequence-first layers see whole sequences. dim=0 changes nothing."""
    (project / "seq.py").write_text(SEQ_MODEL)

    def rows(script):
        (project / "train.py").write_text("import torch.nn as nn\nfrom seq import TimeMajor\n" + script)
        proc = run_cli(".", "--no-cache", "--isolated", "--output-format", "json", "--select", "DP501", cwd=project)
        assert proc.returncode in (0, 1), proc.stderr
        return [(f["filename"].rsplit("/", 1)[-1], f["location"]["row"]) for f in json.loads(proc.stdout)]

    assert rows("model = nn.DataParallel(TimeMajor(), dim=0)\n") == [("seq.py", 11)]
    assert rows("model = nn.DataParallel(TimeMajor(), dim=1)\n") == []
    assert rows("model = nn.DataParallel(TimeMajor().cuda(), device_ids=[0, 1], dim=1)\n") == []


def _project(tmp_path, files):
    for name, text in files.items():
        (tmp_path / name).write_text(textwrap.dedent(text))
    findings, _ = run_json(tmp_path, "--select", "DP101", "--isolated")
    return {f["location"]["row"]: f for f in findings}


_MODELS = """
    import torch.nn as nn

    class Wrapped(nn.Module):
        def __init__(self):
            super().__init__()
            self.steps = 0

        def forward(self, x):
            self.steps += 1
            return x

    class Unused(nn.Module):
        def __init__(self):
            super().__init__()
            self.steps = 0

        def forward(self, x):
            self.steps += 1
            return x
"""


# The models file of a project that names its classes in a table (so no class is one that no scanned
# file names, which is advice whatever is wrapped: dpcheck.analysis.mentions).
_MODELS_NAMED = _MODELS + """
    CATALOGUE = [Wrapped, Unused]
"""


def test_hazards_of_a_class_the_project_never_wraps_are_advice(tmp_path):
    # The script's only wrap site is traced to Wrapped: Unused's code never runs on a replica.
    by_row = _project(tmp_path, {"models.py": _MODELS, "train.py": """
        import torch.nn as nn
        from models import Wrapped
        model = nn.DataParallel(Wrapped())
    """})
    assert by_row[10]["severity"] == "error"
    assert by_row[19]["severity"] == "info" and "no scanned file wraps `Unused`" in by_row[19]["message"]


def test_a_lowercase_class_of_another_file_is_traced_as_wrapped(tmp_path):
    # MEAL-V2's `nn.DataParallel(discriminatorLoss(d))`: a lower-case name imported from another
    # file is recorded as wrapped; the index takes it for the class it is, so the site is traced.
    by_row = _project(tmp_path, {"models.py": _MODELS.replace("class Wrapped", "class wrappedNet"),
                                 "train.py": """
        import torch.nn as nn
        from models import wrappedNet
        crit = wrappedNet().cuda()
        crit = nn.DataParallel(crit)
    """})
    assert by_row[10]["severity"] == "error"
    assert by_row[19]["severity"] == "info" and "no scanned file wraps `Unused`" in by_row[19]["message"]
    result = analyze_source(textwrap.dedent("""
        import torch.nn as nn
        from models import wrappedNet
        crit = nn.DataParallel(wrappedNet().cuda())
    """), "train.py", [], "train")
    assert result.wrapped == ["models.wrappedNet"] and not result.unresolved_wraps


def test_no_advice_demotion_without_wrap_sites_or_with_an_untraced_one(tmp_path):
    # Only the models (a library, a pre-commit run of one file): nothing says what is wrapped.
    alone = _project(tmp_path, {"models.py": _MODELS})
    assert {f["severity"] for f in alone.values()} == {"error"}
    # A wrap site whose class is chosen at run time may wrap any class the project names...
    opaque_wrap = """
        import torch.nn as nn
        from models import Wrapped, build
        first = nn.DataParallel(Wrapped())
        second = nn.DataParallel(build())
    """
    opaque = _project(tmp_path, {"models.py": _MODELS_NAMED, "train.py": opaque_wrap})
    assert {f["severity"] for f in opaque.values()} == {"error"}
    # ...but not one that no scanned file names, where none looks a class up by a computed name.
    unnamed = _project(tmp_path, {"models.py": _MODELS, "train.py": opaque_wrap})
    assert unnamed[10]["severity"] == "error"
    assert unnamed[19]["severity"] == "info" and "no scanned file names `Unused`" in unnamed[19]["message"]
    # A wrapped class from outside the scanned files (a library model) may build any class as a layer.
    library = _project(tmp_path, {"models.py": _MODELS_NAMED, "train.py": """
        import torch.nn as nn
        from models import Wrapped
        from torchvision.models import resnet18
        first = nn.DataParallel(Wrapped())
        second = nn.DataParallel(resnet18())
    """})
    assert {f["severity"] for f in library.values()} == {"error"}


def _summary(text, module="m"):
    return analyze_source(textwrap.dedent(text), f"{module}.py", [], module)


def test_function_returns_summarise_builders_whose_every_return_is_traced():
    returns = _summary("""
        import torch.nn as nn
        from nets import Backbone, Head, make_trunk

        class Local(nn.Module):
            pass

        def branches(p):
            model = None
            if p.kind == "a":
                model = Head(Backbone())
            elif p.kind == "b":
                model = Local()
            return model.cuda() if p.cuda else model

        def nested(p):
            return make_trunk(p)

        def through_local(p):
            return branches(p)

        def from_parameter(model):
            return model.cuda()

        def from_library():
            return nn.Linear(4, 4)

        def by_name(models, arch):
            return getattr(models, arch)()

        def loops(models):
            for model in models:
                pass
            return model

        def sometimes_untraced(p, net):
            if p:
                return Local()
            return net

        def imported_in_branches(p):
            if p.cifar:
                from models.resnet_cifar import resnet18
            else:
                from models.resnet_stl import resnet18
            return Head(resnet18())

        def imported_relatively_twice(p):
            if p.cifar:
                from .cifar import resnet
            else:
                from .stl import resnet
            return resnet()
    """).returns
    assert returns == {
        "m.branches": ["m.Local", "nets.Head", "part:nets.Backbone"],
        "m.nested": ["call:nets.make_trunk"],
        "m.through_local": ["m.Local", "nets.Head", "part:nets.Backbone"],
        # Either import may bind the name at the call: both are candidates.
        "m.imported_in_branches": ["nets.Head", "part:call:models.resnet_cifar.resnet18",
                                   "part:call:models.resnet_stl.resnet18"],
    }


def test_a_builder_that_other_builders_return_is_traced_once_per_depth(monkeypatch):
    """timm's registered builders (`resnet18`, `resnet50`, ...) all return one private builder: its
    returns are traced once for each depth it is reached at, and each caller gets a list of its own."""
    from dpcheck.analysis import wrapping

    traced = []
    real = wrapping._trace_returns

    def counting(fn, ctx, depth):
        traced.append((fn.name, depth))
        return real(fn, ctx, depth)

    monkeypatch.setattr(wrapping, "_trace_returns", counting)
    text = """
        import torch.nn as nn
        from nets import Backbone

        class Net(nn.Module):
            pass

        def _create(p):
            return Net(Backbone())
    """ + "".join(f"""
        def net{i}(p):
            return _create(p)
    """ for i in range(5))
    ctx = file_context(text)
    returns = wrapping.function_returns(ctx)
    assert returns == {f"m.{name}": ["m.Net", "part:nets.Backbone"] for name in ["_create"] + [f"net{i}" for i in range(5)]}
    assert sorted(traced) == sorted([("_create", 0), ("_create", 1)] + [(f"net{i}", 0) for i in range(5)])
    first = wrapping._returns_of(ctx.module_functions["_create"], ctx, 1)
    first.append("changed")
    assert wrapping._returns_of(ctx.module_functions["_create"], ctx, 1) == ["m.Net", "part:nets.Backbone"]


def test_wrap_candidates_of_builders_and_registries_and_what_stays_unresolved():
    result = _summary("""
        import torch
        import torch.nn as nn
        import torchvision.models as models
        from builders import get_model
        from modeling import ConfigA, ModelA, ModelB

        MODEL_CLASSES = {"a": (ConfigA, ModelA), "b": (ConfigA, ModelB)}
        NETS = {"a": ModelA, "b": ModelB}

        def main(args):
            config_class, model_class = MODEL_CLASSES[args.model_type]
            model = model_class.from_pretrained(args.path, config=config_class())
            model = nn.DataParallel(model)
            first = nn.DataParallel(get_model(args).cuda())
            second = nn.DataParallel(NETS[args.arch]())
            third = nn.DataParallel(getattr(models, args.arch)())
            fourth = nn.DataParallel(models.__dict__[args.arch]())
            fifth = nn.DataParallel(torch.hub.load("repo", args.arch))
            return model, first, second, third, fourth, fifth
    """)
    assert result.wrap_candidates == [
        ["modeling.ModelA", "modeling.ModelB"],  # (from_pretrained builds its parts from a config)
        ["modeling.ModelA", "modeling.ModelB"],
    ]
    # An imported lower-case call is recorded as wrapped (it may be a class): not a candidate site.
    assert "builders.get_model" in result.wrapped
    assert len(result.unresolved_wraps) == 3


def test_a_wrapped_parameter_is_what_the_file_passes_for_it():
    # transformers' run_*.py: `train(args, model)` wraps its parameter; main builds it from a registry.
    script = """
        import torch.nn as nn
        from apex import amp
        from modeling import ModelA, ModelB

        MODEL_CLASSES = {"a": ModelA, "b": ModelB}

        def train(args, model, optimizer=None):
            model, optimizer = amp.initialize(model, optimizer)
            model = nn.DataParallel(model)
            return model

        def main(args):
            model_class = MODEL_CLASSES[args.model_type]
            model = model_class.from_pretrained(args.path)
            train(args, model)
    """
    assert _summary(script).wrap_candidates == [["modeling.ModelA", "modeling.ModelB"]]
    # Any other use of the function, or a call passing a parameter of another function: what every
    # scanned call passes, which the project index settles (handed.handed_calls; unknown where the
    # function is used otherwise, or `again` has no scanned caller: see test_wrap_tracing).
    assert _summary(script + """
        callbacks = [train]
    """).wrap_candidates == [["handed:m.train@model#1"]]
    assert _summary(script + """
        def again(args, net):
            train(args, net)
    """).wrap_candidates == [["handed:m.again@net#1", "modeling.ModelA", "modeling.ModelB"]]



def test_a_store_into_an_attribute_of_the_wrapped_name_does_not_rebind_it():
    # Oscar's run_vqa.py: `model.loss_type = 'bce'` and `model.dropout.p = 0.3` in the training
    # loop change the object `model` holds, not what it holds: the wrap site is still traced.
    script = """
        import torch.nn as nn
        from modeling import ModelA, ModelB

        MODEL_CLASSES = {"a": ModelA, "b": ModelB}

        def train(args, model):
            model = nn.DataParallel(model)
            for epoch in range(3):
                model.dropout.p = 0.3
                model.loss_type = "bce"
                model.steps += 1
                model.heads[0], other = None, None
            return model

        def main(args):
            model = MODEL_CLASSES[args.model_type].from_pretrained(args.path)
            train(args, model)
    """
    result = _summary(script)
    assert result.wrap_candidates == [["modeling.ModelA", "modeling.ModelB"]] and not result.unresolved_wraps
    # Rebinding the name itself (alone, in a tuple, starred) to what is not traced still leaves it unknown.
    for rebinding in ("model, other = load(args)", "other, *model = load(args)", "[model] = load(args)",
                      "for model in load(args): pass", "model += load(args)"):
        assert _summary(script.replace('model.loss_type = "bce"', rebinding)).unresolved_wraps == [8], rebinding


def test_a_wrap_through_a_builder_of_another_file_demotes_only_classes_it_cannot_return(tmp_path):
    models = _MODELS_NAMED + """
    def build(p):
        return Wrapped() if p else Wrapped()
    """
    found = _project(tmp_path, {"models.py": models, "train.py": """
        import torch.nn as nn
        from models import build
        model = nn.DataParallel(build(True))
    """})
    assert found[10]["severity"] == "error"
    assert found[19]["severity"] == "info"
    # A builder with a return that is not traced may return any class: no demotion.
    (tmp_path / "models.py").write_text(textwrap.dedent(models + """
    def build_any(p, net):
        return Wrapped() if p else net
    """))
    untraced = _project(tmp_path, {"train.py": """
        import torch.nn as nn
        from models import build_any
        model = nn.DataParallel(build_any(True, None))
    """})
    assert {f["severity"] for f in untraced.values()} == {"error"}


def test_a_library_class_wrapped_from_plain_options_runs_no_scanned_code(tmp_path):
    # torchaudio's `DataParallel(WaveRNN(...))`, and a torch layer wrapped in place: no scanned
    # class runs under DataParallel, so a class nothing wraps gives advice only.
    wrap = """
        import torch.nn as nn
        from vocoderlib.models import WaveRNN
        def main(args):
            n_classes = 2 ** args.bits if args.mol else 30
            model = nn.DataParallel(WaveRNN(n_hidden=args.hidden, n_classes=n_classes, scales=[5, 5]))
            probe = nn.DataParallel(nn.Linear(args.hidden, 2))
    """
    found = _project(tmp_path, {"models.py": _MODELS_NAMED, "train.py": wrap})
    assert [f["severity"] for f in found.values()] == ["info", "info"]
    # What runs stays unknown where the class may be the project's or may run the project's code:
    # its module is a file of the project left out of the run, a relative import names it, or its
    # constructor is handed a module instance (a scanned one, or a parameter that may be one).
    (tmp_path / "vocoderlib").mkdir()
    (tmp_path / "vocoderlib" / "__init__.py").write_text("")
    (tmp_path / "vocoderlib" / "models.py").write_text(textwrap.dedent(_MODELS_NAMED.replace("Unused", "WaveRNN")))
    findings, _ = run_json(tmp_path / "models.py", tmp_path / "train.py", "--select", "DP101", "--isolated")
    assert {f["severity"] for f in findings} == {"error"}
    (tmp_path / "vocoderlib" / "models.py").unlink()
    # A package of the project (a folder of scanned files) whose module was left out: not a library.
    (tmp_path / "vocoderlib" / "__init__.py").unlink()
    (tmp_path / "vocoderlib" / "layers.py").write_text(textwrap.dedent(_MODELS_NAMED.replace("Unused", "Conv")))
    found = _project(tmp_path, {"models.py": _MODELS_NAMED, "train.py": wrap})
    assert {f["severity"] for f in found.values()} == {"error"}
    (tmp_path / "vocoderlib" / "layers.py").unlink()
    for variant in (wrap.replace("from vocoderlib.models", "from .vocoder"),
                    wrap.replace("n_hidden=args.hidden", "encoder=Wrapped()").replace(
                        "import WaveRNN", "import WaveRNN\n        from models import Wrapped"),
                    wrap.replace("def main(args)", "def main(args, encoder)").replace("n_hidden=args.hidden", "encoder")):
        found = _project(tmp_path, {"models.py": _MODELS_NAMED, "train.py": variant})
        assert {f["severity"] for f in found.values()} == {"error"}, variant


def test_a_layer_of_a_wrapped_class_keeps_its_severity(tmp_path):
    found = _project(tmp_path, {"models.py": _MODELS + """
    class Holder(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = Unused()
    """, "train.py": """
        import torch.nn as nn
        from models import Holder, Wrapped
        model = nn.DataParallel(Holder()) if True else nn.DataParallel(Wrapped())
    """})
    assert {f["severity"] for f in found.values()} == {"error"}


def test_child_classes_built_in_another_class_or_by_a_builder_a_class_calls():
    from dpcheck.analysis.outputs import child_classes

    ctx = file_context("""
        import torch.nn as nn
        from lib import Imported

        class Block(nn.Module):
            def forward(self, x):
                return x

        class Head(nn.Module):
            def forward(self, x):
                return x

        class Orphan(nn.Module):
            def forward(self, x):
                return x

        class Recursive(nn.Module):
            def __init__(self):
                super().__init__()
                self.again = Recursive() if False else None

        def build_head():
            return Head()

        def build_orphan():
            return Orphan()

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.block = Block()
                self.head = build_head()
                self.other = Imported(len([1]))

        net = Orphan()
    """)
    # Block: built in Net; Head: by a builder Net calls. Orphan: only at module level and by a
    # builder no class calls; Recursive builds only itself.
    assert child_classes(ctx) == frozenset({"Block", "Head"})


def test_whether_a_file_names_dataparallel_is_one_fact_of_the_file():
    from dpcheck.analysis.wrapping import mentions_script_token

    assert mentions_script_token(file_context("import torch\nm = torch.nn.DataParallel(net)\n"))
    assert mentions_script_token(file_context("y = torch.nn.parallel.data_parallel(net, x)\n"))
    assert not mentions_script_token(file_context("import torch\nclass Net(torch.nn.Module):\n    pass\n"))


def test_a_folder_without_init_imported_as_a_package_is_the_scanned_file(tmp_path):
    # `onmt/models.py` is scanned as module `models` (no `onmt/__init__.py`), while train.py imports
    # it as `onmt.models`: both names must reach the same classes, so the dim=1 wrap of Seq2Seq and
    # the encoder given to its constructor settle the findings of models.py.
    (tmp_path / "onmt").mkdir()
    (tmp_path / "onmt" / "models.py").write_text(textwrap.dedent("""
        import torch.nn as nn

        class Encoder(nn.Module):
            def __init__(self):
                super().__init__()
                self.rnn = nn.LSTM(8, 8)

            def forward(self, x):
                out, h_n = self.rnn(x)
                return h_n, out

        class Seq2Seq(nn.Module):
            def __init__(self, encoder):
                super().__init__()
                self.encoder = encoder
                self.rnn = nn.LSTM(8, 8)

            def forward(self, x):
                _, out = self.encoder(x)
                out, _ = self.rnn(out)
                return out
    """))
    script = """
        import torch.nn as nn
        import onmt.models

        encoder = onmt.models.Encoder()
        model = onmt.models.Seq2Seq(encoder)
        model = nn.DataParallel(model, dim={dim})
    """
    (tmp_path / "train.py").write_text(textwrap.dedent(script.format(dim=1)))
    findings, _ = run_json(tmp_path, "--select", "DP404,DP501", "--isolated", "--no-cache")
    assert findings == []
    # Wrapped along dim 0, the time-major model is reported; the encoder inside it is not.
    (tmp_path / "train.py").write_text(textwrap.dedent(script.format(dim=0)))
    findings, _ = run_json(tmp_path, "--select", "DP404,DP501", "--isolated", "--no-cache")
    assert {(f["location"]["row"], f["code"]) for f in findings} == {(21, "DP501")}


def test_dp501_reads_a_batch_first_option_as_the_class_is_built(tmp_path):
    """`nn.GRU(..., batch_first=batch_first)` from a constructor parameter that defaults to True
    (PyHealth's Dipole/Retain predictors, built from a config dict) is batch-first as built; one
    that defaults to False, or that a construction in the file sets False, is sequence-first. A
    required one every construction in its file passes True for is reported only where another
    scanned file builds the class (it may pass False there)."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "models.py").write_text(textwrap.dedent("""
        import torch.nn as nn


        class Predictor(nn.Module):
            def __init__(self, hidden=8, batch_first=True):
                super().__init__()
                self.rnn = nn.GRU(4, hidden, batch_first=batch_first)

            def forward(self, x):
                out, _ = self.rnn(x)
                return out


        class Required(nn.Module):
            def __init__(self, batch_first):
                super().__init__()
                self.rnn = nn.GRU(4, 8, batch_first=batch_first)

            def forward(self, x):
                out, _ = self.rnn(x)
                return out


        def build(config):
            return Predictor(**config), Required(True)
    """))
    script = """
        import torch.nn as nn
        from pkg.models import Predictor{extra}

        model = nn.DataParallel(Predictor(hidden=16{flag}))
    """
    (tmp_path / "train.py").write_text(textwrap.dedent(script.format(extra="", flag="")))
    findings, _ = run_json(tmp_path, "--select", "DP501", "--isolated", "--no-cache")
    assert findings == []
    # Defaulting to False, the layer is sequence-first as built.
    models = tmp_path / "pkg" / "models.py"
    models.write_text(models.read_text().replace("hidden=8, batch_first=True", "hidden=8, batch_first=False"))
    findings, _ = run_json(tmp_path, "--select", "DP501", "--isolated", "--no-cache")
    assert {(f["location"]["row"], f["code"]) for f in findings} == {(11, "DP501")}
    # The required option: read off this file's constructions (all True, one wrapped here) until another
    # file builds the class.
    models.write_text(models.read_text().replace("hidden=8, batch_first=False", "hidden=8, batch_first=True")
                      + "\n\nwrapped = nn.DataParallel(Required(batch_first=True))\n")
    findings, _ = run_json(tmp_path, "--select", "DP501", "--isolated", "--no-cache")
    assert findings == []
    (tmp_path / "train.py").write_text(textwrap.dedent(script.format(extra=", Required", flag=""))
                                       + "other = nn.DataParallel(Required(False))\n")
    findings, _ = run_json(tmp_path, "--select", "DP501", "--isolated", "--no-cache")
    assert {(f["location"]["row"], f["code"]) for f in findings} == {(21, "DP501")}


REGRESSION = """
import torch
import torch.nn as nn


class disparityregression(nn.Module):
    def __init__(self, maxdisp):
        super().__init__()
        self.disp = torch.arange(maxdisp).float().view(1, maxdisp).cuda()

    def forward(self, x):
        return torch.sum(x * self.disp, 1, keepdim=True)
"""

PER_CALL_USER = """
import torch.nn as nn
from .submodule import *


class Stereo(nn.Module):
    def __init__(self, maxdisp):
        super().__init__()
        self.maxdisp = maxdisp

    def forward(self, x):
        return disparityregression(self.maxdisp)(x)
"""


def test_file_result_records_classes_built_per_call_and_elsewhere():
    text = textwrap.dedent(PER_CALL_USER) + textwrap.dedent("""
        import layers

        def helper(x):
            return x

        def build():
            return Stereo(4), helper(1), layers.Head(2), nn.Linear(2, 2)
    """)
    result = analyze_source(text, "pkg/stereo.py", [rules_by_code()["DP201"]()], "pkg.stereo")
    assert result.built_per_call == ["disparityregression"]
    # Module functions (helper, build), torch's classes and builtins (`super`) are not recorded.
    assert result.built_elsewhere == ["Head", "Stereo"]
    assert type(result).from_dict(json.loads(json.dumps(result.to_dict()))) == result
    assert analyze_source(text, "pkg/stereo.py", [], "pkg.stereo").built_per_call == []  # a module summary


def test_a_class_built_only_inside_forward_keeps_no_shared_device_state(project):
    """PSMNet: `disparityregression(self.maxdisp)(pred)` in a forward (through a star import):
    each replica builds its own on its own thread, where its device is current. Built anywhere
    else too (an `__init__`, a script), that instance's plain tensor is shared: DP201 again."""
    (project / "__init__.py").write_text("")
    (project / "submodule.py").write_text(REGRESSION)

    def rows():
        proc = run_cli(".", "--no-cache", "--isolated", "--output-format", "json", "--select", "DP201", cwd=project)
        assert proc.returncode in (0, 1), proc.stderr
        return [(f["filename"].rsplit("/", 1)[-1], f["location"]["row"]) for f in json.loads(proc.stdout)]

    assert rows() == [("submodule.py", 9)]  # nothing builds it: a class users may build anywhere
    (project / "stereo.py").write_text(PER_CALL_USER)
    assert rows() == []
    (project / "refine.py").write_text("import torch.nn as nn\nfrom . import submodule\n\n\n"
                                       "class Refine(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                                       "        self.reg = submodule.disparityregression(4)\n\n"
                                       "    def forward(self, x):\n        return self.reg(x)\n")
    assert rows() == [("submodule.py", 9)]


def test_a_wrap_traced_through_a_builder_function_or_to_a_lowercase_class_of_the_file():
    text = textwrap.dedent("""
        import torch.nn as nn

        class alexnet(nn.Module):
            def forward(self, x):
                return x

        class ResNet(nn.Module):
            def forward(self, x):
                return x

        def resnet50(pretrained=False, **kwargs):
            model = ResNet(**kwargs)
            if pretrained:
                model.load_state_dict({})
            return model

        def opaque(name):
            return registry[name]()

        class Small(nn.Module):
            def __init__(self):
                super().__init__()
                self.encoder = nn.DataParallel(alexnet())

        class Big(nn.Module):
            def __init__(self):
                super().__init__()
                self.encoder = resnet50(width=2)
                self.encoder = nn.DataParallel(self.encoder)

        class Other(nn.Module):
            def __init__(self):
                super().__init__()
                self.encoder = nn.DataParallel(opaque("x"))
    """)
    result = analyze_source(text, "models.py", [], "models")
    assert result.wrapped == ["models.ResNet", "models.alexnet"]
    assert len(result.unresolved_wraps) == 1  # opaque(): what its returns are is not known


def test_a_script_that_does_not_parse_and_names_dataparallel_is_an_untraced_wrap(tmp_path):
    # A script that cannot be read may wrap any class: no demotion to advice.
    found = _project(tmp_path, {"models.py": _MODELS, "train.py": """
        import torch.nn as nn
        from models import Wrapped
        model = nn.DataParallel(Wrapped())
    """, "old_train.py": """
        import torch.nn as nn
        from models import Unused
        model = nn.DataParallel(Unused().cuda(async=True))
    """})
    assert found[10]["severity"] == found[19]["severity"] == "error"
    quiet = _project(tmp_path, {"old_train.py": """
        print "no wrap here"
    """})
    assert quiet[19]["severity"] == "info"



def test_loss_module_output_is_gathered_only_where_a_file_wraps_it():
    text = textwrap.dedent("""
        import torch.nn as nn

        class LossWrapper(nn.Module):
            def __init__(self, model):
                super().__init__()
                self.model = model
                self.crit = nn.CrossEntropyLoss()

            def forward(self, x, y):
                return self.crit(self.model(x), y)
    """)
    from dpcheck.analysis.outputs import gathered_class

    ctx = file_context(text)
    model = ModelClass(ctx, ctx.classes["LossWrapper"], frozenset())
    assert not gathered_class(model, cross_file=False)  # no condition recorded: not counted on
    assert not model.conditions
    assert gathered_class(model)
    assert model.conditions == {"wrapped:m.LossWrapper"}


def test_holds_weights_follows_bases_and_built_classes_across_files():
    criteria = textwrap.dedent("""
        import torch
        import torch.nn as nn

        class Smoothing(nn.Module):
            def __init__(self, eps):
                super().__init__()
                self.eps = eps
                self.kl = nn.KLDivLoss()

            def forward(self, x, y):
                return self.kl(x, y)

        class Learned(nn.Module):
            def __init__(self):
                super().__init__()
                self.register_buffer("counts", torch.zeros(3))

            def forward(self, x):
                return x * self.counts

        class Config:
            def __init__(self, eps):
                self.eps = eps
    """)
    wrappers = textwrap.dedent("""
        import copy
        import torch
        import torch.nn as nn
        from pkg.criteria import Smoothing, Learned
        from pkg.elsewhere import Unscanned

        class Holder(nn.Module):
            def __init__(self, model, opt):
                super().__init__()
                self.model = model
                self.ref = copy.deepcopy(model)
                self.crit = Smoothing(getattr(opt, "eps", 0.1))

            def forward(self, x, y):
                return self.crit(self.model(x), y)

        class Scaled(nn.Module):
            def __init__(self, model):
                super().__init__()
                self.model = model
                self.bias = Bias()

            def forward(self, x):
                return self.bias(self.model(x))

        class Bias(nn.Module):
            def __init__(self):
                super().__init__()
                self.b = nn.Parameter(torch.zeros(1))

            def forward(self, x):
                return x + self.b

        class HoldsLearned(nn.Module):
            def __init__(self, model):
                super().__init__()
                self.model = model
                self.crit = Learned()

            def forward(self, x):
                return x

        class SubOfLearned(Learned):
            def __init__(self, model):
                super().__init__()
                self.model = model

            def forward(self, x):
                return x

        class HoldsUnscanned(nn.Module):
            def __init__(self, model):
                super().__init__()
                self.crit = Unscanned()

            def forward(self, x):
                return x

        class Built(nn.Module):
            def __init__(self, cfg):
                super().__init__()
                self.body = build_body(cfg)

            def forward(self, x):
                return x
    """)
    from dpcheck.analysis.index import ClassIndex

    index = ClassIndex([analyze_source(criteria, "pkg/criteria.py", [], "pkg.criteria"),
                        analyze_source(wrappers, "pkg/wrappers.py", [], "pkg.wrappers")])
    assert not index.condition("holds_weights:pkg.wrappers.Holder")
    assert not index.condition("holds_weights:pkg.criteria.Smoothing")
    assert index.condition("holds_weights:pkg.criteria.Learned")  # a buffer
    assert index.condition("holds_weights:pkg.wrappers.HoldsLearned")  # a class it builds holds one
    assert index.condition("holds_weights:pkg.wrappers.SubOfLearned")  # a base holds one
    assert index.condition("holds_weights:pkg.wrappers.HoldsUnscanned")  # not scanned: may hold any
    assert index.condition("holds_weights:pkg.wrappers.Built")  # a builder function may return layers
    assert index.condition("holds_weights:pkg.wrappers.Scaled")  # builds a class of its file that holds one
    assert index.condition("holds_weights:pkg.criteria.Config")  # no forward: not a model, not recorded


def test_wrapper_passes_reads_the_calls_made_through_the_wrapper():
    text = textwrap.dedent("""
        import torch
        import torch.nn as nn

        class Tagger(nn.Module):
            def forward(self, x, mask=None, labels=None):
                return x

        class Scorer(nn.Module):
            def forward(self, x, labels=None):
                return x

        def train(loader):
            model = Tagger().cuda()
            model(loader, None, None)  # before the wrap: not a call of the wrapper
            model = nn.DataParallel(model)
            if hasattr(model, "module"):
                pass
            loss = model(loader, mask=None, labels=loader)
            logits = model(loader, None)  # the mask passed positionally as None

        def score(loader):
            scorer = nn.DataParallel(Scorer().cuda())
            logits = scorer(loader, labels=None)
            return logits
    """)
    from dpcheck.analysis.index import ClassIndex

    result = analyze_source(text, "m.py", [], "m")
    assert result.wrapper_calls == {"m.Tagger": ["#1,labels", "#2,-1"], "m.Scorer": ["#1"]}
    index = ClassIndex([result])
    assert index.condition("wrapper_passes:m.Tagger:labels@2")  # by keyword
    assert not index.condition("wrapper_passes:m.Tagger:mask@1")  # passed as None
    assert index.condition("wrapper_passes:m.Tagger:x@0")  # positionally
    assert not index.condition("wrapper_passes:m.Scorer:labels@1")
    handed = text.replace("    return logits", "    return scorer")
    assert analyze_source(handed, "m.py", [], "m").wrapper_calls["m.Scorer"] == ["#1", "*"]


_POOLED_BN = """
    import torch.nn as nn

    class ImagePooling(nn.Module):
        def __init__(self, channels):
            super().__init__()
            self.branch = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(channels, 8, 1),
                                        nn.BatchNorm2d(8), nn.ReLU())

        def forward(self, x):
            return self.branch(x)
"""

_TRAIN_SCRIPT = """
    import torch.nn as nn
    from torch.utils.data import DataLoader
    from models import ImagePooling

    def main(dataset):
        model = nn.DataParallel(ImagePooling(3).cuda())
        loader = DataLoader(dataset, batch_size=8, shuffle=True{drop})
        for x in loader:
            model(x.cuda()).sum().backward()
"""


def test_a_pooled_batchnorm_is_a_warning_unless_every_wrapping_script_drops_the_last_batch(tmp_path):
    def dp604(files):
        for name, text in files.items():
            (tmp_path / name).write_text(textwrap.dedent(text))
        findings, _ = run_json(tmp_path, "--select", "DP604", "--isolated")
        return [(f["filename"].rsplit("/", 1)[-1], f["location"]["row"], f["severity"]) for f in findings]

    # The loader keeps the partial last batch: a replica can get one sample.
    assert dp604({"models.py": _POOLED_BN, "train.py": _TRAIN_SCRIPT.format(drop="")}) == \
        [("models.py", 8, "warning")]
    # The only script that wraps the model drops it: the last batch never runs.
    assert dp604({"train.py": _TRAIN_SCRIPT.format(drop=", drop_last=True")}) == []
    # drop_last=False keeps it, as does a second wrapping script whose loader is built elsewhere.
    assert dp604({"train.py": _TRAIN_SCRIPT.format(drop=", drop_last=False")}) == [("models.py", 8, "warning")]
    assert dp604({"train.py": _TRAIN_SCRIPT.format(drop=", drop_last=True"),
                  "finetune.py": "import torch.nn as nn\nfrom models import ImagePooling\n"
                                 "model = nn.DataParallel(ImagePooling(3))\n"}) == [("models.py", 8, "warning")]


def test_a_pooled_batchnorm_asks_only_the_loaders_of_the_scripts_that_wrap_its_class(tmp_path):
    def dp604(files):
        for name, text in files.items():
            (tmp_path / name).write_text(textwrap.dedent(text))
        findings, _ = run_json(tmp_path, "--select", "DP604", "--isolated")
        return [(f["filename"].rsplit("/", 1)[-1], f["location"]["row"]) for f in findings]

    other = "import torch.nn as nn\nfrom torch.utils.data import DataLoader\n" \
            "model = nn.DataParallel({model})\nloader = DataLoader([], batch_size=8)\n"
    # dgcnn: the script that wraps the class drops the last batch; another script keeps it for
    # another model (a class of its own file), which cannot hand this class a partial batch.
    assert dp604({"models.py": _POOLED_BN, "train.py": _TRAIN_SCRIPT.format(drop=", drop_last=True"),
                  "segment.py": other.format(model="Segmenter()") + "class Segmenter(nn.Module):\n    pass\n"}) == []
    # A wrap the scan cannot trace to a class may be of this one: the project-wide answer stands.
    assert dp604({"segment.py": "from builders import build\n" + other.format(model="build(cfg)")}) == \
        [("models.py", 8)]
    assert dp604({"segment.py": other.format(model="net").replace("model =", "def main(net):\n    model =")}) == \
        [("models.py", 8)]


_TEST_SCRIPT = """
    import torch
    import torch.nn as nn
    from torch.utils.data import DataLoader
    from models import ImagePooling

    def evaluate(model, loader):
        with torch.no_grad():
            return [model(x.cuda()) for x in loader]

    def main(dataset):
        model = nn.DataParallel(ImagePooling(3).cuda())
        model.eval()
        loader = DataLoader(dataset, batch_size=8)
        print(model)
        {use}
"""


def test_a_pooled_batchnorm_ignores_the_loaders_of_scripts_that_only_evaluate(tmp_path):
    def dp604(files):
        for name in tmp_path.iterdir():
            name.unlink()
        for name, text in files.items():
            (tmp_path / name).write_text(textwrap.dedent(text))
        findings, _ = run_json(tmp_path, "--select", "DP604", "--isolated")
        return [(f["filename"].rsplit("/", 1)[-1], f["location"]["row"]) for f in findings]

    train = _TRAIN_SCRIPT.format(drop=", drop_last=True")
    # test.py wraps the model in eval mode and keeps the partial last batch: BatchNorm uses its
    # running statistics there, so only train.py's loader (which drops it) decides.
    assert dp604({"models.py": _POOLED_BN, "train.py": train,
                  "test.py": _TEST_SCRIPT.format(use="evaluate(model, loader)")}) == []
    # The same script training, or handing the wrapper to a function of another file (which may
    # train it), or never switching to eval mode (no_grad alone still trains BatchNorm): it counts.
    for use in ("evaluate(model, loader)\n        model.train()",
                "from engine import fit\n        fit(model, loader)",
                "fit(net=model)"):
        assert dp604({"models.py": _POOLED_BN, "train.py": train,
                      "test.py": _TEST_SCRIPT.format(use=use)}) == [("models.py", 8)], use
    assert dp604({"models.py": _POOLED_BN, "train.py": train,
                  "test.py": _TEST_SCRIPT.format(use="evaluate(model, loader)").replace("model.eval()", "pass")}) \
        == [("models.py", 8)]
    # A wrapper handed on as it is built is not known to be evaluated only.
    assert dp604({"models.py": _POOLED_BN, "train.py": train,
                  "test.py": _TEST_SCRIPT.format(use="run(nn.DataParallel(ImagePooling(3)))")}) == [("models.py", 8)]


def test_kept_modules_are_init_parameters_stored_on_self_and_called():
    from dpcheck.analysis.file import FileResult
    from dpcheck.analysis.index import ClassIndex

    text = textwrap.dedent("""
        import torch.nn as nn

        class Holder(nn.Module):
            def __init__(self, width, models, *, head=None, spare=None):
                super().__init__()
                self.width = width
                self.models = models
                self.head = head
                if spare is not None:
                    self.spare = spare  # behind a test: not kept for certain

            def forward(self, x):
                return self.head(self.models(x)) + self.spare(x)

        class Reader(nn.Module):
            def __init__(self, models):
                super().__init__()
                self.models = models  # stored, never called

            def forward(self, x):
                return x
    """)
    result = analyze_source(text, "m.py", [], "m")
    assert result.kept_modules == {"m.Holder": ["head@-1", "models@1"]}
    assert FileResult.from_dict(result.to_dict()).kept_modules == result.kept_modules
    index = ClassIndex([result])
    assert index.condition("kept_module:m.Holder:@1") and index.condition("kept_module:m.Holder:head")
    assert not index.condition("kept_module:m.Holder:@0")  # width: stored, not called
    assert not index.condition("kept_module:m.Reader:@0")
    assert not index.condition("kept_module:m.Missing:@0")  # not scanned: not shown


def test_partial_batches_fact_of_a_wrapping_file_survives_the_cache():
    from dpcheck.analysis.file import FileResult

    script = "import torch.nn as nn\nfrom torch.utils.data import DataLoader\nmodel = nn.DataParallel(net)\n"
    kept = analyze_source(script + "loader = DataLoader(data, batch_size=8)\n", "t.py", [], "t")
    dropped = analyze_source(script + "loader = DataLoader(data, batch_size=8, drop_last=True)\n", "t.py", [], "t")
    assert (kept.partial_batches, dropped.partial_batches) == ("kept", "dropped")
    assert analyze_source("x = 1\n", "u.py", [], "u").partial_batches == ""
    assert FileResult.from_dict(dropped.to_dict()).partial_batches == "dropped"


def test_eval_mode_switch_fact_and_the_project_condition():
    # A module starts in training mode: only `.eval()`, `.train(<not True>)` or a `.training` store
    # puts one in eval mode. Where the scanned files wrap a model and none holds such a switch, a
    # path taken only in eval mode does not run (scripts.EVALUATED_CONDITION is false).
    from dpcheck.analysis.file import FileResult
    from dpcheck.analysis.index import ClassIndex
    from dpcheck.analysis.scripts import EVALUATED_CONDITION

    script = ("import torch.nn as nn\nmodel = nn.DataParallel(Net()).cuda()\nmodel.train()\n"
              "# no model.eval() here: a comment is no switch\nout = model(x)\n")
    trains = analyze_source(script, "t.py", [], "t")
    assert not trains.switches_to_eval
    for switch in ("model.eval()\n", "model.train(False)\n", "model.train(mode=is_training)\n",
                   "model.module.training = False\n"):
        evaluates = analyze_source(script + switch, "t.py", [], "t")
        assert evaluates.switches_to_eval, switch
        assert FileResult.from_dict(evaluates.to_dict()).switches_to_eval
    assert not analyze_source("import editdistance\nd = editdistance.eval(a, b)\n", "d.py", [], "d").switches_to_eval
    assert not ClassIndex([trains]).condition(EVALUATED_CONDITION)
    # An evaluating file counts where a wrapping script loads it (a helper it imports)...
    helper = analyze_source("def evaluate(net):\n    net.eval()\n", "e.py", [], "e")
    imports_helper = analyze_source("from e import evaluate\n" + script + "evaluate(model)\n", "t.py", [], "t")
    assert ClassIndex([imports_helper, helper]).condition(EVALUATED_CONDITION)
    # ...not where it runs apart from every wrap: a test script that builds its own model bare.
    bare_test = analyze_source("import torch\nnet = Net().cuda()\nnet.eval()\nout = net(x)\n", "e.py", [], "e")
    assert bare_test.switches_to_eval
    assert not ClassIndex([trains, bare_test]).condition(EVALUATED_CONDITION)
    # Nothing wrapped: a library, whose users may evaluate.
    assert ClassIndex([analyze_source("import torch\n", "m.py", [], "m")]).condition(EVALUATED_CONDITION)


def test_conditional_ddp_rebinding_leaves_the_dataparallel_wrapper():
    # `if local_rank != -1: model = DDP(model)` after the DataParallel wrap is an alternative, not a
    # replacement: where the test fails `model` is still the DataParallel wrapper.
    text = """
        import torch

        def train(args, model):
            if args.n_gpu > 1:
                model = torch.nn.DataParallel(model)
            if args.local_rank != -1:
                model = torch.nn.parallel.DistributedDataParallel(model)
            return model.config

        def bare(args, model):
            model = torch.nn.DataParallel(model)
            if args.unwrap:
                model = model.module
            return model.config

        def replaced(args, model):
            model = torch.nn.DataParallel(model)
            model = torch.nn.parallel.DistributedDataParallel(model.module)
            return model.config
    """
    assert held(text, 9)
    assert not held(text, 15)  # an unwrapping rebinding under an `if` ends it (as before)
    assert not held(text, 20)  # an unconditional rebinding replaces it


def test_parameter_wrap_reaches_the_value_of_its_first_rebinding():
    # `model = DataParallel(model)` in a helper reads the wrapper its caller passed (a nested wrap);
    # an `and`-ed `not isinstance(model, DataParallel)` test says the helper's model is bare there.
    text = """
        import torch

        def evaluate(args, model):
            if args.n_gpu > 1:
                model = torch.nn.DataParallel(model)
            return model

        def checked(args, model):
            if args.n_gpu > 1 and not isinstance(model, torch.nn.DataParallel):
                model = torch.nn.DataParallel(model)
            return model

        def train(args, model):
            model = torch.nn.DataParallel(model)
            evaluate(args, model)
            checked(args, model)
    """
    assert held(text, 6)
    assert not held(text, 11)


def test_parameter_wrap_is_not_held_where_every_passing_call_makes_the_branch_dead():
    # GraphCodeBERT: train() passes its wrapper with eval_when_training=True, and evaluate() wraps only
    # when it is False. One caller that passes a value not known keeps the wrapper there.
    text = """
        import torch

        def evaluate(args, model, eval_when_training=False):
            if not eval_when_training:
                print(model)
            else:
                print(model)
            if args.n_gpu > 1 and eval_when_training is False:
                model = torch.nn.DataParallel(model)
            return model

        def train(args, model, flag):
            model = torch.nn.DataParallel(model)
            evaluate(args, model, eval_when_training=True)
            evaluate(args, model, True)
    """
    assert not held(text, 6)
    assert held(text, 8)
    assert not held(text, 10)
    unknown = text.rstrip() + "\n            evaluate(args, model, flag)\n"
    assert held(unknown, 6)
    assert held(unknown, 10)


def test_a_re_export_is_matched_by_its_package_once_however_many_files_share_its_module():
    """`from metapkg.modules import DataParallel` with `metapkg/` outside the scan: the scanned
    `modules/__init__.py` is the module `modules` and re-exports the class. Two scanned files that
    both take the module name `modules` (script folders without `__init__.py`) name one module, not
    two candidates."""
    from dpcheck.analysis.index import ClassIndex

    package = analyze_source("from modules.parallel import DataParallel\n", "modules/__init__.py", [], "modules")
    parallel = analyze_source(textwrap.dedent("""
        import torch.nn as nn

        class DataParallel(nn.DataParallel):
            pass
    """), "modules/parallel.py", [], "modules.parallel")
    other = analyze_source("WIDTH = 4\n", "tools/modules.py", [], "modules")
    assert ClassIndex([package, parallel]).lookup("metapkg.modules.DataParallel") == "modules.parallel.DataParallel"
    assert ClassIndex([package, parallel, other]).lookup("metapkg.modules.DataParallel") \
        == "modules.parallel.DataParallel"


def test_wraps_a_base_class_constructor_stores_on_self():
    """scripts.init_wrapped_attributes: the attributes a class's own `__init__` stores a stock
    DataParallel wrapper in (on some path), not one another method stores, nor a subclass's; the
    index answers `init_wrapped:<attr>@<class>` for the class and for its subclasses in other files."""
    from dpcheck.analysis.index import ClassIndex
    from dpcheck.analysis.scripts import init_wrapped_attributes

    base = textwrap.dedent("""
        import torch

        class BaseTrainer:
            def __init__(self, model, teacher):
                self.model = model
                self.teacher = teacher
                if torch.cuda.device_count() > 1:
                    self.model = torch.nn.DataParallel(self.model)

            def parallel_teacher(self):
                self.teacher = torch.nn.DataParallel(self.teacher)
    """)
    assert init_wrapped_attributes(file_context(base)) == {"m.BaseTrainer": ["model"]}
    assert init_wrapped_attributes(file_context("class Plain:\n    def __init__(self, m):\n        self.m = m\n")) == {}
    base_result = analyze_source(base, "base.py", [], "pkg.base")
    sub_result = analyze_source("from pkg.base import BaseTrainer\nclass Trainer(BaseTrainer):\n    pass\n",
                                "sub.py", [], "pkg.sub")
    index = ClassIndex([base_result, sub_result])
    assert index.condition("init_wrapped:model@pkg.base.BaseTrainer")
    assert index.condition("init_wrapped:model@pkg.sub.Trainer")  # inherited through the base
    assert not index.condition("init_wrapped:teacher@pkg.base.BaseTrainer")  # wrapped by another method
    assert not index.condition("init_wrapped:model@pkg.other.Missing")


def test_wrapping_methods_of_module_classes():
    """scripts.wrapping_methods: a class's methods other than `__init__` that build a stock DataParallel
    wrapper and store it in an attribute of self, not one that only moves a wrapper another method
    built; the index answers `wrapping_method:<name>` when a module class defines such a method (issue
    11, 3D-Pose-Estimator's `self.model.parallelise()` before the trainer wraps the whole model)."""
    from dpcheck.analysis.index import ClassIndex
    from dpcheck.analysis.scripts import wrapping_methods

    models = textwrap.dedent("""
        import torch.nn as nn

        class Encoder(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(3, 3, 1)
                self.head = nn.DataParallel(nn.Linear(3, 3))

            def parallelise(self):
                self.conv = nn.DataParallel(self.conv)

            def prepare(self):
                self.conv = self.conv.cuda()

        class Runner:
            def __init__(self, model):
                self.model = model

            def distribute(self):
                self.model = nn.DataParallel(self.model)
    """)
    assert wrapping_methods(file_context(models)) == {"m.Encoder": ["parallelise@conv"],
                                                      "m.Runner": ["distribute@model"]}
    assert wrapping_methods(file_context("class Plain:\n    def setup(self, m):\n        self.m = m\n")) == {}
    index = ClassIndex([analyze_source(models, "models.py", [], "pkg.models")])
    assert index.condition("wrapping_method:parallelise")
    assert not index.condition("wrapping_method:distribute")  # Runner is not a module
    assert not index.condition("wrapping_method:prepare")  # moves the wrapper parallelise built
    assert not index.condition("wrapping_method:__init__")
    # Which attribute each such method wraps, for any class (issue 11, CoLaDa's NERTrainer.prepare_model).
    assert index.condition("method_wraps:distribute@model") and index.condition("method_wraps:parallelise@conv")
    assert not index.condition("method_wraps:distribute@conv") and not index.condition("method_wraps:prepare@conv")


def test_star_import_binds_a_wrapped_class():
    """ClassIndex.lookup follows a name a module neither defines nor imports by name through its star
    imports (issue 11, StyleTTS2's `from losses import *`): the last star-imported module that binds it
    (its `__all__` lists it, or it declares none and the name is public), also through a star import there."""
    from dpcheck.analysis.index import ClassIndex

    def result(source, module):
        return analyze_source(textwrap.dedent(source), module.replace(".", "/") + ".py", [], module)

    losses = result("""
        import torch.nn as nn
        class PairLoss(nn.Module):
            pass
        class _Hidden(nn.Module):
            pass
        class Kept(nn.Module):
            pass
    """, "pkg.losses")
    extra = result("""
        import torch.nn as nn
        __all__ = ["MarginLoss"]
        class MarginLoss(nn.Module):
            pass
        class Kept(nn.Module):
            pass
    """, "pkg.extra")
    hub = result("from pkg.extra import *\n", "pkg.hub")
    script = result("""
        from pkg.losses import *
        from .hub import *
    """, "pkg.train")
    assert script.star_imports == ["pkg.losses", "pkg.hub"] and extra.declared_all == ["MarginLoss"]
    index = ClassIndex([losses, extra, hub, script])
    assert index.lookup("pkg.train.PairLoss") == "pkg.losses.PairLoss"
    assert index.lookup("pkg.train.MarginLoss") == "pkg.extra.MarginLoss"  # through hub's star import
    assert index.lookup("pkg.train.Kept") == "pkg.losses.Kept"  # extra's `__all__` leaves its Kept out
    assert index.lookup("pkg.train._Hidden") is None  # a private name is not star-imported
    assert index.lookup("pkg.train.Missing") is None


def test_star_import_of_a_module_that_imports_back_from_its_package(project):
    """nnsvs: `layers/__init__.py` star-imports `residual_block` (which defines Conv1d) and then
    `upsample`, which imports Conv1d back from the package. Looking the name up followed that cycle
    until Python's recursion limit, while settling a whole run: the run crashed with no report. The
    earlier star import binds it; the run settles and reports."""
    from dpcheck.analysis.index import ClassIndex

    def result(source, module):
        return analyze_source(textwrap.dedent(source), module.replace(".", "/") + ".py", [], module)

    package = result("from pkg.layers.residual_block import *\nfrom pkg.layers.upsample import *\n", "pkg.layers")
    block = result("""
        import torch.nn as nn
        class Conv1d(nn.Conv1d):
            pass
    """, "pkg.layers.residual_block")
    upsample = result("from pkg.layers import Conv1d\n", "pkg.layers.upsample")
    index = ClassIndex([package, block, upsample])
    assert index.lookup("pkg.layers.Conv1d") == "pkg.layers.residual_block.Conv1d"
    assert index.lookup("pkg.layers.upsample.Conv1d") == "pkg.layers.residual_block.Conv1d"

    layers = project / "pkg" / "layers"
    layers.mkdir(parents=True)
    (project / "pkg" / "__init__.py").write_text("")
    (layers / "__init__.py").write_text("from pkg.layers.residual_block import *\nfrom pkg.layers.upsample import *\n")
    (layers / "residual_block.py").write_text("import torch.nn as nn\n\n\nclass Conv1d(nn.Conv1d):\n    pass\n")
    (layers / "upsample.py").write_text(textwrap.dedent("""
        import torch.nn as nn
        from pkg.layers import Conv1d


        class Upsample(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = Conv1d(4, 4, 1)

            def forward(self, x, mask=None):
                if mask is not None:
                    self.last = x
                return self.conv(x)
    """))
    (project / "train.py").write_text(textwrap.dedent("""
        import torch.nn as nn
        from pkg.layers import *

        model = nn.DataParallel(Upsample()).cuda()
        out = model(x)
    """))
    proc = run_cli(".", "--no-cache", "--isolated", "--output-format", "json", cwd=project)
    assert proc.returncode in (0, 1), proc.stderr
    # (`mask` is never passed: the store is advice, which settling decides through that lookup)
    assert [(f["code"], f["location"]["row"], f["severity"]) for f in json.loads(proc.stdout)] == [("DP101", 13, "info")]


_SHARED_HELPER = """
    import torch.nn as nn
    from base import Base


    def centred(x):
        return x - x.mean(0)


    class First(Base):
        def forward(self, x):
            return centred(x)


    class Second(nn.Module):
        def forward(self, x):
            return centred(x)
"""


def _dp601(project, files):
    for name, text in files.items():
        (project / name).write_text(textwrap.dedent(text))
    proc = run_cli(".", "--no-cache", "--isolated", "--output-format", "json", "--select", "DP601", cwd=project)
    assert proc.returncode in (0, 1), proc.stderr
    return [(f["filename"].rsplit("/", 1)[-1], f["location"]["row"], f["severity"]) for f in json.loads(proc.stdout)]


def test_a_module_function_two_classes_call_keeps_the_finding_any_callers_conditions_allow(project):
    """A module-level function that two classes' forwards call is reported where either class's
    cross-file conditions hold: First's base (another file) is no module, Second is one."""
    helper = [("models.py", 7, "error")]
    plain = "class Base:\n    def forward(self, x):\n        return x\n"
    assert _dp601(project, {"models.py": _SHARED_HELPER, "base.py": plain}) == helper
    # Neither class a module: nothing to report.
    no_module = _SHARED_HELPER.replace("class Second(nn.Module)", "class Second(Base)")
    assert _dp601(project, {"models.py": no_module, "base.py": plain}) == []
    # The project wraps Second only: First's finding alone would be advice, Second's is an error.
    module = "import torch.nn as nn\n\n\nclass Base(nn.Module):\n    pass\n"
    train = "import torch.nn as nn\nfrom models import Second\nmodel = nn.DataParallel(Second())\n"
    assert _dp601(project, {"models.py": _SHARED_HELPER, "base.py": module, "train.py": train}) == helper


def _wraps(source):
    result = analyze_source(textwrap.dedent(source), "train.py", [], "train")
    return result.wrapped, result.unresolved_wraps


def test_a_wrap_stored_back_into_a_list_or_dict_item_is_traced_to_what_the_container_holds():
    # A dict display, then each item wrapped in place (`models[k] = DataParallel(models[k])`).
    assert _wraps("""
        import torch.nn as nn
        from models import Disc, Gen
        models = {"g": Gen(), "d": Disc().cuda()}
        for k in models:
            models[k] = nn.DataParallel(models[k])
    """) == (["models.Disc", "models.Gen"], [])
    # A list attribute filled by append, its items wrapped in a method of the same class.
    assert _wraps("""
        import torch.nn as nn
        from models import Net
        class Trainer:
            def __init__(self):
                self.nets = []
                for _ in range(2):
                    self.nets.append(Net())
            def parallelise(self):
                for i in range(len(self.nets)):
                    self.nets[i] = nn.DataParallel(self.nets[i])
    """) == (["models.Net"], [])
    # Items set one by one.
    assert _wraps("""
        import torch.nn as nn
        from models import Net
        nets = {}
        nets["a"] = Net()
        nets["a"] = nn.DataParallel(nets["a"])
    """) == (["models.Net"], [])
    # A container the function is given holds what its caller put in: not traced here.
    assert _wraps("""
        import torch.nn as nn
        def parallelise(models):
            for k in models:
                models[k] = nn.DataParallel(models[k])
            return models
    """) == ([], [5])


def test_torch_nn_classes_that_are_no_modules_make_no_module():
    ctx = file_context("""
        import torch.nn as nn
        from torch.nn.modules.lazy import LazyModuleMixin
        from torch.nn.parallel._functions import Scatter
        from torch.nn.parallel.scatter_gather import Gather
        from torch.nn.modules.conv import _ConvNd

        class CountedScatter(Scatter):
            @staticmethod
            def forward(ctx, target_gpus, chunk_sizes, dim, input):
                return Scatter.forward(ctx, target_gpus, chunk_sizes, dim, input)

        class PaddedGather(Gather):
            pass

        class LazyOnly(LazyModuleMixin):
            pass

        class LazyLinear(LazyModuleMixin, nn.Linear):
            pass

        class SNConv(_ConvNd):
            pass

        class Wrapper(nn.parallel.DataParallel):
            pass
    """)
    sure = {name: ctx.class_is_module(name)[0] for name in
            ("CountedScatter", "PaddedGather", "LazyOnly", "LazyLinear", "SNConv", "Wrapper")}
    # Autograd Functions and a mixin alone are no modules; a layer on a mixin and a private base is.
    assert sure == {"CountedScatter": False, "PaddedGather": False, "LazyOnly": False, "LazyLinear": True,
                    "SNConv": True, "Wrapper": True}


def test_handed_wrappers_name_the_imported_callee_and_position():
    """scripts.handed_wrappers: a wrapper handed to an imported function or class, by position or
    keyword, the callee as the file's imports resolve it; not a local function's call (ScriptFacts
    follows it), not the bare model, not a library call (issue 11, LT-OCF's `Procedure.Test(dataset,
    Recmodel, ...)` and `utils.BPRLossT(Recmodel, config)`); the index matches a callee scanned under
    another root by its last two parts."""
    from dpcheck.analysis.index import ClassIndex
    from dpcheck.analysis.scripts import handed_wrappers

    script = textwrap.dedent("""
        import argparse
        import torch
        import torch.nn as nn
        import Procedure
        import utils
        from models import Net

        def local(model):
            return model

        model = Net()
        bare = Net()
        if torch.cuda.device_count() > 1:
            model = nn.DataParallel(model)
        model = model.cuda()
        model.lr_regime = [0, 100]
        loss = utils.BPRLossT(model, {})
        Procedure.Test(None, model, epoch=0)
        Procedure.Report(bare)
        Procedure.Evaluate(net=model)
        torch.save(model.state_dict(), "m.pt")
        local(model)
    """)
    ctx = file_context(script)
    assert handed_wrappers(ctx) == ["Procedure.Evaluate@net=lr_regime", "Procedure.Test@1=lr_regime",
                                    "utils.BPRLossT@0=lr_regime"]
    index = ClassIndex([analyze_source(script, "main.py", [], "main")])
    assert index.condition("handed_wrapper:code.Procedure.Test@1:getUsersRating")
    assert index.condition("handed_wrapper:code.utils.BPRLossT@0:get_time")
    assert not index.condition("handed_wrapper:code.utils.BPRLossT@0:lr_regime")  # set on the wrapper itself
    assert not index.condition("handed_wrapper:code.Procedure.Test@0:getUsersRating")
    assert not index.condition("handed_wrapper:code.Procedure.Report@0:getUsersRating")


def test_method_calls_tell_calls_on_an_instance_just_built():
    """scripts.method_calls: `summary()` called right after the model is built (FOTS's train.py,
    `model = eval(config['arch'])(config)` then `model.summary()`) is fresh; a call after another use
    of the name, on an attribute, or after a builder function is not; a part's call inside the method
    of the same name (`self.net.summary()` in `summary`) is not counted. The index answers
    `called_late:<method>` false only for a method every scanned call of which is fresh (issue 11)."""
    from dpcheck.analysis.index import ClassIndex
    from dpcheck.analysis.scripts import method_calls

    script = textwrap.dedent("""
        import argparse
        import torch
        from models import Net, build

        class Holder:
            def summary(self):
                self.net.summary()

        def main(config):
            model = eval(config["arch"])(config)
            model.summary()
            other = Net()
            other.prepare()
            other.describe()
            built = build(config)
            built.report()
            model.fit()
    """)
    fresh, later = method_calls(file_context(script))
    assert fresh == ["prepare", "summary"]
    assert {"describe", "report", "fit"} <= set(later) and "summary" not in later
    index = ClassIndex([analyze_source(script, "train.py", [], "train")])
    assert not index.condition("called_late:summary")
    assert index.condition("called_late:describe") and index.condition("called_late:unknown")


def test_dp504_message_on_a_list_whose_items_may_be_tensors():
    # A list of tensors is not handed whole: scatter splits each item along its own dim 0. Where the
    # script does not show what the items are, the message says both cases; a list of visible Python
    # values keeps the handed-whole message alone.
    text = textwrap.dedent("""
        import torch.nn as nn

        def train(net, loader):
            model = nn.DataParallel(net)
            for images, lengths in loader:
                model(list(images))
                model([crop(im) for im in images])
                model(images, [int(n) for n in lengths])
    """)
    findings = analyze_source(text, "train.py", [rules_by_code()["DP504"]()], "train").findings
    by_line = {f.row: f.message for f in findings if f.code == "DP504"}
    assert sorted(by_line) == [7, 8, 9]
    for line in (7, 8):
        assert "if the items are tensors, it splits each along its own dim 0" in by_line[line]
    assert "if the items are tensors" not in by_line[9]
    assert "hands other values whole" in by_line[9]


def test_dp505_skips_a_call_that_cannot_bind_to_the_wrapped_forward():
    # `speaker` binds `return_unsample` and the keyword repeats it: TypeError on one device too, so
    # the call never reaches DataParallel's scatter. With a forward that takes both it is reported.
    template = """
        import torch.nn as nn

        class Encoder(nn.Module):
            def forward(self, {params}):
                return mel

        def train(loader):
            model = nn.DataParallel(Encoder())
            for mel, speaker in loader:
                model(mel, speaker, return_unsample=True)
                model(mel, unsample=True)
    """
    rules = [rules_by_code()["DP505"]()]

    def lines(params):
        text = textwrap.dedent(template.format(params=params))
        return sorted(f.row for f in analyze_source(text, "train.py", rules, "train").findings if f.code == "DP505")

    assert lines("mel, return_unsample=False") == []
    assert lines("mel, speaker, return_unsample=False") == [11]
    assert lines("mel, *rest, **options") == [11, 12]
