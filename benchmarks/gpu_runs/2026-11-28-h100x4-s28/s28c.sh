#!/usr/bin/env bash
# Session 28, third call (2 GPUs): the fixture files that define DataParallel subclasses (6a0e078: the harness
# no longer builds them as models), cuda and emulated at 2 devices, and test_gpu.py's memory test.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit 1
R=/tmp/r; mkdir -p $R
nvidia-smi -L > $R/gpus.txt; cat .gpu_scratch/commit >> $R/gpus.txt; python3 -c "import torch, sys; print(torch.__version__, sys.version)" >> $R/gpus.txt
for b in cuda emulated; do
  ( s=$(date +%s); timeout 300 python3 -m dpcheck $(cat .gpu_scratch/subclass_files.txt) --confirm --backend $b --devices 2 --output-format json --no-cache --select ALL --ignore DP708 > $R/subclass_$b.json 2> $R/subclass_$b.err; echo "$b rc=$? $(( $(date +%s) - s ))s" >> $R/log.txt ) &
done
timeout 300 python3 -m pytest -q -m gpu tests/test_gpu.py -k memory > $R/test_gpu_memory.txt 2>&1 &
wait
cat $R/log.txt; tail -n 2 $R/test_gpu_memory.txt
tar czf $OUT/s28c.tgz -C /tmp r
