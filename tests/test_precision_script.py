"""benchmarks/precision.py's recall bookkeeping: which listed misses are found, and --list-missed."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
import precision  # noqa: E402  (benchmarks/precision.py)

HEADER = "corpus\tfile\tline\tcode\tnote\n"


def test_a_miss_is_found_by_its_code_on_its_line_or_any_code_for_new():
    reported = {"projects": {("a/m.py", 10, "DP401"), ("a/m.py", 20, "DP101")}}
    miss = {"corpus": "projects", "file": "a/m.py", "line": "10", "code": "DP401"}
    assert precision.miss_is_found(miss, reported)
    assert not precision.miss_is_found({**miss, "code": "DP603"}, reported)
    assert not precision.miss_is_found({**miss, "line": "11"}, reported)
    assert precision.miss_is_found({**miss, "line": "20", "code": "NEW"}, reported)
    assert not precision.miss_is_found({**miss, "line": "30", "code": "NEW"}, reported)


def test_list_missed_prints_each_listed_miss_not_reported(tmp_path, monkeypatch, capsys):
    long_note = "squeeze() in a config-chosen model " + "x" * 200
    (tmp_path / "misses.tsv").write_text(
        HEADER + "projects\ta/m.py\t10\tDP401\tfound one\n"
        f"projects\ta/m.py\t12\tDP603\t{long_note}\n")
    (tmp_path / "verdicts.tsv").write_text("corpus\tfile\tline\tcode\tverdict\n")
    monkeypatch.setattr(precision, "MISSES", tmp_path / "misses.tsv")
    monkeypatch.setattr(precision, "VERDICTS", tmp_path / "verdicts.tsv")
    monkeypatch.setattr(precision, "roots", lambda: {"projects": tmp_path})
    finding = {"file": "a/m.py", "line": 10, "code": "DP401", "severity": "error", "message": "m"}
    monkeypatch.setattr(precision, "run_corpus", lambda name, root: [dict(finding)])

    precision.main(["--corpus", "projects", "--list-missed"])
    out = capsys.readouterr().out
    listed = out.split("Listed misses still not reported:")[1].strip().splitlines()
    assert len(listed) == 1
    assert listed[0].split("\t")[:4] == ["projects", "a/m.py", "12", "DP603"]
    assert "squeeze() in a config-chosen model" in listed[0] and long_note not in listed[0]

    precision.main(["--corpus", "projects"])
    assert "Listed misses still not reported" not in capsys.readouterr().out


def test_a_sampled_corpus_is_reported_apart_and_its_unjudged_findings_only_counted(tmp_path, monkeypatch, capsys):
    """`whole` (whole repositories) has verdicts for a random sample of its findings: its precision
    is its own table, the census corpora's tables leave it out, and its unjudged findings are a
    count, not the list of findings to judge that --list-unjudged prints for the census corpora."""
    (tmp_path / "verdicts.tsv").write_text(
        "corpus\tfile\tline\tcode\tverdict\tnote\n"
        "projects\ta/m.py\t10\tDP401\treal\tn\n"
        "whole\tr/x.py\t5\tDP401\tfalse\tnothing wraps it\n"
        "whole\tr/x.py\t6\tDP201\treal\tn\n")
    (tmp_path / "misses.tsv").write_text(HEADER)
    monkeypatch.setattr(precision, "MISSES", tmp_path / "misses.tsv")
    monkeypatch.setattr(precision, "VERDICTS", tmp_path / "verdicts.tsv")
    monkeypatch.setattr(precision, "roots", lambda: {"projects": tmp_path, "whole": tmp_path})
    found = {"projects": [("a/m.py", 10, "DP401"), ("a/m.py", 11, "DP204")],
             "whole": [("r/x.py", 5, "DP401"), ("r/x.py", 6, "DP201"), ("r/y.py", 7, "DP401")]}
    monkeypatch.setattr(precision, "run_corpus", lambda name, root: [
        {"file": f, "line": l, "code": c, "severity": "error", "message": "m"} for f, l, c in found[name]])

    precision.main(["--list-unjudged"])
    out = capsys.readouterr().out
    census, sample = out.split("## Warnings")[0], out.split("## whole: a random sample of the errors judged")[1]

    def rows(text):
        return {line.split()[0]: line.split() for line in text.splitlines() if line.startswith(("DP", "all"))}
    assert rows(census)["DP401"][-1] == "100%" and "DP201" not in rows(census)  # (projects only)
    assert rows(sample)["DP401"][-1] == "0%" and rows(sample)["all"][1:3] == ["2", "1"]
    assert "Unjudged error findings: 1;" in out and "projects\ta/m.py\t11\tDP204" in out
    assert "Outside the judged sample of whole: 1 errors, 0 warnings" in out and "r/y.py" not in out
