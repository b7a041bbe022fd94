"""Rows, columns, comments and carets as Python's parser and tokenizer see them."""

import json

from conftest import HAZARD, run_cli

from dpcheck.analysis.file import analyze_source
from dpcheck.analysis.source import SourceFile, split_lines
from dpcheck.engine import _instantiate
from dpcheck.findings import Edit
from dpcheck.fixes.text import apply
from dpcheck.registry import all_rules
from dpcheck.report.text import display_line

RULES = _instantiate([r.code for r in all_rules() if r.kind == "static" and r.default_enabled])
STEPS = "self.steps += 1"


def findings(text, code=None):
    result = analyze_source(text, "m.py", RULES, "m")
    return [f for f in result.findings if code is None or f.code == code]


def reported(text, code):
    return [f for f in findings(text, code) if not f.suppressed]


def test_hazard_baseline_row():
    (f,) = reported(HAZARD, "DP101")
    assert (f.row, f.col, f.line_text.strip()) == (12, 9, STEPS)


def test_noqa_inside_a_string_literal_does_not_suppress():
    text = HAZARD.replace(STEPS, STEPS + '; note = "# noqa"')
    (f,) = reported(text, "DP101")
    assert f.row == 12
    # ...while a real comment after the same string still does.
    assert reported(HAZARD.replace(STEPS, STEPS + '; note = "# noqa"  # noqa: DP101'), "DP101") == []


def test_noqa_in_a_multiline_string_is_text():
    text = HAZARD.replace(STEPS, STEPS + '; note = """\n# noqa\n"""')
    assert [f.row for f in reported(text, "DP101")] == [12]


def test_file_noqa_must_be_a_comment():
    assert reported('"""\n# dpcheck: noqa\n"""\n' + HAZARD, "DP101")
    assert reported("# dpcheck: noqa: DP101\n" + HAZARD, "DP101") == []


def _shifted(separator):
    """HAZARD after a first line whose string holds ``separator``: no new row for the parser."""
    return f'NOTE = "a{separator}b"\n' + HAZARD


def test_separators_inside_strings_are_not_line_ends():
    for separator in ("\f", "\u2028", "\u2029", "\x1c", "\x1d", "\x1e", "\x85", "\v"):
        text = _shifted(separator)
        assert len(SourceFile("m.py", text).lines) == len(HAZARD.splitlines()) + 1
        (f,) = reported(text, "DP101")
        assert (f.row, f.line_text.strip()) == (13, STEPS), repr(separator)
        noqa = text.replace(STEPS, STEPS + "  # noqa: DP101")
        assert reported(noqa, "DP101") == [], repr(separator)


def test_form_feed_line():
    text = HAZARD.replace("class Net", "\f\nclass Net")
    (f,) = reported(text, "DP101")
    assert (f.row, f.line_text.strip()) == (13, STEPS)
    text = HAZARD.replace("        self.steps", "\f        self.steps")  # a form feed in the indent
    (f,) = reported(text, "DP101")
    assert (f.row, f.line_text.lstrip("\f ")) == (12, STEPS)
    assert "\f" not in display_line(f.line_text)[0]


def test_carriage_return_line_endings():
    for newline in ("\r", "\r\n"):
        text = HAZARD.replace("\n", newline)
        assert split_lines(text) == HAZARD.splitlines()
        (f,) = reported(text, "DP101")
        assert (f.row, f.col, f.line_text) == (12, 9, "        " + STEPS)
        assert reported(text.replace(STEPS, STEPS + "  # noqa"), "DP101") == []


def test_split_lines_matches_the_parser():
    text = "a\rb\r\nc\nd\fe\u2028f\x85g"
    assert split_lines(text) == ["a", "b", "c", "d\fe\u2028f\x85g"]
    assert split_lines(text, keepends=True) == ["a\r", "b\r\n", "c\n", "d\fe\u2028f\x85g"]
    assert split_lines("x\n") == ["x"] and split_lines("") == []


def test_non_ascii_columns_count_characters():
    text = HAZARD.replace("        " + STEPS, '        s = "ééé→"; ' + STEPS)
    (f,) = reported(text, "DP101")
    assert f.col == 9 + len('s = "ééé→"; ')
    assert f.end_col == f.col + len("self.steps")


def test_nul_byte_is_reported_where_it_is():
    (f,) = findings("x = 1\ny = 2\nz = 'a\0b'\n")
    assert (f.code, f.row, f.col) == ("DP001", 3, 7)


def test_nul_byte_through_the_cli(project):
    (project / "nul.py").write_bytes(b"import torch\n\nx = 1  \x00\n")
    (f,) = json.loads(run_cli("nul.py", "--no-cache", "--output-format", "json", cwd=project).stdout)
    assert (f["code"], f["location"]) == ("DP001", {"row": 3, "column": 8})


def test_display_line_expands_tabs_and_wide_characters():
    shown, starts = display_line("\tx\ty")
    assert shown == "    x   y" and starts == [0, 4, 5, 8, 9]
    shown, starts = display_line("界a")
    assert starts == [0, 2, 3]


def _caret_under(output, text):
    """The displayed source line and the caret line of the first snippet in ``output``."""
    lines = output.splitlines()
    i = next(i for i, line in enumerate(lines) if "^" in line)
    return lines[i - 1].split("| ", 1)[1], lines[i].split("| ", 1)[1]


def test_caret_sits_under_the_finding_with_tabs(project):
    text = HAZARD.replace("    ", "\t")
    (project / "tabs.py").write_text(text)
    out = run_cli("tabs.py", "--no-cache", "--select", "DP101", "--output-format", "full", cwd=project).stdout
    line, caret = _caret_under(out, text)
    assert line == "        " + STEPS  # two tabs, four columns each
    assert caret.index("^") == line.index("self") and caret.count("^") == len("self.steps")


def test_caret_with_a_wide_character_before_the_finding(project):
    text = HAZARD.replace("        " + STEPS, '        s = "界"; ' + STEPS)
    (project / "wide.py").write_text(text)
    out = run_cli("wide.py", "--no-cache", "--select", "DP101", "--output-format", "full", cwd=project).stdout
    line, caret = _caret_under(out, text)
    assert caret.index("^") == line.index("self") + 1  # 界 takes two columns on screen


def test_fix_edits_count_rows_like_the_parser():
    text = 'a = "\u2028\f"\nb = 1\n'
    assert apply(text, [[Edit("c", 2, 0, 2, 1)]])[0] == 'a = "\u2028\f"\nc = 1\n'
