import json, sys, gzip, glob
import pathlib
HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2] / 'tests'))
import test_gpu
def load(p):
    d = json.load(gzip.open(p) if p.endswith('.gz') else open(p))
    for f in d:
        fn = f['filename']; f['filename'] = str(test_gpu.ROOT) + '/' + fn[fn.index('fixtures/'):] if 'fixtures/' in fn else fn
    return d
def main():
  for dev in (4, 2):
      cuda = load(f'{HERE}/cuda_{dev}_a.json.gz') + load(f'{HERE}/cuda_{dev}_b.json.gz')
      emu = load(f'{HERE}/emulated_{dev}.json.gz')
      files = {f['filename'] for f in cuda}
      targets = {str(test_gpu.ROOT) + "/" + l.strip() for p in (HERE / "targets_a.txt", HERE / "targets_b.txt") for l in open(p) if l.strip()}
      emu_t = [f for f in emu if f['filename'] in targets]
      assert all(f['confirmation']['backend'].startswith('cuda') for f in cuda)
      es, ed = test_gpu.verdicts(emu_t); cs, cd = test_gpu.verdicts(cuda)
      print(dev, 'devices: static keys equal', es.keys() == cs.keys(), len(es), len(cs))
      print('  differing', {k: (es.get(k), cs.get(k)) for k in es.keys() | cs.keys() if es.get(k) != cs.get(k)})
      print('  dynamic equal', ed == cd, {k: (ed.get(k), cd.get(k)) for k in ed.keys() | cd.keys() if ed.get(k) != cd.get(k)})
      from collections import Counter
      print('  statuses', Counter(cs.values()))

if __name__ == "__main__":
    main()
