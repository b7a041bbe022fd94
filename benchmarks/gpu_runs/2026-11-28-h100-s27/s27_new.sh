#!/usr/bin/env bash
# Session 27: the two --confirm passes of test_gpu.py (cuda, emulated) over the example fixtures added or changed since b48ab48, at 4 and at 2 devices, all in parallel.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit 1
FILES=$(cat .gpu_scratch/new_fixtures.txt)
echo "$(echo $FILES | wc -w) example files" > $OUT/log.txt
for dev in 4 2; do for b in cuda emulated; do
  ( s=$(date +%s); timeout 500 python3 -m dpcheck $FILES --confirm --backend $b --devices $dev --output-format json --no-cache --select ALL --ignore DP708 > $OUT/${b}_$dev.json 2> $OUT/${b}_$dev.err; echo "$b $dev rc=$? $(( $(date +%s) - s ))s" >> $OUT/log.txt ) &
done; done
wait; cat $OUT/log.txt; nvidia-smi -L > $OUT/gpus.txt; cat .gpu_scratch/commit >> $OUT/gpus.txt; gzip $OUT/*.json
