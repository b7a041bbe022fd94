"""What forward's returned values are, followed through stored closures and running sums (DP401)."""
import textwrap

import pytest

from dpcheck.analysis.file import analyze_source
from dpcheck.registry import rules_by_code

HEAD = """
import torch
import torch.nn as nn

class Net(nn.Module):
    def __init__(self, opt):
        super().__init__()
        self.opt = opt
        self.net = nn.Linear(8, 8)
        self.crit = nn.L1Loss()
        self.keep = self.make_keep()
"""


def dp401_rows(body: str) -> list[int]:
    text = textwrap.dedent(HEAD) + textwrap.indent(textwrap.dedent(body), "    ")
    rule = rules_by_code()["DP401"]
    rule = rule() if isinstance(rule, type) else rule
    result = analyze_source(text, "m.py", [rule], "m")
    return [f.row for f in result.findings if f.code == "DP401"]


@pytest.mark.parametrize("keep", [
    "def make_keep(self):\n    def keep(a, b):\n        return [a, b]\n    return keep\n",
    "def make_keep(self):\n    return lambda a, b: (a, b)\n",
    "def make_keep(self):\n    flags = (True, False)\n    def keep(a, b):\n"
    "        return [x for (x, f) in zip((a, b), flags) if f]\n    return keep\n",
])
def test_a_stored_closure_returning_its_arguments_hands_back_the_call_site_arguments(keep):
    # One argument is per-sample, the other a 0-dim loss: only following the closure finds it.
    body = keep + "def forward(self, x, y):\n    out = self.net(x)\n    return self.keep(out, self.crit(out, y))\n"
    assert dp401_rows(body)


def test_a_stored_closure_that_builds_something_else_is_not_guessed_at():
    body = ("def make_keep(self):\n    def keep(a, b):\n        return torch.stack([a, b])\n    return keep\n"
            "def forward(self, x, y):\n    out = self.net(x)\n    return self.keep(out.mean(), self.crit(out, y))\n")
    assert dp401_rows(body) == []


def test_a_running_sum_from_zero_with_configuration_weights_stays_0_dim():
    body = ("def make_keep(self):\n    return None\n"
            "def forward(self, x, y):\n    out = self.net(x)\n    total = 0\n"
            "    for _ in range(self.opt.n):\n        total += 0.5 * self.crit(out, y) * self.opt.weight\n"
            "    return total, out\n")
    assert dp401_rows(body)


def test_a_loss_times_a_tensor_argument_is_not_known_0_dim():
    body = ("def make_keep(self):\n    return None\n"
            "def forward(self, x, y, w):\n    out = self.net(x)\n    total = 0\n"
            "    total += self.crit(out, y) * w\n    return total, out\n")
    assert dp401_rows(body) == []


@pytest.mark.parametrize(("unpack", "found"), [
    ("loss, stats = self.crit(out, y)\n    return out, loss", True),  # the first value of a loss module's result
    ("loss, _ = self.crit(out, y)\n    return out, loss", True),
    ("stats, loss = self.crit(out, y)\n    return out, loss", False),  # a later value: not known to be the loss
    # Several component losses: whether each is 0-dim or a per-replica (1,) the call site does not show.
    ("cls_loss, reg_loss = self.crit(out, y)\n    return cls_loss, reg_loss", False),
    ("loss, stats = self.net(out, y)\n    return out, loss", False),  # a layer's result, not a loss's
    ("loss, stats = self.crit(out, y)\n    return out, loss.unsqueeze(0)", False),
])
def test_the_first_value_unpacked_from_a_loss_module_is_its_loss(unpack, found):
    body = f"def forward(self, x, y):\n    out = self.net(x)\n    {unpack}\n"
    assert bool(dp401_rows(body)) is found


UNPACKED = """
import torch
import torch.nn as nn

class Heads(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 3)
        self.crit = nn.CrossEntropyLoss()

    def forward(self, x, y=None):
        scores = self.fc(x)
        if y is not None:
            return scores, LOSS
        return (scores,)

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.heads = Heads()

    def forward(self, x, y):
        scores, loss = self.heads(x, y)
        return scores, loss
"""


@pytest.mark.parametrize("loss, found", [
    ("self.crit(scores, y)", True),
    ("torch.sum(scores) / max(torch.sum(y), 1)", True),
    ("scores.sum(dim=1)", False),
    ("y", False),  # (a parameter: not known 0-dim)
])
def test_an_element_unpacked_from_a_module_of_the_file_is_0_dim_when_its_forwards_tuples_hold_one(loss, found):
    """Issue 11 (DeVLBert's BertPreTrainingHeads): element k of a module call is 0-dim where every
    tuple its class's forward returns that has an element k holds a 0-dim value there; a shorter
    return (`(scores,)`) is not one a call unpacking k+1 values gets."""
    rule = rules_by_code()["DP401"]
    rule = rule() if isinstance(rule, type) else rule
    result = analyze_source(textwrap.dedent(UNPACKED).replace("LOSS", loss), "m.py", [rule], "m")
    assert bool([f for f in result.findings if f.code == "DP401" and "self.heads" in f.message]) == found


HEADED = """
import torch
import torch.nn as nn
import torch.nn.functional as F

class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 3)

    def forward(self, x, y, reduction="mean"):
        loss = F.cross_entropy(self.fc(x), y, reduction="none")
        if reduction == "none":
            return loss
        if reduction == "sum":
            return loss.sum()
        return loss.mean()

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.head = Head()

    def forward(self, x, y, r):
        kw = {}
        return CALL
"""


@pytest.mark.parametrize("call, found", [
    ("self.head(x, y)", True),
    ("self.head(x, y=y)", True),
    ("self.head(x, y, reduction='sum')", True),
    ("self.head(x, y, reduction='mean')", True),  # the default, given
    ("self.head(x, y, reduction='none')", False),
    ("self.head(x, y, 'sum')", False),  # an option given by position is not read
    ("self.head(x, y, reduction=r)", False),  # nor one whose value cannot be seen
    ("self.head(x, y, **kw)", False),
])
def test_a_module_of_the_file_whose_forward_returns_0_dim_is_read_with_the_options_its_call_passes(call, found):
    rule = rules_by_code()["DP401"]
    rule = rule() if isinstance(rule, type) else rule
    result = analyze_source(textwrap.dedent(HEADED).replace("CALL", call), "m.py", [rule], "m")
    assert [f.code for f in result.findings] == (["DP401"] if found else [])
    # What other files' calls read: the head's forward is 0-dim unless reduction is 'none'.
    assert result.scalar_forwards["m.Head"] == ["reduction@2=*|'mean'|'sum'"]
    assert ("m.Net" in result.scalar_forwards) == found  # (and a class that returns its value)


@pytest.mark.parametrize("body, found", [
    # A running total on self, augmented in a helper forward calls after a reset to 0.
    ("def total(self, out, y):\n    self.tot = 0\n    self.tot += 0.5 * self.crit(out, y)\n    return self.tot\n"
     "def forward(self, x, y):\n    out = self.net(x)\n    return out, self.total(out, y)\n", True),
    # Stored in forward and returned as the attribute.
    ("def forward(self, x, y):\n    out = self.net(x)\n    self.loss = self.crit(out, y)\n    return out, self.loss\n",
     True),
    # An item of a dict on self that only item stores of 0-dim values fill.
    ("def forward(self, x, y):\n    out = self.net(x)\n    self.terms = {}\n    self.terms['l1'] = self.crit(out, y)\n"
     "    return out, self.terms['l1']\n", True),
    # A total that starts as a one-element tensor is (1,), not 0-dim.
    ("def forward(self, x, y):\n    out = self.net(x)\n    self.tot = torch.zeros(1)\n    self.tot += self.crit(out, y)\n"
     "    return out, self.tot\n", False),
    # Another store puts a per-sample tensor there: the attribute's shape is not known.
    ("def forward(self, x, y):\n    out = self.net(x)\n    self.loss = self.crit(out, y)\n    if self.opt.per_sample:\n"
     "        self.loss = (out - y).abs().mean(dim=1)\n    return out, self.loss\n", False),
    # A dict the class also fills with update(): its items are not known.
    ("def forward(self, x, y):\n    out = self.net(x)\n    self.terms = {}\n    self.terms['l1'] = self.crit(out, y)\n"
     "    self.terms.update(self.opt.extra)\n    return out, self.terms['l1']\n", False),
])
def test_a_loss_stored_on_self_is_0_dim_when_every_store_is(body, found):
    assert bool(dp401_rows(body)) is found
CRF_TAGGER = """
import torch
import torch.nn as nn
{import_line}

class Tagger(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.fc = nn.Linear(8, n)
        self.crf = {layer}

    def forward(self, x, mask):
        logits = self.fc(x)
        return {{"logits": logits, "tags": self.crf.{method}(logits, mask=mask)}}
"""


def dp402_rows(text: str) -> list[int]:
    rule = rules_by_code()["DP402"]
    rule = rule() if isinstance(rule, type) else rule
    result = analyze_source(textwrap.dedent(text), "m.py", [rule], "m")
    return [f.row for f in result.findings if f.code == "DP402"]


@pytest.mark.parametrize(("import_line", "layer", "method", "reported"), [
    ("from torchcrf import CRF", "CRF(n, batch_first=True)", "decode", True),  # lists of tag indices
    ("import torchcrf", "torchcrf.CRF(n)", "decode", True),
    ("from TorchCRF import CRF", "CRF(n)", "viterbi_decode", True),
    ("from torchcrf import CRF", "CRF(n, batch_first=True)", "forward", False),  # the log-likelihood, a tensor
    ("from mylayers import CRF", "CRF(n)", "decode", False),  # a project layer: what it returns is unknown
])
def test_a_crf_layers_decoded_tag_lists_are_python_values(import_line, layer, method, reported):
    text = CRF_TAGGER.format(import_line=import_line, layer=layer, method=method)
    assert bool(dp402_rows(text)) is reported


DISTRIBUTION_HEAD = """
import torch
import torch.nn as nn
{prelude}

class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 2)

    def forward(self, x):
        {body}
"""


@pytest.mark.parametrize(("prelude", "body", "reported"), [
    ("", "return torch.distributions.Normal(self.fc(x), 1.0)", True),
    ("from torch.distributions import Categorical", "return Categorical(logits=self.fc(x))", True),
    ("import torch.distributions as D", "return self.fc(x), D.Independent(D.Normal(self.fc(x), 1.0), 1)", True),
    ("from torch.distributions.normal import Normal", "dist = Normal(self.fc(x), 1.0)\n        return dist", True),
    ("FixedNormal = torch.distributions.Normal", "return FixedNormal(self.fc(x), 1.0)", True),  # an alias
    ("class FixedCategorical(torch.distributions.Categorical):\n    pass",
     "return FixedCategorical(logits=self.fc(x))", True),  # a subclass of this file
    ("", "return torch.distributions.Normal(self.fc(x), 1.0).rsample()", False),  # a tensor drawn from it
    ("from torch.distributions import kl_divergence, Normal",
     "return kl_divergence(Normal(self.fc(x), 1.0), Normal(0.0, 1.0))", False),  # a function's tensor
    ("from mydists import Normal", "return Normal(self.fc(x))", False),  # a project class: unknown
    ("from torch.distributions import Normal", "Normal = self.fc\n        return Normal(x)", False),  # rebound
])
def test_a_torch_distributions_object_returned_from_forward_is_not_gatherable(prelude, body, reported):
    text = DISTRIBUTION_HEAD.format(prelude=prelude, body=body)
    assert bool(dp402_rows(text)) is reported


@pytest.mark.parametrize("returned, flagged", [
    ("h[h > 0]", False),  # batch-major: the replicas' selections concatenate to the whole batch's
    ("torch.masked_select(h, h > 0)", False),
    ("h.masked_select(h > 0)", False),
    ("h.t()[h.t() > 0]", True),  # walked feature by feature: each replica's pieces interleave wrongly
    ("self.net.weight[self.net.weight > 0]", True),  # a parameter: every replica selects all of it
    ("torch.unique(h)", True),
    # time-major: pad_packed_sequence without batch_first returns (T, B, ...)
    ("nn.utils.rnn.pad_packed_sequence(h)[0][h > 0]", True),
])
def test_dp403_a_mask_selection_in_sample_order_is_gathered_exactly(returned, flagged):
    text = textwrap.dedent(HEAD) + textwrap.indent(f"def forward(self, x):\n    h = self.net(x)\n    return {returned}\n",
                                                   "    ")
    result = analyze_source(text, "m.py", [rules_by_code()["DP403"]()], "m")
    assert any(f.code == "DP403" for f in result.findings) == flagged
