"""Each rule's own documented examples: the bad one is flagged by it, the good one is not."""

import textwrap

import pytest

from dpcheck.analysis.file import analyze_source
from dpcheck.registry import all_rules

PRELUDE = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"
STATIC = [r for r in all_rules() if r.kind == "static"]


def codes_for(source, rule):
    """Findings of the default rule set plus ``rule`` itself (which may be off by default)."""
    rules = [r() for r in STATIC if r.default_enabled or r is rule]
    result = analyze_source(PRELUDE + textwrap.dedent(source), "example.py", rules, "example")
    return [f.code for f in result.findings]


@pytest.mark.parametrize("rule", STATIC, ids=lambda r: r.code)
def test_bad_example_is_flagged(rule):
    assert rule.bad_example.strip(), f"{rule.code} has no bad example"
    assert rule.code in codes_for(rule.bad_example, rule)


@pytest.mark.parametrize("rule", STATIC, ids=lambda r: r.code)
def test_good_example_is_clean(rule):
    assert rule.good_example.strip(), f"{rule.code} has no good example"
    assert codes_for(rule.good_example, rule) == []


@pytest.mark.parametrize("rule", all_rules(), ids=lambda r: r.code)
def test_rule_metadata_is_complete(rule):
    assert rule.code.startswith("DP") and len(rule.code) == 5
    assert rule.name == rule.name.lower() and " " not in rule.name
    assert rule.summary and rule.fix_hint
    doc = rule.explanation()
    assert "## Why is this bad?" in doc and "## How to fix" in doc
