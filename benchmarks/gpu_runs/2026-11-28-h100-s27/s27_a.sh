#!/usr/bin/env bash
# Session 27: the real-model suite's runs at 2 devices and test_gpu.py's device-0 memory test, at once. Output under $OUT.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit 1
export PYTHONUNBUFFERED=1
nvidia-smi -L > $OUT/gpus.txt; cat .gpu_scratch/commit >> $OUT/gpus.txt; python3 -c "import torch; print(torch.__version__)" >> $OUT/gpus.txt
timeout 560 python3 -m pytest -q -m gpu tests/test_gpu.py -k memory > $OUT/test_gpu_memory.txt 2>&1 &
(OMP_NUM_THREADS=4 timeout 560 bash benchmarks/gpu_real_models.sh /tmp/rm2 2 4 > $OUT/real_models_2.txt 2>&1; tar czf $OUT/real_models.tgz -C /tmp rm2) &
wait
tail -3 $OUT/test_gpu_memory.txt $OUT/real_models_2.txt
