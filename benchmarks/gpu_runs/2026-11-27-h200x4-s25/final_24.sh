#!/usr/bin/env bash
# test_gpu at 2 and 4 devices and the real-model suite at 2 and 4 devices, all at once. Output under $OUT.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit 1
export PYTHONUNBUFFERED=1
{ nvidia-smi -L; cat .gpu_scratch/commit; python3 -c "import torch; print(torch.__version__)"; nproc; } > $OUT/gpus.txt 2>&1
DPCHECK_GPU_REPORT=$OUT/fixtures timeout 575 python3 -m pytest -q -m gpu tests/test_gpu.py -k "2" > $OUT/test_gpu_2.txt 2>&1 &
DPCHECK_GPU_REPORT=$OUT/fixtures timeout 575 python3 -m pytest -q -m gpu tests/test_gpu.py -k "4 or memory" > $OUT/test_gpu_4.txt 2>&1 &
(timeout 575 bash benchmarks/gpu_real_models.sh /tmp/rm2 2 4 > $OUT/real_models_2.txt 2>&1; tar czf $OUT/real_models2.tgz -C /tmp rm2) &
(timeout 575 bash benchmarks/gpu_real_models.sh /tmp/rm4 4 4 > $OUT/real_models_4.txt 2>&1; tar czf $OUT/real_models4.tgz -C /tmp rm4) &
wait
gzip $OUT/fixtures*.json 2>/dev/null
tail -n 3 $OUT/test_gpu_2.txt $OUT/test_gpu_4.txt
