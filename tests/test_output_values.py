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
