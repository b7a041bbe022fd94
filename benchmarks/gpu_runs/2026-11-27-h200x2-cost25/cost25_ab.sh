#!/usr/bin/env bash
# cost25's A/B of the --confirm harness cost: main before cost25 (a git archive in .gpu_scratch/main25)
# against the cost25 branch (one in .gpu_scratch/cost25), each first on PYTHONPATH for its side and run
# from its own copy, alternating in one call. Both sides run cost25's benchmarks/harness_overhead.py
# (main25's copy has it too): plain steps and harness runs interleaved, the ratio at 1 and 3 batch
# sizes, and the spread of each round's ratio at 3 (min, median, max). Wall clock, fastest of N.
# cuda at 2 devices on BERT, GPT-2, TransformerModel and the six fixture models; the same emulated.
# Everything under $OUT (5 files); no run starts after 380 s, the last ends by 400 s (about 6.5 min).
# Run from /work/main's root with carry [".gpu_scratch", ".whl"]: bash .gpu_scratch/cost25_ab.sh
set -o pipefail
ROOT=$(pwd); BASE=$ROOT/.gpu_scratch/main25; MINE=$ROOT/.gpu_scratch/cost25; OUT=${OUT:-/tmp/out}; START=$(date +%s)
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONUNBUFFERED=1
{ nvidia-smi -L; nproc; uptime; python3 -c "import torch, sys; print(torch.__version__, sys.version.split()[0])";
  echo "checkout: $(git -C "$ROOT" log -1 --format='%h %s' 2>/dev/null | cut -c1-80)";
  echo "main (base): $(cat "$BASE/COMMIT")"; echo "cost25: $(cat "$MINE/COMMIT")"; } > "$OUT/host.txt" 2>&1
REAL="tests/real_models/transformers_bert.py tests/real_models/transformers_gpt2.py tests/real_models/word_language_model_examples.py:dpcheck_example_TransformerModel"
quiet() { grep -v -e "UserWarning" -e "return Gather" -e "return super().apply" -e "self.encoder = " -e "^\[transformers\]"; }
# ov SIDE FILE LIMIT ARGS...: one harness_overhead.py run of SIDE (main or cost25), appended to $OUT/FILE.
ov() {
  local side=$1 file=$2 limit=$3; shift 3
  local root=$BASE; [ "$side" = cost25 ] && root=$MINE
  local left=$((400 - ($(date +%s) - START)))
  [ "$left" -lt 20 ] && { echo "== $side: skipped (time)" >> "$OUT/$file"; return; }
  [ "$limit" -gt "$left" ] && limit=$left
  echo "== $side ($(date +%T), load $(cut -d' ' -f1 /proc/loadavg))" >> "$OUT/$file"
  (cd "$root" && PYTHONPATH="$root:/tmp/site" timeout "$limit" python3 benchmarks/harness_overhead.py --stat min "$@") 2>&1 \
    | quiet >> "$OUT/$file"
}
# Round 1 covers every set once (main first); rounds 2 and 3 repeat the sets nearest 2x, the order swapped each time.
for side in main cost25; do ov $side cuda_real.txt 50 --backend cuda --devices 2 --runs 9 $REAL; done
for side in main cost25; do ov $side cuda_fixtures.txt 30 --backend cuda --devices 2 --runs 9; done
for side in main cost25; do ov $side emulated_fixtures.txt 30 --devices 2 --runs 9; done
for side in main cost25; do ov $side emulated_real.txt 50 --devices 2 --runs 5 $REAL; done
for side in cost25 main; do ov $side cuda_real.txt 50 --backend cuda --devices 2 --runs 9 $REAL; done
for side in cost25 main; do ov $side emulated_fixtures.txt 30 --devices 2 --runs 9; done
for side in main cost25; do ov $side cuda_real.txt 50 --backend cuda --devices 2 --runs 9 $REAL; done
for side in cost25 main; do ov $side cuda_fixtures.txt 30 --backend cuda --devices 2 --runs 9; done
echo "done in $(( $(date +%s) - START )) s" >> "$OUT/host.txt"
tail -n 6 "$OUT"/*.txt
