#!/usr/bin/env bash
# The two --confirm passes test_gpu.py makes (cuda and emulated, all example fixtures), in parallel, each timed.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit 1
FILES=$(grep -l "def dpcheck_example" $(find fixtures -name "*.py" ! -name "*.fixed.py" | sort))
echo "$(echo $FILES | wc -w) example files" > $OUT/log.txt
for b in cuda emulated; do
  ( s=$(date +%s); timeout 530 python3 -m dpcheck $FILES --confirm --backend $b --devices ${DEV:-2} --output-format json --no-cache --select ALL --ignore DP708 > $OUT/$b.json 2> $OUT/$b.err; echo "$b rc=$? $(( $(date +%s) - s ))s" >> $OUT/log.txt ) &
done
wait; cat $OUT/log.txt; tail -c 1500 $OUT/cuda.err; gzip $OUT/*.json
