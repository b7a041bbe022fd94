"""Independent models and scripts, not written with the fixtures' markers: exact findings."""

import json

from conftest import ROOT, run_cli

HELDOUT = ROOT / "tests" / "heldout"

EXPECTED = {
    "clip_like.py": {(28, "DP601"), (29, "DP101"), (30, "DP601"), (31, "DP401")},
    "moco_like.py": {(19, "DP103"), (20, "DP103"), (26, "DP102")},
    "careful_model.py": set(),
    "train_script.py": {(8, "DP704"), (8, "DP706"), (14, "DP707"), (15, "DP703"), (17, "DP702"), (18, "DP701")},
    "good_script.py": set(),
    "zoo_hazards.py": {(14, "DP104"), (23, "DP602"), (25, "DP106"), (33, "DP501"), (34, "DP405"), (37, "DP203"),
                       (40, "DP603"), (40, "DP404"), (40, "DP403"), (40, "DP406")},
    "zoo_safe.py": set(),
}


def test_heldout_files_are_classified_exactly():
    proc = run_cli(HELDOUT, "--output-format", "json", "--no-cache")
    assert proc.returncode in (0, 1), proc.stderr
    found = {}
    for f in json.loads(proc.stdout):
        found.setdefault(f["filename"].rsplit("/", 1)[-1], set()).add((f["location"]["row"], f["code"]))
    for name, expected in EXPECTED.items():
        assert found.get(name, set()) == expected, name


def test_heldout_models_are_confirmed_through_an_examples_file(project):
    import shutil

    import pytest
    pytest.importorskip("torch")
    for name in ("clip_like.py", "moco_like.py", "examples.py"):
        shutil.copy(HELDOUT / name, project / name)
    (project / "dpcheck.toml").write_text('examples = "examples.py"\nextend-exclude = ["examples.py"]\n')
    proc = run_cli("clip_like.py", "moco_like.py", "--confirm", "--backend", "emulated", "--output-format", "json",
                   "--no-cache", cwd=project)
    status = {(f["filename"].rsplit("/", 1)[-1], f["location"]["row"], f["code"]): f["confirmation"]["status"]
              for f in json.loads(proc.stdout)}
    assert status[("clip_like.py", 29, "DP101")] == "confirmed"
    assert status[("clip_like.py", 31, "DP401")] == "confirmed"
    assert status[("moco_like.py", 26, "DP102")] == "confirmed"
    assert status[("moco_like.py", 19, "DP103")] == "confirmed"
