"""What a wrap site runs (its use-set, ClassIndex._uses): sites traced to their classes let a class
no running site builds be advice only; a site that stays unknown keeps every class it reaches at its
severity. Each case is a fixture project under `fixtures/`, run as the engine runs a folder."""
from pathlib import Path

from dpcheck.engine import analyze_files, settle
from dpcheck.registry import rules_by_code

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def _severities(folder: str, code: str = "DP401") -> dict[str, str]:
    """{file name: severity} of ``code``'s findings over one fixture project."""
    paths = sorted((FIXTURES / folder).rglob("*.py"))
    results, _ = analyze_files(paths, sorted(rules_by_code()), jobs=1)
    return {Path(f.filename).name: f.severity for f in settle(results).findings if f.code == code}


def test_an_apex_distributed_wrapper_of_the_model_is_the_model_not_a_class_of_its_own():
    # `model = DDP(model)` in one arm, `model = nn.DataParallel(model)` in the other: the wrap is
    # traced to `Net`, and the head called on the gathered output is advice only.
    assert _severities("dp401/ddppkg") == {"net.py": "error", "heads.py": "info"}


def test_a_library_class_built_around_the_model_leaves_the_wrap_unknown():
    assert _severities("dp401/emapkg") == {"net.py": "error", "heads.py": "error"}
