"""The findings contract: each type's to_dict/from_dict round-trips (through JSON too, as the
cache and the child protocol carry it), and malformed input is rejected."""

import copy
import json

import pytest

from dpcheck.confirmation import Confirmation, ConfirmationStatus, Observation
from dpcheck.findings import Applicability, Edit, Finding, Fix, Severity, Subject

EDIT = Edit("self.register_buffer('steps', torch.zeros(()))", 9, 8, 9, 23)
MULTILINE_EDIT = Edit("x = 'é'\n", 3, 0, 5, 0)
FIX = Fix("Keep the counter in a buffer", (EDIT, MULTILINE_EDIT), Applicability.SAFE.value)
CONFIRMATION = Confirmation(ConfirmationStatus.CONFIRMED.value, "emulated", "replica wrote self.steps", 8, 2)
SUBJECT = Subject(attr="steps", output_path="output['loss']", argument="x", device="'cuda:0'", class_name="Net")
FINDING = Finding("DP101", "`self.steps` is written in forward", Severity.ERROR.value, "pkg/model.py",
                  12, 9, 12, 24, "        self.steps += 1", FIX, 12,
                  (frozenset({"pkg.base.Base"}), frozenset({"a.B", "c.D"})), CONFIRMATION, True, SUBJECT,
                  error_if=(frozenset({"wrapper_passes:pkg.model.Net:labels@1"}),),
                  advice_if=("unpassed:pkg.model.Net:mask@2",))
OBSERVATION = Observation("state-lost", "replica wrote steps", line=12, attr="steps", output_path="out[0]",
                          argument="x", batch=4, model="Net", class_name="Net", details={"replicas": 2})

VALUES = [
    EDIT, MULTILINE_EDIT, FIX,
    Fix("display only", (), Applicability.DISPLAY_ONLY.value),
    CONFIRMATION,
    Confirmation(ConfirmationStatus.NOT_RUN.value, "cuda", "no GPU"),  # batch/devices absent
    SUBJECT, Subject(), Subject(attr="w"),
    FINDING,
    Finding("DP000", "SyntaxError: bad", "error", "x.py", 1, 1, 1, 1, ""),  # every optional field empty
    OBSERVATION,
    Observation("exception", "boom"),
]


@pytest.mark.parametrize("value", VALUES, ids=lambda v: type(v).__name__)
def test_round_trip(value):
    data = value.to_dict()
    assert type(value).from_dict(data) == value
    through_json = json.loads(json.dumps(data))
    assert type(value).from_dict(through_json) == value


def test_edit_dict_uses_ruffs_one_based_columns():
    assert EDIT.to_dict() == {"content": EDIT.content, "location": {"row": 9, "column": 9},
                              "end_location": {"row": 9, "column": 24}}


def test_optional_fields_are_left_out_and_none_reads_as_absent():
    assert "batch" not in Confirmation("not-run", "cuda", "").to_dict()
    assert Subject().to_dict() == {}
    assert Subject.from_dict(None) == Subject()
    assert Fix.from_dict(None) is None
    assert Confirmation.from_dict(None) is None
    assert "details" not in Observation("exception", "boom").to_dict()
    assert "error_if" not in Finding("DP000", "SyntaxError: bad", "error", "x.py", 1, 1, 1, 1, "").to_dict()
    # A finding written before subjects existed still reads.
    data = FINDING.to_dict()
    del data["subject"]
    assert Finding.from_dict(data).subject == Subject()


def test_subject_ignores_unknown_keys():
    assert Subject.from_dict({"attr": "w", "colour": "red"}) == Subject(attr="w")


def _broken(value, path, new=None, delete=False):
    data = copy.deepcopy(value.to_dict())
    target = data
    for key in path[:-1]:
        target = target[key]
    if delete:
        del target[path[-1]]
    else:
        target[path[-1]] = new
    return data


MALFORMED = [
    (Edit, _broken(EDIT, ["content"], delete=True)),
    (Edit, _broken(EDIT, ["location", "row"], "nine")),
    (Edit, _broken(EDIT, ["end_location"], "9:24")),
    (Fix, _broken(FIX, ["applicability"], "sometimes")),
    (Fix, _broken(FIX, ["message"], delete=True)),
    (Fix, _broken(FIX, ["edits"], [{"content": "x"}])),
    (Confirmation, _broken(CONFIRMATION, ["status"], "probably")),
    (Confirmation, _broken(CONFIRMATION, ["batch"], "eight")),
    (Confirmation, _broken(CONFIRMATION, ["backend"], delete=True)),
    (Finding, _broken(FINDING, ["severity"], "fatal")),
    (Finding, _broken(FINDING, ["span"], [12, 9, 12])),
    (Finding, _broken(FINDING, ["span"], [12, 9, 12, "end"])),
    (Finding, _broken(FINDING, ["span"], None)),
    (Finding, _broken(FINDING, ["requires"], delete=True)),
    (Finding, _broken(FINDING, ["noqa_row"], "twelve")),
    (Finding, _broken(FINDING, ["fix", "applicability"], "maybe")),
    (Finding, _broken(FINDING, ["confirmation", "status"], "yes")),
    (Finding, _broken(FINDING, ["code"], delete=True)),
    (Observation, _broken(OBSERVATION, ["kind"], delete=True)),
    (Observation, _broken(OBSERVATION, ["line"], "twelve")),
    (Observation, _broken(OBSERVATION, ["batch"], [4])),
]


@pytest.mark.parametrize("cls, data", MALFORMED, ids=[f"{c.__name__}-{i}" for i, (c, _) in enumerate(MALFORMED)])
def test_from_dict_rejects_malformed_input(cls, data):
    with pytest.raises((KeyError, TypeError, ValueError)):
        cls.from_dict(data)


def test_from_dict_rejects_a_subject_that_is_not_a_mapping():
    with pytest.raises((KeyError, TypeError, ValueError)):
        Finding.from_dict(_broken(FINDING, ["subject"], "steps"))


def test_from_dict_rejects_requires_that_are_not_lists_of_names():
    with pytest.raises(TypeError):
        Finding.from_dict(_broken(FINDING, ["requires"], ["abc"]))


def test_finding_with_confirmation_keeps_everything_else():
    other = Confirmation("not-reproduced", "emulated", "ran fine", 4, 2)
    updated = FINDING.with_confirmation(other)
    assert updated.confirmation == other
    assert Finding.from_dict(updated.to_dict()) == updated
    assert updated.to_dict() | {"confirmation": None} == FINDING.to_dict() | {"confirmation": None}
