"""--fix and its relatives: the fix interface (ruff's flags) and the file guarantees.

Each case under "Why" in the --fix issue has a test here: encodings, BOMs, symlinks,
read-only files and folders, files changed on disk, line mapping with form feeds and
U+2028, fix loops that settle, and noqa insertion that merges with what is there.
"""

import json
import os
import stat

import pytest
from conftest import run_cli

MODEL = '''import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return self.fc(x).cuda(0)  # keep this comment
'''
FIXED = MODEL.replace(".cuda(0)", ".cuda()")


def fix(path, *extra):
    return run_cli(path.name, "--fix", "--unsafe-fixes", "--no-cache", *extra, cwd=path.parent)


@pytest.fixture
def model(project):
    path = project / "m.py"
    path.write_text(MODEL)
    return path


def test_safe_only_by_default_and_unsafe_when_asked(model):
    proc = run_cli("m.py", "--fix", "--no-cache", cwd=model.parent)
    assert model.read_text() == MODEL  # DP301's fix is unsafe
    assert "hidden fix" in proc.stdout
    proc = fix(model)
    assert model.read_text() == FIXED
    assert proc.returncode == 0 and "Fixed 1 finding" in proc.stderr


def test_second_run_changes_nothing(model):
    fix(model)
    first = model.read_bytes()
    proc = fix(model)
    assert model.read_bytes() == first and "Fixed" not in proc.stderr


def test_diff_writes_nothing_and_exits_1(model):
    proc = run_cli("m.py", "--diff", "--unsafe-fixes", "--no-cache", cwd=model.parent)
    assert proc.returncode == 1
    assert "-        return self.fc(x).cuda(0)  # keep this comment" in proc.stdout
    assert "+        return self.fc(x).cuda()  # keep this comment" in proc.stdout
    assert model.read_text() == MODEL
    model.write_text(FIXED)
    assert run_cli("m.py", "--diff", "--unsafe-fixes", "--no-cache", cwd=model.parent).returncode == 0


def test_fix_on_stdin_writes_the_fixed_source_to_stdout(project):
    # As ruff: the fixed code on stdout (an editor replaces the buffer with it), what is left
    # to report on stderr; before, --fix on stdin was ignored and the findings went to stdout.
    proc = run_cli("--fix", "--unsafe-fixes", "--stdin-filename", "m.py", stdin=MODEL, cwd=project)
    assert proc.stdout == FIXED
    assert proc.returncode == 0, proc.stderr
    proc = run_cli("-", "--fix", stdin=MODEL, cwd=project)  # the fix is unsafe: nothing applied
    assert proc.stdout == MODEL
    assert proc.returncode == 1 and "DP301" in proc.stderr
    assert run_cli("-", "--fix-only", "--unsafe-fixes", stdin=MODEL, cwd=project).stdout == FIXED
    proc = run_cli("-", "--diff", "--unsafe-fixes", stdin=MODEL, cwd=project)
    assert proc.returncode == 1
    assert "+        return self.fc(x).cuda()  # keep this comment" in proc.stdout
    assert run_cli("-", "--diff", "--unsafe-fixes", stdin=FIXED, cwd=project).returncode == 0


def test_fix_only_and_exit_non_zero_on_fix(model):
    hazard = MODEL.replace("return self.fc(x)", "self.total = x.sum() + self.total\n        return self.fc(x)")
    model.write_text(hazard)  # DP101 (no fix) stays; DP301 is fixed
    proc = run_cli("m.py", "--fix-only", "--unsafe-fixes", "--no-cache", cwd=model.parent)
    assert proc.returncode == 0 and "DP101" not in proc.stdout
    model.write_text(hazard)
    proc = run_cli("m.py", "--fix-only", "--unsafe-fixes", "--exit-non-zero-on-fix", "--no-cache", cwd=model.parent)
    assert proc.returncode == 1
    model.write_text(hazard)
    proc = fix(model, "--show-fixes")
    assert "1 × DP301" in proc.stdout and "DP101" in proc.stdout and proc.returncode == 1


def test_json_carries_edits_and_applicability(model):
    proc = run_cli("m.py", "--output-format", "json", "--no-cache", cwd=model.parent)
    (finding,) = json.loads(proc.stdout)
    assert finding["fix"]["applicability"] == "unsafe"
    assert finding["fix"]["edits"] == [{"content": "", "location": {"row": 11, "column": 32},
                                       "end_location": {"row": 11, "column": 33}}]


def test_full_format_marks_fixable_findings(model):
    plain = run_cli("m.py", "--no-cache", cwd=model.parent).stdout
    assert "DP301 [error]" in plain  # unsafe: not fixable without --unsafe-fixes
    marked = run_cli("m.py", "--no-cache", "--unsafe-fixes", cwd=model.parent).stdout
    assert "DP301 [*] [error]" in marked and "[*] 1 fixable with `--fix --unsafe-fixes`." in marked


def test_coding_cookie_is_kept(project):
    path = project / "m.py"
    source = "# -*- coding: latin-1 -*-\n" + MODEL.replace("keep this comment", "caf\u00e9 \u00b5")
    path.write_bytes(source.encode("latin-1"))
    fix(path)
    data = path.read_bytes()
    assert data == source.replace(".cuda(0)", ".cuda()").encode("latin-1")


def test_bom_is_kept(project):
    path = project / "m.py"
    path.write_bytes(b"\xef\xbb\xbf" + MODEL.encode())
    fix(path)
    assert path.read_bytes() == b"\xef\xbb\xbf" + FIXED.encode()


def test_crlf_line_endings_are_kept(project):
    path = project / "m.py"
    path.write_bytes(MODEL.replace("\n", "\r\n").encode())
    fix(path)
    assert path.read_bytes() == FIXED.replace("\n", "\r\n").encode()


def test_symlink_target_is_fixed_and_link_kept(project):
    (project / "real").mkdir()
    target = project / "real" / "m.py"
    target.write_text(MODEL)
    link = project / "link.py"
    link.symlink_to(target)
    proc = run_cli("link.py", "--fix", "--unsafe-fixes", "--no-cache", cwd=project)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert link.is_symlink() and target.read_text() == FIXED


def test_permissions_and_owner_are_kept(model):
    os.chmod(model, 0o640)
    if os.getuid() == 0:
        os.chown(model, 4321, 4321)
    fix(model)
    st = model.stat()
    assert stat.S_IMODE(st.st_mode) == 0o640 and model.read_text() == FIXED
    if os.getuid() == 0:
        assert (st.st_uid, st.st_gid) == (4321, 4321)


def test_read_only_file_is_skipped_with_a_warning(model, tmp_path):
    other = model.parent / "other.py"
    other.write_text(MODEL)
    os.chmod(model, 0o444)
    proc = run_cli("m.py", "other.py", "--fix", "--unsafe-fixes", "--no-cache", cwd=model.parent)
    assert model.read_text() == MODEL and "read-only" in proc.stderr
    assert other.read_text() == FIXED  # the run went on
    assert "Traceback" not in proc.stderr


def test_unwritable_folder_is_reported_and_the_run_goes_on(model, monkeypatch, capsys):
    import tempfile

    from dpcheck.run import CheckOptions, run_check

    other = model.parent / "other.py"
    other.write_text(MODEL)
    real_mkstemp = tempfile.mkstemp

    def refuse(*args, dir=None, **kwargs):
        if dir is not None and os.path.samefile(dir, model.parent) and "m.py" in kwargs.get("prefix", ""):
            raise PermissionError(13, "Permission denied")
        return real_mkstemp(*args, dir=dir, **kwargs)

    monkeypatch.setattr(tempfile, "mkstemp", refuse)
    monkeypatch.chdir(model.parent)
    code = run_check(CheckOptions(paths=[model, other], fix=True, unsafe_fixes=True, no_cache=True))
    err = capsys.readouterr().err
    assert "m.py: not fixed: cannot write next to the file: Permission denied" in err
    assert model.read_text() == MODEL and other.read_text() == FIXED
    assert code == 1  # m.py's finding is still reported


def test_file_changed_on_disk_is_not_overwritten(model):
    from dpcheck.fixes import writer

    snapshot = writer.read(model)
    model.write_text(MODEL + "# edited meanwhile\n")
    with pytest.raises(writer.FixWriteError, match="changed on disk"):
        writer.write(snapshot, FIXED)
    assert model.read_text().endswith("# edited meanwhile\n")


@pytest.mark.parametrize("oddity", ["\f", "s = 'a\u2028b'\n", "s = 'a\x0cb\x1cc\x85d'\n"])
def test_line_mapping_with_form_feeds_and_unicode_separators(project, oddity):
    path = project / "m.py"
    source = MODEL.replace("import torch\n", "import torch\n" + oddity, 1)
    path.write_text(source, newline="")
    proc = fix(path)
    assert path.read_bytes().decode() == source.replace(".cuda(0)", ".cuda()")
    assert "Fixed 1 finding" in proc.stderr


def test_add_noqa_merges_and_skips_strings(project):
    path = project / "m.py"
    source = MODEL.replace("# keep this comment", "# noqa: E501").replace(
        "super().__init__()", "super().__init__()\n        self.doc = '# noqa'")
    source = source.replace("return self.fc(x)", "self.steps = 1\n        return self.fc(x)")
    path.write_text(source)
    proc = run_cli("m.py", "--add-noqa", "--no-cache", cwd=project)
    assert proc.returncode == 0 and "Added 2 noqa directives" in proc.stderr
    text = path.read_text()
    assert "return self.fc(x).cuda(0)  # noqa: E501, DP301" in text
    assert "self.steps = 1  # noqa: DP101" in text
    assert run_cli("m.py", "--no-cache", cwd=project).returncode == 0
    again = run_cli("m.py", "--add-noqa", "--no-cache", cwd=project)
    assert "Added 0 noqa directives" in again.stderr and path.read_text() == text


def test_dtype_follows_an_activation_not_token_ids(project):
    path = project / "m.py"
    path.write_text(MODEL.replace("def forward(self, x):", "def forward(self, input_ids, hidden):").replace(
        "return self.fc(x).cuda(0)  # keep this comment",
        "return self.fc(hidden.to(next(self.parameters()).dtype))"))
    proc = fix(path)
    assert "hidden.to(hidden.dtype)" in path.read_text(), proc.stdout + proc.stderr


def test_sarif_carries_fixes(model):
    proc = run_cli("m.py", "--output-format", "sarif", "--no-cache", cwd=model.parent)
    (result,) = json.loads(proc.stdout)["runs"][0]["results"]
    (fix,) = result["fixes"]
    (change,) = fix["artifactChanges"]
    (replacement,) = change["replacements"]
    assert change["artifactLocation"]["uri"] == "m.py"
    assert replacement["deletedRegion"] == {"startLine": 11, "startColumn": 32, "endLine": 11, "endColumn": 33}
    assert replacement["insertedContent"] == {"text": ""}
