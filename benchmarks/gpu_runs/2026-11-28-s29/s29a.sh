#!/usr/bin/env bash
# Session 29, first call (2 H100s): the fixture files whose --confirm verdicts cf69c58 changed (package
# __init__.py files, bases without forward, the DP204 mixin), cuda and emulated at 2 devices; the memory
# test; the real-model suite at 2 devices (the harness chooses which classes to run: cf69c58 changed that).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit 1
export PYTHONUNBUFFERED=1
R=/tmp/r; mkdir -p $R
nvidia-smi -L > $R/gpus.txt; cat .gpu_scratch/commit >> $R/gpus.txt; python3 -c "import torch, sys; print(torch.__version__, sys.version)" >> $R/gpus.txt
timeout 200 python3 -m pytest -q -m gpu tests/test_gpu.py -k memory > $R/test_gpu_memory.txt 2>&1  # alone: it measures memory per GPU
for b in cuda emulated; do
  ( s=$(date +%s); timeout 300 python3 -m dpcheck $(cat .gpu_scratch/s29_files.txt) --confirm --backend $b --devices 2 --output-format json --no-cache --select ALL --ignore DP708 > $R/changed_$b.json 2> $R/changed_$b.err; echo "changed_$b rc=$? $(( $(date +%s) - s ))s" >> $R/log.txt ) &
done
(OMP_NUM_THREADS=4 timeout 380 bash benchmarks/gpu_real_models.sh $R/rm2 2 4 > $R/real_models_2.txt 2>&1) &
wait
cat $R/log.txt; tail -n 2 $R/test_gpu_memory.txt; tail -n 3 $R/real_models_2.txt
tar czf $OUT/s29a.tgz -C /tmp r
