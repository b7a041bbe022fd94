"""Jupyter notebooks are checked cell by cell, like ruff: discovery, cells, noqa, --fix, cache."""

import json
import shutil

from conftest import FIXTURES, HAZARD, run_cli

NOTEBOOK = FIXTURES / "engine" / "notebook_hazards.ipynb"


def code_cell(text):
    return {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
            "source": text.splitlines(keepends=True)}


def markdown_cell(text):
    return {"cell_type": "markdown", "metadata": {}, "source": text.splitlines(keepends=True)}


def notebook(*cells):
    return {"cells": list(cells), "metadata": {"kernelspec": {"name": "python3"}}, "nbformat": 4, "nbformat_minor": 5}


def write(path, nb, indent=1):
    path.write_text(json.dumps(nb, indent=indent, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def found(project, *args):
    proc = run_cli(*args, "--output-format", "json", cwd=project)
    assert proc.returncode in (0, 1), proc.stderr
    return json.loads(proc.stdout)


def located(findings):
    return sorted((f["filename"].rsplit("/", 1)[-1], f["cell"], f["location"]["row"], f["location"]["column"],
                   f["code"]) for f in findings)


def test_a_notebook_named_on_the_command_line_is_checked_cell_by_cell(project):
    shutil.copy(NOTEBOOK, project / "nb.ipynb")
    assert located(found(project, "nb.ipynb", "--no-cache")) == [
        ("nb.ipynb", 3, 9, 9, "DP101"),     # markdown cell 1 counts; magics in cell 2 parse
        ("nb.ipynb", 3, 11, 26, "DP101"),   # `# noqa` in a string does not suppress
        ("nb.ipynb", 3, 12, 30, "DP301"),
    ]


def test_folder_walks_include_notebooks_and_python_files_keep_cell_null(project):
    shutil.copy(NOTEBOOK, project / "nb.ipynb")
    (project / "m.py").write_text(HAZARD)
    findings = found(project, ".", "--no-cache")
    assert {f["filename"].rsplit("/", 1)[-1] for f in findings} == {"nb.ipynb", "m.py"}
    assert {f["cell"] for f in findings if f["filename"].endswith("m.py")} == {None}
    assert {f["cell"] for f in findings if f["filename"].endswith(".ipynb")} == {3}


def test_text_formats_name_the_cell(project):
    shutil.copy(NOTEBOOK, project / "nb.ipynb")
    concise = run_cli("nb.ipynb", "--no-cache", "--output-format", "concise", cwd=project).stdout
    assert concise.splitlines()[0].startswith("nb.ipynb:cell 3:9:9: DP101")
    full = run_cli("nb.ipynb", "--no-cache", "--output-format", "full", cwd=project).stdout
    assert "nb.ipynb:cell 3:12:30: DP301" in full and '12 |         return self.fc(x).to("cuda:0")' in full
    github = run_cli("nb.ipynb", "--no-cache", "--output-format", "github", cwd=project).stdout
    assert "line=1,col=1" in github and "nb.ipynb:cell 3:9:9: DP101" in github


def test_noqa_applies_per_cell(project):
    forward = "class Net(nn.Module):\n    def forward(self, x):\n        self.a = x{}\n        return x\n"
    nb = notebook(code_cell("import torch.nn as nn\n"), code_cell(forward.format("  # noqa: DP101")),
                  code_cell(forward.format("").replace("Net", "Other")))
    write(project / "nb.ipynb", nb)
    assert located(found(project, "nb.ipynb", "--no-cache")) == [("nb.ipynb", 3, 3, 9, "DP101")]


def test_cell_magics_shell_and_help_lines_parse(project):
    nb = notebook(code_cell("%%bash\necho 'this is not python ('\n"),
                  code_cell("import torch.nn as nn\nfiles = !ls\n%load_ext autoreload\nnn.Linear?\n"),
                  code_cell("if True:\n    !nvidia-smi\nclass Net(nn.Module):\n    def forward(self, x):\n"
                            "        self.a = x\n        return x % 2\n"))
    write(project / "nb.ipynb", nb)
    assert located(found(project, "nb.ipynb", "--no-cache")) == [("nb.ipynb", 3, 5, 9, "DP101")]


def test_syntax_error_is_reported_in_its_cell(project):
    write(project / "nb.ipynb", notebook(code_cell("import torch\n"), markdown_cell("text\n"),
                                         code_cell("x = 1\ny = (\n")))
    (f,) = found(project, "nb.ipynb", "--no-cache")
    assert (f["code"], f["cell"]) == ("DP001", 3)


def test_unreadable_or_empty_notebooks_never_crash(project):
    (project / "bad.ipynb").write_text("{ not json")
    (project / "odd.ipynb").write_text('{"cells": 3}')
    write(project / "prose.ipynb", notebook(markdown_cell("# only prose\n")))
    write(project / "blank.ipynb", notebook(code_cell("")))
    findings = found(project, ".", "--no-cache")
    assert sorted((f["filename"].rsplit("/", 1)[-1], f["code"]) for f in findings) == [
        ("bad.ipynb", "DP001"), ("odd.ipynb", "DP001")]
    assert run_cli("prose.ipynb", "blank.ipynb", "--no-cache", cwd=project).returncode == 0


def test_fix_writes_only_the_edited_cell_back(project):
    for indent in (1, 2):
        path = shutil.copy(NOTEBOOK, project / "nb.ipynb")
        original = json.loads(NOTEBOOK.read_text())
        if indent != 1:
            write(path, original, indent=indent)
        before = path.read_text()
        proc = run_cli("nb.ipynb", "--no-cache", "--fix", "--unsafe-fixes", cwd=project)
        # DP101 counter, DP301 fixed; what remains (a stash, info) does not fail the run
        assert proc.returncode == 0 and "Fixed 2 findings" in proc.stderr
        after = path.read_text()
        fixed = json.loads(after)
        # Only the fixed lines of cell 3 changed; every other byte (indent, key order, final newline) stays.
        old_cell, new_cell = original["cells"][2]["source"], fixed["cells"][2]["source"]
        assert len(old_cell) == len(new_cell)
        assert [i for i, (a, b) in enumerate(zip(old_cell, new_cell)) if a != b] == [4, 8, 11]
        assert new_cell[11].startswith("        return self.fc(x).to(") and "cuda:0" not in new_cell[11]
        assert "# noqa: DP101" in new_cell[9] and new_cell[9] == old_cell[9]  # suppressed: not fixed
        original["cells"][2]["source"] = new_cell
        assert fixed == original and list(fixed) == list(original)
        changed = [(a, b) for a, b in zip(before.splitlines(), after.splitlines()) if a != b]
        assert len(changed) == 3 and len(before.splitlines()) == len(after.splitlines())
        assert after.endswith("}\n")


def test_fix_keeps_a_string_source_a_string(project):
    cell = {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
            "source": "import torch.nn as nn\nclass Net(nn.Module):\n    def forward(self, x):\n"
                      "        return x.to('cuda:1')"}
    path = project / "nb.ipynb"
    path.write_text(json.dumps(notebook(cell)))  # one line, no final newline
    run_cli("nb.ipynb", "--no-cache", "--fix", "--unsafe-fixes", cwd=project)
    text = path.read_text()
    source = json.loads(text)["cells"][0]["source"]
    assert "\n" not in text and isinstance(source, str) and "cuda:1" not in source
    assert source.startswith("import torch.nn as nn\nclass Net(nn.Module):\n")


def test_json_edits_and_diff_count_in_cells(project):
    shutil.copy(NOTEBOOK, project / "nb.ipynb")
    findings = found(project, "nb.ipynb", "--no-cache", "--unsafe-fixes")
    dp301 = next(f for f in findings if f["code"] == "DP301")
    (edit,) = dp301["fix"]["edits"]
    assert dp301["cell"] == 3 and edit["location"] == {"row": 12, "column": 30}  # the cell's rows
    before = (project / "nb.ipynb").read_text()
    proc = run_cli("nb.ipynb", "--no-cache", "--diff", "--unsafe-fixes", cwd=project)
    assert (project / "nb.ipynb").read_text() == before
    assert '-    "        return self.fc(x).to(\\"cuda:0\\")  # expect: DP301\\n"' in proc.stdout


def test_cache_and_parallel_workers_carry_the_cell(project):
    for i in range(20):
        shutil.copy(NOTEBOOK, project / f"nb{i}.ipynb")
    serial = located(found(project, ".", "--no-cache", "--jobs", "1"))
    assert len(serial) == 60 and {cell for _, cell, *_ in serial} == {3}
    assert located(found(project, ".", "--no-cache", "--jobs", "2")) == serial
    cold = found(project, ".", "--jobs", "2")
    warm = found(project, ".", "--jobs", "1")
    assert located(cold) == located(warm) == serial


def test_notebook_on_stdin(project):
    proc = run_cli("-", "--stdin-filename", "nb.ipynb", "--output-format", "json", stdin=NOTEBOOK.read_text(),
                   cwd=project)
    assert [(f["cell"], f["location"]["row"], f["code"]) for f in json.loads(proc.stdout)] == [
        (3, 9, "DP101"), (3, 11, "DP101"), (3, 12, "DP301")]


def test_notebook_support_is_imported_only_when_a_notebook_is_met(tmp_path):
    # One-file runs (pre-commit) pay for every module they import: a Python file alone must
    # not load the notebook reader; a notebook, from disk or stdin, must still be analysed by it.
    import subprocess
    import sys

    write(tmp_path / "nb.ipynb", notebook(code_cell("import torch\n")))
    (tmp_path / "plain.py").write_text("import torch\n")
    probe = (
        "import sys\n"
        "from pathlib import Path\n"
        "from dpcheck import engine\n"
        "from dpcheck.analysis.file import analyze_path\n"
        "analyze_path(Path(sys.argv[1]) / 'plain.py', 'plain.py', [])\n"
        "print('dpcheck.analysis.notebook' in sys.modules)\n"
        "result = analyze_path(Path(sys.argv[1]) / 'nb.ipynb', 'nb.ipynb', [])\n"
        "print('dpcheck.analysis.notebook' in sys.modules, result.filename)\n"
        "print(engine.check_stdin('import torch\\n', 'x.ipynb', ()).findings[0].code)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe, str(tmp_path)], capture_output=True, text=True, check=True)
    lines = out.stdout.splitlines()
    assert lines[0] == "False"
    assert lines[1] == "True nb.ipynb"
    assert lines[2] == "DP001"  # stdin named .ipynb is read as a notebook (plain Python is not JSON)


FORWARD = "class Net(nn.Module):\n    def forward(self, x):\n        self.a = x\n        return x\n"


def test_a_one_line_cell_naming_a_line_magic_runs_it_without_percent(project):
    # IPython's automagic: `ls /path/` alone in a cell is `%ls /path/`, not a syntax error.
    nb = notebook(code_cell("import torch.nn as nn\n"), code_cell("ls /data/run_1/128sq/"), code_cell("\ncd ..\n"),
                  code_cell("pip install -q timm"), code_cell(FORWARD))
    write(project / "nb.ipynb", nb)
    assert located(found(project, "nb.ipynb", "--no-cache")) == [("nb.ipynb", 5, 3, 9, "DP101")]


def test_automagic_look_alikes_stay_python_or_syntax_errors():
    from dpcheck.analysis.notebook import python_lines

    assert python_lines("ls") == ["ls"]  # a name as Python: left alone
    assert python_lines("ls = [1]") == ["ls = [1]"]
    assert python_lines("ls /data") == ["ls /data"]  # division, valid Python
    assert python_lines("ls /data/\nprint(1)") == ["ls /data/", "print(1)"]  # IPython: one-line cells only
    assert python_lines("ls /data/\n\n") == ["ls /data/", ""]  # a second line, even blank
    assert python_lines("sudo ls /data/") == ["sudo ls /data/"]  # no magic of that name
    assert python_lines("ls = ") == ["ls = "]  # an assignment is never a magic
    assert python_lines("ls /data/") == ["pass"]


def test_automagic_look_alike_is_still_a_syntax_error(project):
    # (a notebook reports its first syntax error only: one notebook per look-alike)
    write(project / "a.ipynb", notebook(code_cell("x = 1\n"), code_cell("ls /data/\nx = 1\n")))
    write(project / "b.ipynb", notebook(code_cell("sudo ls /data/\n")))
    assert located(found(project, ".", "--no-cache")) == [("a.ipynb", 2, 1, 10, "DP001"), ("b.ipynb", 1, 1, 3, "DP001")]


def test_a_shell_escape_continued_with_backslashes_is_blanked_to_its_end(project):
    nb = notebook(code_cell("import torch.nn as nn\n"),
                  code_cell("!python train.py --epochs 3 \\\n--data /tmp/x \\\n    --out y\n" + FORWARD),
                  code_cell("out = !CUDA_VISIBLE_DEVICES=0 python3 demo.py \\\n--image_folder demo_image/\nout\n"),
                  code_cell("if True:\n    %run train.py \\\n--fast\n    y = 1\n"))
    write(project / "nb.ipynb", nb)
    assert located(found(project, "nb.ipynb", "--no-cache")) == [("nb.ipynb", 2, 6, 9, "DP101")]


def test_a_backslash_ends_the_escape_only_at_the_line_end():
    from dpcheck.analysis.notebook import python_lines

    assert python_lines("!echo a\\ b\nx = (\n") == ["pass", "x = ("]  # not continued: x = ( stays, a DP001


def test_a_cell_whose_lines_share_an_indent_is_dedented_and_columns_stay_the_cells(project):
    indented = "".join("  " + line + "\n" for line in ("import torch.nn as nn", *FORWARD.splitlines()))
    write(project / "nb.ipynb", notebook(code_cell("x = 1\n"), code_cell(indented), code_cell(" x = 1\n\n y = 2")))
    findings = found(project, "nb.ipynb", "--no-cache")
    assert located(findings) == [("nb.ipynb", 2, 4, 11, "DP101")]  # column 9 + the 2-space indent
    full = run_cli("nb.ipynb", "--no-cache", "--output-format", "full", cwd=project).stdout
    assert "4 |           self.a = x\n  |           ^^^^^^ DP101" in full


def test_an_indent_not_shared_by_every_line_is_still_a_syntax_error(project):
    write(project / "a.ipynb", notebook(code_cell(" x = 1\ny = 2\n")))
    write(project / "b.ipynb", notebook(code_cell("\t x = 1\n\ty = 2\n")))
    assert sorted((f["filename"].rsplit("/", 1)[-1], f["code"]) for f in found(project, ".", "--no-cache")) == [
        ("a.ipynb", "DP001"), ("b.ipynb", "DP001")]


def test_fix_in_an_indented_cell_keeps_the_indent_and_every_other_byte(project):
    body = ("import torch.nn as nn", "class Net(nn.Module):", "    def forward(self, x):",
            "        return self.fc(x).to('cuda:0')")
    cell = code_cell("".join(" " + line + "\n" for line in body))
    path = write(project / "nb.ipynb", notebook(code_cell("import torch\n"), cell))
    before = path.read_text()
    findings = found(project, "nb.ipynb", "--no-cache", "--unsafe-fixes")
    (dp301,) = [f for f in findings if f["code"] == "DP301"]
    assert (dp301["cell"], dp301["location"]) == (2, {"row": 4, "column": 31})
    assert dp301["fix"]["edits"][0]["location"] == {"row": 4, "column": 31}
    run_cli("nb.ipynb", "--no-cache", "--fix", "--unsafe-fixes", cwd=project)
    after = path.read_text()
    changed = [(a, b) for a, b in zip(before.splitlines(), after.splitlines()) if a != b]
    assert len(before.splitlines()) == len(after.splitlines())
    assert changed == [('    "         return self.fc(x).to(\'cuda:0\')\\n"', '    "         return self.fc(x).to(x.device)\\n"')]


def test_fix_writing_a_new_line_in_an_indented_cell_is_withdrawn():
    from dpcheck.findings import Edit, Finding, Fix
    from dpcheck.fixes.notebook import _without_magic_edits

    texts = {1: " a = 1\n b = 2\n", 2: "a = 1\nb = 2\n"}
    for cell, keeps in ((1, False), (2, True)):
        fix = Fix("add a line", (Edit("c = 3\n", 2, 0 if cell == 2 else 1, 2, 0 if cell == 2 else 1),), "safe")
        finding = Finding("DP999", "m", "error", "nb.ipynb", 1, 1, 1, 1, "", fix, cell=cell)
        assert (_without_magic_edits(texts, finding).fix is not None) is keeps


def test_a_syntax_error_in_an_indented_cell_points_at_the_cells_own_column(project):
    write(project / "a.ipynb", notebook(code_cell("  x = [1,\n  2 3]\n")))
    write(project / "b.ipynb", notebook(code_cell("x = [1,\n2 3]\n")))
    assert located(found(project, ".", "--no-cache")) == [("a.ipynb", 1, 2, 3, "DP001"), ("b.ipynb", 1, 2, 1, "DP001")]


def test_a_cell_magic_after_blank_lines_is_still_the_cells_magic():
    from dpcheck.analysis.notebook import python_lines

    # IPython drops a cell's leading blank lines before it looks for `%%`.
    assert python_lines("\n%%bash\necho (\n") == ["", "", ""]
    assert python_lines("\n%%time\nx = 1\n") == ["", "", "x = 1"]
