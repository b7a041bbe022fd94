#!/usr/bin/env bash
# Session 28, on 4 GPUs at once: the full fixture comparison (cuda in 6 shards, emulated whole) at 4 and
# at 2 devices, the real-model suite at 2 devices, and test_gpu.py's memory test. Output under $OUT.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit 1
export PYTHONUNBUFFERED=1
nvidia-smi -L > $OUT/gpus.txt; cat .gpu_scratch/commit >> $OUT/gpus.txt; python3 -c "import torch, sys; print(torch.__version__, sys.version)" >> $OUT/gpus.txt
FILES=$(grep -l "def dpcheck_example" $(find fixtures -name "*.py" ! -name "*.fixed.py" | sort))
echo "$(echo $FILES | wc -w) example files" > $OUT/log.txt
pass() {  # backend devices shard-name files...
  local b=$1 d=$2 name=$3; shift 3; local s=$(date +%s)
  OMP_NUM_THREADS=2 timeout 540 python3 -m dpcheck "$@" --confirm --backend $b --devices $d --output-format json --no-cache --select ALL --ignore DP708 > $OUT/$name.json 2> $OUT/$name.err
  echo "$name rc=$? $(( $(date +%s) - s ))s" >> $OUT/log.txt
}
for d in 4 2; do
  pass emulated $d emulated_$d $FILES &
  i=0; for shard in $(seq 0 5); do
    part=$(echo $FILES | tr ' ' '\n' | awk -v k=$shard 'NR % 6 == k'); pass cuda $d cuda_${d}_$shard $part &
  done
done
timeout 540 python3 -m pytest -q -m gpu tests/test_gpu.py -k memory > $OUT/test_gpu_memory.txt 2>&1 &
(OMP_NUM_THREADS=4 timeout 540 bash benchmarks/gpu_real_models.sh /tmp/rm2 2 4 > $OUT/real_models_2.txt 2>&1; tar czf $OUT/real_models_2.tgz -C /tmp rm2) &
wait
cat $OUT/log.txt; tail -3 $OUT/test_gpu_memory.txt $OUT/real_models_2.txt; tail -c 600 $OUT/cuda_4_0.err
gzip $OUT/*.json
