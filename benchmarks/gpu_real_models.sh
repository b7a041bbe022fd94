#!/usr/bin/env bash
# Run the real-model suite's dpcheck --confirm processes on a GPU host, a few at a time, and
# save each file's JSON as <stem>.<backend>.json for tests/test_real_models.py to judge
# (DPCHECK_REAL_MODELS_RESULTS=DIR) on any machine.
#
#   benchmarks/gpu_real_models.sh OUTDIR [DEVICES] [PARALLEL] [BACKENDS]
#
# PARALLEL processes run at once (default 4); each gets an equal share of the cores as
# OMP_NUM_THREADS, since separate dpcheck processes cannot share out the cores themselves.
set -u
out=${1:?output directory}; devices=${2:-2}; parallel=${3:-4}; backends=${4:-"cuda emulated"}
mkdir -p "$out"
threads=$(( $(nproc) / parallel )); (( threads < 1 )) && threads=1
jobs=()
for f in tests/real_models/*.py; do
  stem=$(basename "$f" .py)
  case $stem in ground_truth|word_language_model_examples) continue;; esac
  for b in $backends; do jobs+=("$f $b"); done
done
run_one() {
  set -- $1
  local stem; stem=$(basename "$1" .py)
  local start=$SECONDS
  OMP_NUM_THREADS=$threads python3 -m dpcheck "$1" --config tests/real_models/dpcheck.toml --confirm \
    --backend "$2" --devices "$devices" --output-format json --no-cache > "$out/$stem.$2.json" 2> "$out/$stem.$2.err"
  echo "$stem $2 rc=$? $((SECONDS - start))s"
}
export -f run_one; export out devices threads
printf '%s\n' "${jobs[@]}" | xargs -P "$parallel" -I{} bash -c 'run_one "{}"'
