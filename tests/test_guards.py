"""Guards no run of the wrapped model takes: the call summaries files give the index, and the
``passed:`` condition it settles from them (dpcheck.analysis.guards)."""

import textwrap

from dpcheck.analysis.file import analyze_source
from dpcheck.analysis.index import ClassIndex
from dpcheck.registry import rules_by_code

LAYER = """
import torch.nn as nn

class Post(nn.Module):
    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(8, 8, batch_first=True)

    def forward(self, x, lengths=None, *, mask=None):
        if lengths is not None:
            x = nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True)
        out, _ = self.gru(x)
        if lengths is not None:
            out, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True)
        return out
"""


def _result(code, module):
    rule = rules_by_code()["DP405"]()
    return analyze_source(textwrap.dedent(code), f"{module}.py", [rule], module)


def _caller(call):
    return _result(f"""
import torch.nn as nn
from layer import Post

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.post = Post()

    def forward(self, x, lengths):
        return {call}
""", "net")


def _kept(*callers):
    layer = _result(LAYER, "layer")
    index = ClassIndex([layer, *callers])
    return [f for f in layer.findings if index.holds(f)]


def test_call_summary_records_positional_count_and_keywords():
    assert _caller("self.post(x)").module_calls == {"layer.Post": ["#1"]}
    # (an argument that is the constant None passes nothing)
    assert _caller("self.post(x, lengths=lengths, mask=None)").module_calls == {
        "layer.Post": ["#1", "lengths"]}
    assert _caller("self.post(x, None, mask=lengths)").module_calls == {"layer.Post": ["#1", "mask"]}
    assert _caller("self.post(*x)").module_calls == {"layer.Post": ["*"]}


def test_a_use_other_than_a_call_or_a_build_outside_self_is_an_unknown_caller():
    passed_on = _caller("run(self.post, x)")
    assert passed_on.module_calls == {"layer.Post": ["*"]}
    member = _caller("self.post.gru(x)[0]")
    assert member.module_calls == {"layer.Post": []}
    built = _result("from layer import Post\nimport torch.nn as nn\nnet = nn.Sequential(Post())\n", "script")
    assert built.module_calls == {"layer.Post": ["*"]}


def test_branch_on_an_omitted_argument_goes():
    assert _kept(_caller("self.post(x)")) == []


def test_branch_on_a_passed_argument_stays():
    assert len(_kept(_caller("self.post(x, lengths)"))) == 1
    assert len(_kept(_caller("self.post(x, lengths=lengths)"))) == 1
    assert len(_kept(_caller("self.post(x)"), _caller("self.post(x, lengths)"))) == 1


def test_unknown_callers_count_as_passing():
    assert len(_kept()) == 1  # no call seen
    assert len(_kept(_caller("self.post(x, **kw)"))) == 1
    assert len(_kept(_caller("run(self.post, x)"))) == 1


def test_a_subclass_may_call_it():
    sub = _result("from layer import Post\n\nclass Longer(Post):\n    pass\n", "sub")
    assert len(_kept(_caller("self.post(x)"), sub)) == 1


def test_only_none_or_false_defaults_and_unrebound_parameters():
    rebound = LAYER.replace("        x = nn.utils", "        lengths = lengths\n        x = nn.utils", 1)
    layer = _result(rebound, "layer")
    index = ClassIndex([layer, _caller("self.post(x)")])
    assert len([f for f in layer.findings if index.holds(f)]) == 1
    required = _result(LAYER.replace("lengths=None", "lengths=3"), "layer")
    index = ClassIndex([required, _caller("self.post(x)")])
    assert len([f for f in required.findings if index.holds(f)]) == 1


def test_code_outside_forward_has_no_guard_conditions_a_lambda_hook_included():
    # A hook registered as a lambda is forward-reachable code with no name of its own: DP405 asks
    # about its call like any other (it once raised AttributeError, an internal error DP002).
    hooked = _result("""
import torch.nn as nn
from torch.nn.utils.rnn import pad_packed_sequence

class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(8, 8)
        self.rnn.register_forward_hook(lambda module, inputs, output: pad_packed_sequence(output[0]))

    def forward(self, x, lengths=None):
        return self.rnn(x)[0]
""", "hooked")
    assert [(f.code, f.requires) for f in hooked.findings] == [("DP405", ())]


PACKED_LAYER = """
import torch.nn as nn
from torch.nn.utils.rnn import PackedSequence, pad_packed_sequence

class Recurrent(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.GRU(8, 8, batch_first=True)

    def forward(self, inputs):
        if isinstance(inputs, PackedSequence):
            inputs = PackedSequence(inputs.data * 2, inputs.batch_sizes)
        out, _ = self.rnn(inputs)
        if isinstance(inputs, PackedSequence):
            out = pad_packed_sequence(out, batch_first=True)[0]
        return out

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.recurrent = Recurrent()

    def forward(self, x, lengths):
        return self.recurrent(PACKED)
"""


def test_a_packed_branch_of_a_layer_runs_only_where_the_file_packs_a_sequence():
    def reported(feed):
        return [f.code for f in _result(PACKED_LAYER.replace("PACKED", feed), "packed").findings]

    # Nothing packs: the re-wrap inside the packed branch packs nothing new, scatter hands in tensors.
    assert reported("x") == []
    # Packed on the replica, by a function or a PackedSequence built from scratch: the branch runs.
    assert reported("nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True)") == ["DP405"]
    assert reported("PackedSequence(x, lengths)") == ["DP405"]


# Forwarding chains: a model that hands its own optional argument to the layer passes it only where
# the model's callers pass it (the layer's findings behind it are advice unless they do).

def _forwarder(call="self.post(x, lengths)"):
    return _result(f"""
import torch.nn as nn
from layer import Post

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.post = Post()

    def forward(self, x, lengths=None):
        return {call}
""", "net")


def _script(body):
    return _result("import logging\nimport torch.nn as nn\nfrom net import Net\n\n\ndef main(batches, run):\n"
                   + textwrap.indent(textwrap.dedent(body), "    "), "train")


def test_forwarded_optional_parameters_are_recorded_with_their_source():
    assert _forwarder().module_calls == {"layer.Post": ["#1", "@1<net.Net:lengths@1"]}
    assert _forwarder("self.post(x, lengths=lengths)").module_calls == {
        "layer.Post": ["#1", "lengths<net.Net:lengths@1"]}
    # Rebound in forward: what it holds then is the model's own, so it is passed.
    rebound = _forwarder("self.post(x, lengths=lengths)").module_calls
    assert _forwarder("self.post(x, lengths=(lengths := lengths))").module_calls != rebound


def test_a_chain_passes_only_what_the_wrapped_models_callers_pass():
    model = _forwarder()
    quiet = _script("""
        model = nn.DataParallel(Net())
        logging.getLogger().info(model)
        for x, lengths in batches:
            model(x)
    """)
    assert quiet.wrapper_calls == {"net.Net": ["#1"]}
    assert _kept(model, quiet) == []
    passing = _script("""
        model = nn.DataParallel(Net())
        for x, lengths in batches:
            model(x, lengths)
    """)
    assert len(_kept(model, passing)) == 1
    unpacked = _script("""
        model = nn.DataParallel(Net())
        for inputs in batches:
            model(**inputs)
    """)
    assert len(_kept(model, unpacked)) == 1


def test_wrapper_calls_are_read_only_where_every_wrap_site_is_traced():
    model = _forwarder()
    quiet = _script("""
        model = nn.DataParallel(Net())
        model(batches)
    """)
    handed_in = _result("import torch.nn as nn\n\n\ndef fit(model, x, lengths):\n"
                        "    model = nn.DataParallel(model)\n    return model(x, lengths)\n", "fit")
    assert handed_in.wrapper_calls == {"*": ["*"]}
    assert _kept(model, quiet) == []
    assert len(_kept(model, quiet, handed_in)) == 1


def test_a_script_model_used_only_by_calls_and_inspections_reports_its_calls():
    def markers(body):
        return _script(body).module_calls["net.Net"]

    assert markers("""
        model = Net()
        logging.getLogger().info(model)
        model = model.to("cuda")
        model.eval()
        return model(batches)
    """) == ["#1", "~"]
    assert "*" in markers("model = Net()\nreturn run(model)\n")
    assert "*" in markers("model = Net()\nnet = model.cuda()\nreturn net(batches)\n")
    assert "*" in markers("model = Net()\nreturn model\n")
    assert "*" in markers("model = Net()\nreturn nn.Sequential(model, nn.ReLU())(batches)\n")
    assert "*" in markers("return nn.Sequential(Net())(batches)\n")


def test_another_name_bound_to_the_model_is_read_as_the_model():
    # SpanBERT's run_glue (session 40): `model_to_save = model.module if hasattr(model, "module") else
    # model` only to save it; the calls of that name are the model's calls, any other use unknown.
    def markers(body):
        return _script(body).module_calls["net.Net"]

    saved = 'model = Net()\nmodel(batches, None)\nbare = model.module if hasattr(model, "module") else model\n' \
            'logging.getLogger().info(bare.state_dict())\n'
    assert markers(saved) == ["#1", "~"]  # (the constant None passes nothing)
    assert markers("model = Net()\nbare = model\nreturn bare(batches, lengths=batches)\n") == ["#1", "lengths", "~"]
    assert "*" in markers("model = Net()\nbare = model if run else None\nreturn bare\n")
    assert "*" in markers("model = Net()\nbare = model\nreturn run(bare)\n")
    # (A name bound to itself is not followed around the cycle.)
    assert markers("model = Net()\nmodel = model\nreturn model(batches)\n") == ["#1", "~"]


def test_a_classmethod_construction_is_a_construction():
    assert _result(LAYER + """

class Holder(nn.Module):
    def __init__(self):
        super().__init__()
        self.post = Post.from_pretrained("post")
        nn.DataParallel(self.post)

    def forward(self, x):
        return self.post(x)
""", "layer").module_calls == {"layer.Post": ["#1"]}


def test_a_dict_of_inputs_unpacked_into_the_wrapper_passes_its_keys():
    # `inputs = {...}; model(**inputs)`: the literal's keys are what the call passes (an entry that
    # is None passes nothing), where every other use only reads an entry.
    def calls(body):
        return _script(body).wrapper_calls["net.Net"]

    literal = calls("""
        model = nn.DataParallel(Net())
        for batch in batches:
            inputs = {"x": batch[0], "lengths": None}
            out = model(**inputs)
            run(out, inputs["x"])
    """)
    assert literal == ["#0,x"]
    assert _kept(_forwarder(), _script("""
        model = nn.DataParallel(Net())
        for batch in batches:
            inputs = {"x": batch[0]}
            model(**inputs)
    """)) == []
    for changed in ('inputs["lengths"] = batch[1]', "inputs.update(lengths=batch[1])", "run(inputs)",
                    "inputs = {**inputs}"):
        assert calls(f"""
            model = nn.DataParallel(Net())
            for batch in batches:
                inputs = {{"x": batch[0]}}
                {changed}
                model(**inputs)
        """) == ["*"], changed
    assert _result("import torch.nn as nn\nfrom net import Net\n\n\ndef main(inputs):\n"
                   "    model = nn.DataParallel(Net())\n    return model(**inputs)\n",
                   "train").wrapper_calls["net.Net"] == ["*"]  # handed in: keys unknown


def test_a_parameter_rebound_only_after_its_test_still_holds_the_callers_value():
    def kept(code):
        layer = _result(code, "layer")
        index = ClassIndex([layer, _caller("self.post(x)")])  # no call passes lengths
        return [f for f in layer.findings if index.holds(f)]

    after = LAYER.replace("        return out", "        lengths = None\n        return out", 1)
    assert kept(LAYER) == kept(after) == []
    looped = LAYER.replace(
        "        if lengths is not None:\n            out, _",
        "        for _ in range(2):\n            if lengths is not None:\n                out, _", 1).replace(
        "        return out", "            lengths = None\n        return out", 1)
    assert len(kept(looped)) == 1  # the next iteration's test reads forward's own value


def test_a_constant_false_passes_nothing_to_a_parameter_that_defaults_to_false():
    # `if packed:` with `packed=False`: a caller passing False keeps the branch off, as leaving it out
    # does (handnet's `self.mano_branch(..., use_stereoshape=False)`); True or a name may turn it on.
    flag = LAYER.replace("lengths=None, *, mask=None", "lengths=None, packed=False, *, mask=None").replace(
        "if lengths is not None:\n            x =", "if packed:\n            x =", 1).replace(
        "if lengths is not None:\n            out, _", "if packed:\n            out, _", 1)
    assert _caller("self.post(x, packed=False)").module_calls == {"layer.Post": ["#1", "packed=False"]}
    assert _caller("self.post(x, lengths, False)").module_calls == {"layer.Post": ["#2", "@2=False"]}
    layer = _result(flag, "layer")

    def kept(call):
        index = ClassIndex([layer, _caller(call)])
        return [f for f in layer.findings if index.holds(f)]

    assert kept("self.post(x, packed=False)") == []
    assert kept("self.post(x, lengths, False)") == []
    assert len(kept("self.post(x, packed=True)")) == 1
    assert len(kept("self.post(x, lengths, x.is_packed)")) == 1
    # A None default tells False apart: `if lengths is not None:` takes a False.
    assert len(_kept(_caller("self.post(x, lengths=False)"))) == 1


def test_a_wrapper_handed_to_a_function_of_the_script_is_called_as_it_calls_its_parameter():
    # Understanding-Jailbreaks' evals (session 39): the function's own calls are the wrapper's.
    handed = _result("import torch.nn as nn\nfrom net import Net\n\n\ndef evaluate(model, batches):\n"
                     "    for x in batches:\n        model(x)\n\n\nmodel = nn.DataParallel(Net())\n"
                     "evaluate(model, [])\n", "train")
    assert handed.wrapper_calls == {"net.Net": ["#1"]}
    # A function that hands its parameter to itself is not followed around the cycle: unknown.
    recursive = _result("import torch.nn as nn\nfrom net import Net\n\n\ndef run(model, depth):\n"
                        "    if depth:\n        return run(model, depth - 1)\n    return model(depth)\n\n\n"
                        "model = nn.DataParallel(Net())\nrun(model, 3)\n", "train")
    assert "*" in recursive.wrapper_calls
