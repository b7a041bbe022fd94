"""The --confirm side of the findings contract: the harness observes mechanisms, the rules
decide what confirms them, and nothing in between knows a rule by its code."""

import ast
import re
from pathlib import Path

import pytest
from conftest import ROOT

from dpcheck.confirm import attribute, not_compared
from dpcheck.confirmation import Observation
from dpcheck.engine import check_stdin
from dpcheck.findings import EVIDENCE_ONLY_KINDS, Finding, ObservationKind, Subject
from dpcheck.registry import all_rules, rules_by_code

CODE = re.compile(r"DP\d{3}")
ENGINE_CODES = {"DP001", "DP002", "DP003"}
RULES = {cls.code: cls() for cls in all_rules()}
DYNAMIC = [r for r in RULES.values() if r.kind == "dynamic"]


def _code_strings(path: Path):
    """String constants in a module's code: docstrings and `help=` texts (examples for users) left out."""
    tree = ast.parse(path.read_text())
    skip = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body \
                and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant):
            skip.add(id(node.body[0].value))
        if isinstance(node, ast.keyword) and node.arg == "help":
            skip.update(id(n) for n in ast.walk(node.value))
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            yield node.value
        if isinstance(node, ast.Name):
            yield node.id


def test_the_harness_and_confirm_know_no_rule_code():
    files = [*sorted((ROOT / "dpcheck" / "harness").glob("*.py")), ROOT / "dpcheck" / "confirm.py"]
    for path in files:
        assert not CODE.findall(path.read_text()), path  # not even in comments
    for path in (ROOT / "dpcheck" / "run.py", ROOT / "dpcheck" / "engine.py"):
        assert set(CODE.findall(path.read_text())) <= ENGINE_CODES, path


def test_dpcheck_code_names_only_the_engine_codes():
    for path in sorted((ROOT / "dpcheck").rglob("*.py")):
        found = {c for text in _code_strings(path) for c in CODE.findall(text)}
        assert found <= ENGINE_CODES, (path, found - ENGINE_CODES)
        # Not in comments, docstrings or --help either (the issue's `grep -E 'DP[0-9]{3}' dpcheck/`).
        assert set(CODE.findall(path.read_text())) <= ENGINE_CODES, path


def test_rules_declare_only_known_observation_kinds():
    kinds = {k.value for k in ObservationKind}
    for rule in RULES.values():
        assert set(rule.confirms) <= kinds, rule.code
        assert set(rule.reports) <= kinds, rule.code
        assert set(rule.supersedes) <= {r.code for r in DYNAMIC}, rule.code
        if rule.kind == "dynamic":
            assert rule.reports and not rule.confirms, rule.code
        else:
            assert not rule.reports and not rule.supersedes, rule.code


def _variants(kind):
    raised = kind in (ObservationKind.DEVICE_MISMATCH, ObservationKind.EXCEPTION_AT_LINE,
                      ObservationKind.GATHER_FAILED, ObservationKind.KEYWORD_CHUNK_MISMATCH)
    yield Observation(kind.value, "x")
    if raised:
        yield Observation(kind.value, "x", details={"exception": "RuntimeError"})
        if kind != ObservationKind.GATHER_FAILED:
            yield Observation(kind.value, "x", details={"exception": "RuntimeError", "first_batch_ran": 4})


@pytest.mark.parametrize("kind", [k for k in ObservationKind if k not in EVIDENCE_ONLY_KINDS])
def test_every_observation_kind_is_reported_by_exactly_one_dynamic_rule(kind):
    for obs in _variants(kind):
        reporters = [r.code for r in DYNAMIC if r.reports_observation(obs)]
        assert len(reporters) == 1, (obs, reporters)


def test_observation_round_trips():
    obs = Observation(ObservationKind.STATE_LOST_ON_REPLICA.value, "lost", line=3, attr="steps",
                      output_path="output[0]", argument="x", batch=4, model="Net", class_name="Net",
                      details={"path": "enc.steps"})
    assert Observation.from_dict(obs.to_dict()) == obs


def _finding(code, row=10, end_row=None, attr=None, class_name="Net"):
    return Finding(code, "message", "error", "m.py", row, 1, end_row or row, 5, "", None, row,
                   subject=Subject(attr=attr, class_name=class_name))


def test_a_state_observation_confirms_only_the_finding_about_its_attribute():
    lost = Observation(ObservationKind.STATE_LOST_ON_REPLICA.value, "`steps` lost", attr="steps")
    dp101 = RULES["DP101"]
    assert dp101.matches(_finding("DP101", attr="steps"), lost, ran=True)
    assert not dp101.matches(_finding("DP101", attr="other"), lost, ran=True)
    assert not dp101.matches(_finding("DP101", attr="steps"), lost, ran=False)  # its line never ran
    # A kind the rule does not confirm.
    assert not RULES["DP301"].matches(_finding("DP301"), lost, ran=True)


def test_an_observation_at_a_findings_line_confirms_it_whatever_its_kind():
    at = Observation(ObservationKind.EXCEPTION_AT_LINE.value, "boom", line=11, details={"exception": "E"})
    assert RULES["DP401"].matches(_finding("DP401", row=10, end_row=12), at, ran=False)
    assert not RULES["DP401"].matches(_finding("DP401", row=13), at, ran=True)


def test_a_scalar_output_is_not_evidence_for_a_squeeze():
    gathered = Observation(ObservationKind.SCALAR_OUTPUT_GATHERED.value, "0-dim -> (2,)", output_path="output")
    assert RULES["DP401"].matches(_finding("DP401"), gathered, ran=True)
    assert not RULES["DP603"].matches(_finding("DP603"), gathered, ran=True)


def _result(observations, executed=(10,), failures=()):
    return {"backend": "emulated", "devices": 2, "executed_lines": list(executed), "models": [{
        "label": "dpcheck_example", "inputs": "dpcheck_example() in the model file",
        "report": {"backend": "emulated", "devices": 2, "batches": [4, 3, 1], "compared": [4, 3, 1],
                   "errors": [], "observations": [o.to_dict() for o in observations],
                   "reference_failures": [o.to_dict() for o in failures]}}]}


def test_attribute_confirms_by_subject_and_reports_the_rest_through_dynamic_rules():
    lost = Observation(ObservationKind.STATE_LOST_ON_REPLICA.value, "`steps` lost", attr="steps", batch=4)
    other = Observation(ObservationKind.STATE_LOST_ON_REPLICA.value, "`other` lost", attr="other", batch=4)
    out = attribute([_finding("DP101", attr="steps")], _result([lost, other]), "m.py")
    static = [f for f in out if f.code == "DP101"]
    assert static[0].confirmation.status == "confirmed" and "`steps` lost" in static[0].confirmation.evidence
    dynamic = [f for f in out if f.code != "DP101"]
    # The unexplained observation is reported by the dynamic rule that declares its kind.
    assert [f.code for f in dynamic] == [r.code for r in DYNAMIC if r.reports_observation(other)]
    assert "`other` lost" in dynamic[0].message


def test_a_badly_split_argument_supersedes_the_differences_it_causes():
    split = Observation(ObservationKind.ARGUMENT_NOT_BATCH_SPLIT.value, "argument 1 split", batch=4)
    values = Observation(ObservationKind.VALUES_DIFFER.value, "output differs", output_path="output", batch=4)
    out = attribute([], _result([values, split]), "m.py")
    root = next(r for r in DYNAMIC if r.reports_observation(split))
    assert [f.code for f in out] == [root.code]
    # Without the root cause, the difference itself is reported.
    alone = attribute([], _result([values]), "m.py")
    assert [f.code for f in alone] == [next(r.code for r in DYNAMIC if r.reports_observation(values))]


def test_a_single_device_failure_is_evidence_but_never_a_dynamic_finding():
    failed = Observation(ObservationKind.DEVICE_MISMATCH.value, "fails on a single device too", line=30)
    out = attribute([_finding("DP301", row=10)], _result([], failures=[failed]), "m.py")
    assert [(f.code, f.confirmation.status) for f in out] == [("DP301", "confirmed")]


def test_rules_that_cannot_be_confirmed_say_why():
    script = next(r for r in RULES.values() if r.not_confirmable and r.code.startswith("DP7"))
    out = attribute([_finding(script.code)], _result([]), "m.py")
    assert out[0].confirmation.status == "not-run" and out[0].confirmation.evidence == script.not_confirmable


SOURCE = '''import torch
import torch.nn as nn


class Counter(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.steps = 0

    def forward(self, x):
        self.steps += 1
        return self.fc(x)
'''


def test_class_rule_findings_carry_their_subject():
    result = check_stdin(SOURCE, "m.py", list(rules_by_code()))
    dp101 = [f for f in result.findings if f.code == "DP101"]
    assert dp101 and dp101[0].subject == Subject(attr="steps", class_name="Counter")
    # The subject survives the cache and the child protocol.
    assert Finding.from_dict(dp101[0].to_dict()).subject == dp101[0].subject


def test_a_file_whose_model_was_not_compared_gets_a_file_level_not_run_finding():
    broken = {"backend": "emulated", "devices": 2, "error": "importing or running the model raised ImportError: x"}
    out = attribute([], broken, "m.py")
    assert [(f.code, f.row, f.confirmation.status) for f in out] == [("DP003", 1, "not-run")]
    assert "ImportError: x" in out[0].message and "ImportError: x" in out[0].confirmation.evidence
    # The reference run failed at every batch size: nothing was compared either.
    failed = Observation(ObservationKind.REFERENCE_FAILED.value, "fails on a single device too: ValueError: y")
    result = _result([], failures=[failed])
    result["models"][0]["report"]["compared"] = []
    assert "ValueError: y" in not_compared(result)
    assert [f.code for f in attribute([], result, "m.py")] == ["DP003"]
    # No input could be made for the only model.
    unmade = {"backend": "emulated", "devices": 2, "models": [{"label": "Net", "not_run": "needs arguments (w)"}]}
    assert "Net: needs arguments (w)" in not_compared(unmade)


def test_a_compared_file_or_one_with_nothing_to_run_gets_no_file_level_finding():
    assert not_compared(_result([])) is None
    assert attribute([], _result([]), "m.py") == []
    assert not_compared({"backend": "emulated", "devices": 2, "models": []}) is None


def test_a_state_observation_confirms_only_findings_in_the_class_whose_state_differed():
    lost = Observation(ObservationKind.STATE_LOST_ON_REPLICA.value, "`steps` lost", attr="steps",
                       class_name="Outer", details={"path": "steps", "classes": ["Outer", "Base"]})
    dp101 = RULES["DP101"]
    assert dp101.matches(_finding("DP101", attr="steps", class_name="Outer"), lost, ran=True)
    assert dp101.matches(_finding("DP101", attr="steps", class_name="Base"), lost, ran=True)  # inherited forward
    # Another class with an attribute of the same name: before, any `self.steps` finding was confirmed.
    assert not dp101.matches(_finding("DP101", attr="steps", class_name="Inner"), lost, ran=True)


def test_state_observations_name_the_class_that_owns_the_attribute():
    import torch

    from dpcheck.harness import check

    class Inner(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(4, 4)
            self.calls = 0

        def forward(self, x):
            self.calls += 1
            return self.fc(x)

    class Outer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = Inner()

        def forward(self, x):
            return self.inner(x)

    report = check(Outer(), (torch.randn(4, 4),), backend="emulated")
    lost = [o for o in report.observations if o.attr == "calls"]
    assert lost and lost[0].class_name == "Inner" and lost[0].details["path"] == "inner.calls"


def test_a_finding_whose_line_never_ran_under_dataparallel_because_the_run_stopped_is_not_run():
    stop = Observation(ObservationKind.DEVICE_MISMATCH.value, "raised: not on the same device", line=12,
                       batch=4, details={"exception": "RuntimeError"})
    result = _result([stop], executed=(12, 20))
    result["dataparallel_lines"] = [12]
    result["reference_lines"] = [12, 20]  # line 20 ran in the single-device forward only
    out = {f.row: f for f in attribute([_finding("DP301", row=12), _finding("DP101", row=20, attr="steps")],
                                       result, "m.py")}
    assert out[12].confirmation.status == "confirmed"
    later = out[20].confirmation
    # Before: "not-reproduced: the line ran under DataParallel" (it ran on one device only).
    assert later.status == "not-run"
    assert later.evidence == "the DataParallel run stopped at line 12 (DP301) before this line ran"


def test_dynamic_findings_are_reported_at_each_line_where_they_arose():
    first = Observation(ObservationKind.EXCEPTION_AT_LINE.value, "raised at 12", line=12, batch=4,
                        details={"exception": "E"})
    again = Observation(ObservationKind.EXCEPTION_AT_LINE.value, "raised at 12", line=12, batch=3,
                        details={"exception": "E"})
    other = Observation(ObservationKind.EXCEPTION_AT_LINE.value, "raised at 15", line=15, batch=1,
                        details={"exception": "E"})
    out = attribute([], _result([first, again, other], executed=(12, 15)), "m.py")
    # One per line (the same failure at another batch size is the same occurrence), not one per file at 1:1.
    assert sorted(f.row for f in out) == [12, 15]


def test_a_single_device_failure_that_confirms_a_finding_needs_no_file_level_finding():
    failed = Observation(ObservationKind.DEVICE_MISMATCH.value, "fails on a single device too", line=30)
    result = _result([], failures=[failed])
    result["models"][0]["report"]["compared"] = []
    assert not_compared(result)  # nothing was compared ...
    out = attribute([_finding("DP301", row=10)], result, "m.py")
    # ... but the file is not reported clean either: its finding is confirmed.
    assert [(f.code, f.confirmation.status) for f in out] == [("DP301", "confirmed")]


def test_a_findings_subject_attribute_is_read_from_its_node():
    source = SOURCE.replace("        self.steps += 1\n", "        self.steps += 1\n        self.log.append(x)\n") \
        .replace("        self.steps = 0\n", "        self.steps = 0\n        self.log = []\n")
    result = check_stdin(source, "m.py", list(rules_by_code()))
    attrs = {(f.code, f.subject.attr) for f in result.findings if f.code in ("DP101", "DP102")}
    assert ("DP101", "steps") in attrs and ("DP102", "log") in attrs, attrs


def _two_models(first, second, lines=(10, 40)):
    """A file with two example models: `A` (class A, its lines ran under DataParallel) and `B`."""
    def model(label, observations, classes, ran):
        return {"label": label, "inputs": f"dpcheck_example_{label}()", "executed_lines": list(ran),
                "dataparallel_lines": list(ran), "reference_lines": list(ran),
                "report": {"backend": "emulated", "devices": 2, "batches": [4, 3, 1], "compared": [4, 3, 1],
                           "errors": [], "classes": classes, "observations": [o.to_dict() for o in observations],
                           "reference_failures": []}}
    return {"backend": "emulated", "devices": 2, "executed_lines": list(lines), "dataparallel_lines": list(lines),
            "models": [model("A", first, ["A"], [lines[0]]), model("B", second, ["B"], [lines[1]])]}


def test_an_observation_of_one_model_confirms_only_findings_in_that_models_classes():
    values = Observation(ObservationKind.VALUES_DIFFER.value, "output differs", output_path="output", batch=4,
                         model="B")
    # A's return line ran under DataParallel; the output that differed is B's.
    out = attribute([_finding("DP404", row=10, class_name="A")], _two_models([], [values]), "m.py")
    by_code = {f.code: f for f in out}
    assert by_code["DP404"].confirmation.status == "not-reproduced", by_code["DP404"].confirmation
    # B's difference is reported for B, by the dynamic rule of its kind.
    assert any("model: B" in f.confirmation.evidence for f in out if f.code != "DP404")


def test_a_finding_whose_line_ran_only_on_one_device_is_never_confirmed_by_a_kind_it_lists():
    lost = Observation(ObservationKind.STATE_LOST_ON_REPLICA.value, "`steps` lost", attr="steps", batch=4)
    result = _result([lost], executed=(10,))
    result["dataparallel_lines"], result["reference_lines"] = [], [10]
    out = attribute([_finding("DP101", attr="steps")], result, "m.py")
    assert out[0].confirmation.status == "not-run", out[0].confirmation


def test_a_symptom_is_evidence_for_one_finding_only():
    grads = Observation(ObservationKind.GRADS_DIFFER.value, "the gradient of `w` differs", batch=4)
    findings = [_finding("DP404", row=10), _finding("DP601", row=11), _finding("DP205", row=12)]
    out = {f.code: f.confirmation for f in attribute(findings, _result([grads], executed=(10, 11, 12)), "m.py")}
    confirmed = [code for code, c in out.items() if c.status == "confirmed"]
    assert len(confirmed) == 1, out  # before: all three "confirmed" by one gradient difference
    # The others say where the difference went instead of claiming the run matched.
    for code, c in out.items():
        if code not in confirmed:
            assert c.status == "not-reproduced" and f"explained by {confirmed[0]}" in c.evidence, c


def test_an_error_at_a_line_goes_to_the_finding_whose_argument_it_names():
    raised = Observation(ObservationKind.EXCEPTION_AT_LINE.value, "raised RuntimeError: Expected hidden[0] size "
                         "(2, 4, 16), got [1, 4, 16]", line=47, batch=4, details={"exception": "RuntimeError"})
    split = Observation(ObservationKind.ARGUMENT_NOT_BATCH_SPLIT.value, "argument 0 split along time",
                        argument="input", batch=4, details={"argument": "argument 0"})
    layout = _finding("DP501", row=47)
    hidden = Finding("DP502", "m", "error", "m.py", 47, 20, 47, 26, "", None, 47,
                     subject=Subject(argument="hidden", class_name="Net"))
    out = {f.code: f.confirmation for f in attribute([layout, hidden], _result([raised, split], executed=(47,)),
                                                      "m.py")}
    assert out["DP502"].status == "confirmed" and "Expected hidden" in out["DP502"].evidence
    assert out["DP501"].status == "confirmed" and "Expected hidden" not in out["DP501"].evidence, out["DP501"]


def test_an_argument_observation_confirms_only_a_finding_about_that_argument():
    split = Observation(ObservationKind.ARGUMENT_NOT_BATCH_SPLIT.value, "argument 1 split", argument="hidden")
    rule = RULES["DP502"]
    about = Finding("DP502", "m", "error", "m.py", 10, 1, 10, 5, "", None, 10, subject=Subject(argument="hidden"))
    other = Finding("DP502", "m", "error", "m.py", 10, 1, 10, 5, "", None, 10, subject=Subject(argument="state"))
    assert rule.matches(about, split, ran=True) and not rule.matches(other, split, ran=True)


def test_a_findings_not_run_reason_says_which_mode_ran():
    result = _result([], executed=(10,))
    result["dataparallel_lines"], result["reference_lines"] = [10], [10]
    result["models"][0]["report"]["mode"] = "training"
    out = attribute([_finding("DP101", row=30, attr="steps")], result, "m.py")
    assert out[0].confirmation.status == "not-run" and "training mode" in out[0].confirmation.evidence


def test_batchnorm_statistics_per_replica_confirm_the_batchnorm_finding_of_their_class():
    stats = Observation(ObservationKind.BATCHNORM_STATS_PER_REPLICA.value, "per-chunk means differ", batch=4,
                        class_name="Net", details={"classes": ["Net"]})
    out = attribute([_finding("DP602", row=10)], _result([stats], executed=(10,)), "m.py")
    assert [(f.code, f.confirmation.status) for f in out] == [("DP602", "confirmed")]
    # Alone, expected behaviour: never a finding of its own.
    assert attribute([], _result([stats]), "m.py") == []


def test_a_device_mismatch_whose_shared_container_was_seen_is_evidence_for_that_finding_only():
    cause = Observation(ObservationKind.SHARED_CONTAINER_TENSOR_ON_OTHER_DEVICE.value,
                        "`masks` is a dict every replica shares; ... on cuda:0, and the replica on cuda:1 read it",
                        attr="masks", batch=4, class_name="Net", details={"path": "masks", "classes": ["Net"]})
    mismatch = Observation(ObservationKind.DEVICE_MISMATCH.value, "raised Expected all tensors to be on the same "
                           "device", line=23, batch=4, details={"exception": "RuntimeError", "cause": {
                               "kind": cause.kind, "path": "masks"}})
    cache = _finding("DP102", row=20, attr="masks")
    out = attribute([cache], _result([cause, mismatch], executed=(20, 23)), "m.py")
    assert [f.code for f in out] == ["DP102"], out  # the symptom is not reported a second time
    assert out[0].confirmation.status == "confirmed" and "`masks`" in out[0].confirmation.evidence
    # Without a finding that explains the container, the mismatch is still reported.
    alone = attribute([], _result([cause, mismatch], executed=(20, 23)), "m.py")
    assert [f.row for f in alone] == [23] and "same device" in alone[0].message
    # A finding about another attribute does not take it.
    other = attribute([_finding("DP102", row=20, attr="history")], _result([cause, mismatch], executed=(20, 23)),
                      "m.py")
    assert other[0].confirmation.status != "confirmed" and [f.row for f in other[1:]] == [23]
