#!/usr/bin/env bash
# Session 28, second call (4 H100s): emulated passes over all example fixtures at 4 and 2 devices; cuda
# passes over the files whose earlier runs showed a gradient difference plus dp8xx/dp401/dp602 (two parts
# each, in turn, so the first part survives a time-out); the real-model suite at 2 devices; the memory test.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit 1
export PYTHONUNBUFFERED=1
R=/tmp/r; mkdir -p $R
nvidia-smi -L > $R/gpus.txt; cat .gpu_scratch/commit >> $R/gpus.txt; python3 -c "import torch, sys; print(torch.__version__, sys.version)" >> $R/gpus.txt
FILES=$(grep -l "def dpcheck_example" $(find fixtures -name "*.py" ! -name "*.fixed.py" | sort))
echo "$(echo $FILES | wc -w) example files" > $R/log.txt
pass() {  # backend devices name files...
  local b=$1 d=$2 name=$3; shift 3; local s=$(date +%s)
  timeout ${LIMIT:-400} python3 -m dpcheck "$@" --confirm --backend $b --devices $d --output-format json --no-cache --select ALL --ignore DP708 > $R/$name.json 2> $R/$name.err
  echo "$name rc=$? $(( $(date +%s) - s ))s" >> $R/log.txt
}
for d in 4 2; do
  pass emulated $d emulated_$d $FILES &
  ( LIMIT=150 pass cuda $d cuda_${d}_a $(cat .gpu_scratch/targets_a.txt); LIMIT=260 pass cuda $d cuda_${d}_b $(cat .gpu_scratch/targets_b.txt) ) &
done
timeout 420 python3 -m pytest -q -m gpu tests/test_gpu.py -k memory > $R/test_gpu_memory.txt 2>&1 &
(OMP_NUM_THREADS=4 timeout 420 bash benchmarks/gpu_real_models.sh $R/rm2 2 4 > $R/real_models_2.txt 2>&1) &
wait
cat $R/log.txt; tail -n 3 $R/test_gpu_memory.txt $R/real_models_2.txt
tar czf $OUT/s28b.tgz -C /tmp r
