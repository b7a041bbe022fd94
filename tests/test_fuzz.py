"""Bounded fuzzing: generated and mutated programs never crash dpcheck.

The long run is `python benchmarks/fuzz.py N`; this keeps CI short (well under a minute).
A crash is an exception, a DP002 finding (a rule's internal error), an exit code other
than 0 or 1, output that is not JSON, or different results between the sequential,
parallel and cached paths.
"""

import importlib.util
import json
import random
import sys

import pytest
from conftest import ROOT, run_cli
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(ROOT / "benchmarks"))
import fuzz  # noqa: E402  (benchmarks/fuzz.py: the mutators and checks)

from dpcheck.engine import _instantiate  # noqa: E402
from dpcheck.registry import all_rules  # noqa: E402

RULES = _instantiate([r.code for r in all_rules()])
SEEDS = fuzz.load_seeds()
POOLS = fuzz._Pools([__import__("ast").parse(s) for s in SEEDS], random.Random(0))
FUZZ = settings(max_examples=60, deadline=None, database=None, derandomize=True,
                suppress_health_check=list(HealthCheck))


def _assert_no_crash(batch):
    assert fuzz.check_batch(batch, RULES, "t") == []


@FUZZ
@given(st.integers(min_value=0, max_value=2**32 - 1))
def test_mutated_model_files_never_crash(seed):
    rng = random.Random(seed)
    _assert_no_crash([fuzz.generate(rng, SEEDS, POOLS) for _ in range(3)])


@pytest.mark.skipif(importlib.util.find_spec("hypothesmith") is None,
                    reason="hypothesmith is not installed (pip install hypothesmith)")
def test_generated_programs_never_crash():
    import hypothesmith

    @settings(max_examples=25, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(hypothesmith.from_node())
    def check(source):
        _assert_no_crash([source.encode("utf-8", "surrogatepass")])

    check()


def test_cli_paths_agree_on_mutated_files():
    """Sequential, parallel, cold and warm cache: the same valid JSON, exit 0 or 1."""
    rng = random.Random(20261126)
    batch = [fuzz.generate(rng, SEEDS, POOLS) for _ in range(24)]  # over the pool threshold (16)
    assert fuzz.check_cli(batch, jobs=2) == []


def test_reduced_crashes_stay_fixed(tmp_path):
    """Inputs the long fuzz run once crashed on (reduced), through the real command."""
    cases = sorted((ROOT / "tests" / "data" / "fuzz_crashes").glob("*.py"))
    if not cases:
        pytest.skip("no reduced crash cases recorded")
    proc = run_cli(*cases, "--isolated", "--select", "ALL", "--no-cache", "--output-format", "json")
    assert proc.returncode in (0, 1), proc.stderr
    data = json.loads(proc.stdout)
    assert not [f for f in data if f["code"] == "DP002"]
    assert "Traceback" not in proc.stderr
