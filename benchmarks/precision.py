"""Precision (and recall) of dpcheck on real code: the project corpus and the library zoos.

    python benchmarks/zoos.py                      # once: fetch the pinned zoos (see zoos.py)
    python benchmarks/precision.py                 # every corpus that is available
    python benchmarks/precision.py --corpus projects --markdown
    python benchmarks/precision.py --list-unjudged
    python benchmarks/precision.py --list-missed         # each listed miss still not reported
    python benchmarks/precision.py --save-json before/   # each corpus's findings, to diff runs

The project corpora (benchmarks/corpus/projects and heldout, listed in benchmarks/corpus/manifest.tsv)
are unmodified files from public repositories that use nn.DataParallel, not committed:
benchmarks/corpus/restore.py downloads them. The zoos are the wheels
zoos.py unpacks under benchmarks/corpora/. dpcheck runs on each with its default rule selection
and no configuration (--isolated, so this repository's own excludes do not apply), and every
finding is joined with benchmarks/corpus/verdicts.tsv on (corpus, file, line, code).

- Error precision: real / judged, over error-severity findings (borderline counts as not real).
- Verdicts are judged against the README's severity policy. Besides real / borderline / false,
  `latent` is a real hazard only behind a non-default option or mode, and `cost` a real
  cost-only effect (a table rebuilt on every call): both are what a warning means, so they
  count as real for a warning and as not real for an error (an error there is wrongly severe).
- Warning precision: the same over the judged sample of warnings.
- Recall: benchmarks/corpus/misses.tsv lists real hazards dpcheck did not report when the
  verdicts were written; a miss counts as found once a finding with its code (or any code,
  for `NEW` entries) is reported on its line.
- `whole` (benchmarks/corpus/whole.tsv, restored by `corpus/restore.py --whole`): whole
  repositories, every Python file and notebook, as users run dpcheck on them. Only a random sample
  of their findings is judged: their precision is a table of its own, and their other findings are
  counted, not listed as unjudged.
Engine codes (DP001 parse errors, DP002 rule crashes) are counted apart, not judged.
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
CORPUS_DIR = HERE / "corpus"
PROJECTS = CORPUS_DIR / "projects"
# Public code is not committed: manifest.tsv names each file's repository, path and commit, and
# corpus/restore.py downloads them here.
HELDOUT = CORPUS_DIR / "heldout"
# Whole repositories (corpus/whole.tsv, restored by restore.py --whole): what users run dpcheck on.
# Their verdicts are a random sample of the findings, so their precision is reported apart and
# their unjudged findings are counted, not listed.
WHOLE = CORPUS_DIR / "whole"
PER_PROJECT = ("projects", "heldout", "whole")
SAMPLED = ("whole",)
VERDICTS = CORPUS_DIR / "verdicts.tsv"
MISSES = CORPUS_DIR / "misses.tsv"

sys.path.insert(0, str(HERE))
from zoos import ZOOS, available  # noqa: E402


def roots() -> dict[str, Path | None]:
    out: dict[str, Path | None] = {name: path if path.is_dir() else None
                                   for name, path in (("projects", PROJECTS), ("heldout", HELDOUT), ("whole", WHOLE))}
    for zoo in ZOOS:
        out[zoo] = available(zoo)
    return out


def run_corpus(name: str, root: Path) -> list[dict]:
    """The corpus's findings. Each project is checked on its own, as its users would run it: one
    run over all of them would let a script of one project resolve `model.Model` to another
    project's module of the same name (cross-file facts are keyed by module name)."""
    if name not in PER_PROJECT:
        return run_dpcheck(root)
    findings = []
    for project in sorted(p for p in root.iterdir() if p.is_dir()):
        for f in run_dpcheck(project):
            f["file"] = f"{project.name}/{f['file']}"
            findings.append(f)
    return findings


def run_dpcheck(root: Path) -> list[dict]:
    cmd = [sys.executable, "-m", "dpcheck", "check", "--isolated", "--output-format", "json",
           "--exit-zero", "--no-cache", str(root)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode not in (0,):
        sys.stderr.write(proc.stderr)
        raise SystemExit(f"dpcheck exited {proc.returncode} on {root}")
    findings = json.loads(proc.stdout or "[]")
    for f in findings:
        f["file"] = Path(f["filename"]).resolve().relative_to(root.resolve()).as_posix()
        f["line"] = f["location"]["row"]
    return findings


def read_tsv(path: Path) -> list[dict]:
    if not path.exists():
        return []
    with path.open(newline="") as fh:
        return [row for row in csv.DictReader(fh, delimiter="\t") if row.get("corpus")]


def pct(num: int, den: int) -> str:
    return f"{100 * num / den:.0f}%" if den else "-"


def table(rows: list[list[str]], header: list[str], markdown: bool) -> str:
    if markdown:
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(r) + " |" for r in rows]
        return "\n".join(lines)
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return "\n".join([fmt.format(*header), fmt.format(*("-" * w for w in widths))] + [fmt.format(*r) for r in rows])


VERDICT_KINDS = ("real", "latent", "cost", "borderline", "false")
# What each severity claims (README, "What a severity means"): a warning is real but latent
# or cost-only, so those verdicts make it right; an error claims a hazard on the default path.
REAL_FOR = {"error": {"real"}, "warning": {"real", "latent", "cost"}}


def is_real(severity: str, verdict: str) -> bool:
    return verdict in REAL_FOR.get(severity, {"real"})


def _precision_row(code: str, severity: str, c: Counter) -> list[str]:
    judged = sum(c[k] for k in VERDICT_KINDS)
    real = sum(c[k] for k in VERDICT_KINDS if is_real(severity, k))
    return [code, str(judged), *(str(c[k]) for k in VERDICT_KINDS), pct(real, judged)]


def _code_rows(counts: dict[tuple[str, str], Counter], severity: str) -> list[list[str]]:
    """One precision row per code of that severity, then their total."""
    rows = []
    total: Counter = Counter()
    for (sev, code), c in sorted(counts.items()):
        if sev == severity:
            total.update(c)
            rows.append(_precision_row(code, severity, c))
    return rows + [_precision_row("all", severity, total)]


def miss_is_found(miss: dict, reported: dict[str, set[tuple[str, int, str]]]) -> bool:
    """Is a listed miss reported now: a finding with its code (any code for `NEW`) on its line."""
    hits = {c for (f, l, c) in reported[miss["corpus"]] if f == miss["file"] and l == int(miss["line"])}
    return bool(hits) if miss["code"] == "NEW" else miss["code"] in hits


# How much of a miss's note --list-missed prints: enough to tell the mechanism apart.
NOTE_START = 100


def missed_line(miss: dict) -> str:
    note = miss.get("note") or ""
    if len(note) > NOTE_START:
        note = note[:NOTE_START] + "..."
    return f"{miss['corpus']}\t{miss['file']}\t{miss['line']}\t{miss['code']}\t{note}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", action="append", help="restrict to this corpus (projects, timm, ...); repeatable")
    ap.add_argument("--markdown", action="store_true", help="print tables as markdown")
    ap.add_argument("--list-unjudged", action="store_true", help="list error and warning findings with no verdict, and every verdict no finding matches")
    ap.add_argument("--list-missed", action="store_true", help="list each listed miss (misses.tsv) that is still not reported")
    ap.add_argument("--save-json", type=Path, metavar="DIR", help="write each corpus's findings to DIR/<corpus>.json")
    args = ap.parse_args(argv)

    verdicts = {(v["corpus"], v["file"], int(v["line"]), v["code"]): v for v in read_tsv(VERDICTS)}
    misses = read_tsv(MISSES)
    wanted = args.corpus or list(roots())

    # per (severity, code): a Counter of verdicts (of the sampled corpora apart)
    counts: dict[tuple[str, str], Counter] = defaultdict(Counter)
    sample_counts: dict[tuple[str, str], Counter] = defaultdict(Counter)
    sampled_unjudged: Counter = Counter()
    unjudged: list[str] = []
    unjudged_warnings: list[str] = []
    engine: Counter = Counter()
    per_corpus_rows = []
    real_errors: Counter = Counter()
    reported: dict[str, set[tuple[str, int, str]]] = {}
    for name in wanted:
        root = roots().get(name)
        if root is None:
            hint = ("run benchmarks/corpus/restore.py --whole" if name in SAMPLED else "run benchmarks/corpus/restore.py"
                    if name in PER_PROJECT else f"run benchmarks/zoos.py {name}")
            print(f"# {name}: not available ({hint})", file=sys.stderr)
            continue
        findings = run_corpus(name, root)
        if args.save_json:
            args.save_json.mkdir(parents=True, exist_ok=True)
            rows = sorted((f["file"], f["line"], f["code"], f["severity"], f["message"]) for f in findings)
            (args.save_json / f"{name}.json").write_text(json.dumps(rows, indent=0) + "\n")
        reported[name] = {(f["file"], f["line"], f["code"]) for f in findings}
        files = sum(1 for _ in root.rglob("*.py"))
        c = Counter()
        for f in findings:
            sev, code = f["severity"], f["code"]
            if code.startswith("DP0"):
                engine[(name, code)] += 1
                continue
            v = verdicts.get((name, f["file"], f["line"], code))
            c[sev] += 1
            if v:
                (sample_counts if name in SAMPLED else counts)[(sev, code)][v["verdict"]] += 1
                c[f"{sev}-judged"] += 1
                c[f"{sev}-real"] += is_real(sev, v["verdict"])
                if sev == "error" and v["verdict"] == "real":
                    real_errors[name] += 1
            elif sev in ("error", "warning") and name in SAMPLED:
                sampled_unjudged[sev] += 1
            elif sev in ("error", "warning"):
                row = f"{name}\t{f['file']}\t{f['line']}\t{code}\t{f['message']}"
                (unjudged if sev == "error" else unjudged_warnings).append(row)
        per_corpus_rows.append([name, str(files), str(c["error"]), str(c["error-judged"]),
                                pct(c["error-real"], c["error-judged"]), str(c["warning"]),
                                str(c["warning-judged"]), pct(c["warning-real"], c["warning-judged"]),
                                str(c["info"])])

    print("## Corpora\n")
    print(table(per_corpus_rows, ["corpus", "files", "errors", "judged", "precision", "warnings",
                                  "judged", "precision", "info"], args.markdown))
    for sev in ("error", "warning"):
        label = ("Errors (all judged): precision = real / judged" if sev == "error" else
                 "Warnings (judged sample): precision = (real + latent + cost) / judged")
        print(f"\n## {label}, borderline counted as not real\n")
        print(table(_code_rows(counts, sev), ["code", "judged", *VERDICT_KINDS, "precision"], args.markdown))
    for sev in ("error", "warning"):
        if any(s == sev for s, _ in sample_counts):
            print(f"\n## {', '.join(n for n in SAMPLED if n in reported)}: a random sample of the {sev}s judged, "
                  "borderline counted as not real\n")
            print(table(_code_rows(sample_counts, sev), ["code", "judged", *VERDICT_KINDS, "precision"], args.markdown))

    print(f"\nUnjudged error findings: {len(unjudged)}; unjudged warnings: {len(unjudged_warnings)}")
    if args.list_unjudged:
        for line in unjudged + unjudged_warnings:
            print("  " + line)
    if sampled_unjudged:
        print(f"Outside the judged sample of {', '.join(n for n in SAMPLED if n in reported)}: "
              f"{sampled_unjudged['error']} errors, {sampled_unjudged['warning']} warnings")
    # A verdict that no finding matches any more: either the finding was fixed away (a false one:
    # good) or a real one was lost (a regression), or its line moved with a zoo version.
    gone = [v for (corpus, file, line, code), v in sorted(verdicts.items())
            if corpus in reported and (file, line, code) not in reported[corpus]]
    gone_real = [v for v in gone if v["verdict"] in ("real", "latent", "cost")]
    print(f"Judged findings no longer reported: {len(gone)} ({len(gone_real)} judged real, latent or cost)")
    for v in gone if args.list_unjudged else gone_real:
        print(f"  {v['corpus']}\t{v['file']}\t{v['line']}\t{v['code']}\t{v['verdict']}")
    if engine:
        print("Engine findings (not judged): " + ", ".join(f"{n} {c}: {k}" for (n, c), k in sorted(engine.items())))

    relevant = [m for m in misses if m["corpus"] in reported]
    if relevant:
        found = Counter()
        listed = Counter()
        still_missed = []
        for m in relevant:
            listed[m["code"]] += 1
            if miss_is_found(m, reported):
                found[m["code"]] += 1
            else:
                still_missed.append(m)
        rows = [[k, str(listed[k]), str(found[k]), pct(found[k], listed[k])] for k in sorted(listed)]
        rows.append(["all", str(sum(listed.values())), str(sum(found.values())),
                     pct(sum(found.values()), sum(listed.values()))])
        print("\n## Recall on listed misses (hazards dpcheck did not report when judged)\n")
        print(table(rows, ["code", "listed", "now found", "recall"], args.markdown))
        with_misses = sorted({m["corpus"] for m in relevant})
        judged_real = sum(real_errors[n] for n in with_misses)
        missed = sum(listed.values()) - sum(found.values())
        total = judged_real + missed
        print(f"\nRecall estimate on {', '.join(with_misses)}: {judged_real} real errors reported, "
              f"{missed} listed hazards still missed: {pct(judged_real, total)}")
        if args.list_missed:
            print("\nListed misses still not reported:")
            for m in still_missed:
                print("  " + missed_line(m))
    return 0


if __name__ == "__main__":
    sys.exit(main())
