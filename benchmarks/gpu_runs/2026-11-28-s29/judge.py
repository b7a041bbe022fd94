"""Session 29: compare the cuda and emulated --confirm passes of one call with tests/test_gpu.py's own
verdicts() (static verdicts per finding, dynamic codes per file). Usage: judge.py CUDA.json[.gz] EMULATED.json[.gz]"""
import gzip
import json
import pathlib
import sys
from collections import Counter

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2] / "tests"))
import test_gpu  # noqa: E402


def load(path):
    data = json.load(gzip.open(path) if path.endswith(".gz") else open(path))
    for finding in data:
        name = finding["filename"]
        if "fixtures/" in name:
            finding["filename"] = f"{test_gpu.ROOT}/{name[name.index('fixtures/'):]}"
    return data


def main(cuda_path, emulated_path):
    cuda, emulated = load(cuda_path), load(emulated_path)
    assert all(f["confirmation"]["backend"].startswith("cuda") for f in cuda if f.get("confirmation"))
    cs, cd = test_gpu.verdicts(cuda)
    es, ed = test_gpu.verdicts(emulated)
    print("static verdicts equal:", cs == es, len(cs), "findings", Counter(cs.values()))
    print("  differing:", {k: (es.get(k), cs.get(k)) for k in es.keys() | cs.keys() if es.get(k) != cs.get(k)})
    print("dynamic codes equal:", cd == ed, {k: (ed.get(k), cd.get(k)) for k in ed.keys() | cd.keys() if ed.get(k) != cd.get(k)})
    print("DP003 (cuda, emulated):", sum(f["code"] == "DP003" for f in cuda), sum(f["code"] == "DP003" for f in emulated))


if __name__ == "__main__":
    main(*sys.argv[1:3])
