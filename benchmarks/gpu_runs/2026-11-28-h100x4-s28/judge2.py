import json, sys, gzip
import pathlib
HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2] / 'tests'))
import test_gpu
sys.path.insert(0, str(HERE))
from judge import load
G=str(HERE.parent) + '/'
for dev, olds in ((4, [G+'2026-11-27-h100x4-s26/fixtures_emulated_4.json.gz', G+'2026-11-28-h100-s27/emulated_4.json.gz']),
                  (2, [G+'2026-11-27-h200x2-s26/fixtures_emulated_2.json.gz', G+'2026-11-28-h100-s27/emulated_2.json.gz'])):
    new = load(f'{HERE}/emulated_{dev}.json.gz')
    ns, nd = test_gpu.verdicts(new)
    os_, od = {}, {}
    for p in olds:
        s, d = test_gpu.verdicts(load(p)); os_.update(s); od.update(d)
    common = ns.keys() & os_.keys()
    print(dev, 'new', len(ns), 'old', len(os_), 'common', len(common))
    print('  status changed', {k: (os_[k], ns[k]) for k in common if os_[k] != ns[k]})
    print('  dynamic changed', {k: (od.get(k), nd.get(k)) for k in od.keys() | nd.keys() if od.get(k) != nd.get(k)})
    print('  only new', sorted(ns.keys() - os_.keys())[:20])
