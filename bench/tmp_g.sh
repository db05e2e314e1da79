#!/usr/bin/env bash
set -u
echo "== tests $(date +%T)"
TEST_TIMEOUT=200 bash bench/gpu_hier.sh tests | head -2
grep -E "N = |100%|Checks|Assert|:F:|:E:" $OUT/test_hier_gpu.txt | cut -c1-200 | head -14
echo "== sanitize $(date +%T)"
timeout 200 bash bench/gpu_hier.sh sanitize
grep -E "RACECHECK SUMMARY" $OUT/san_racecheck.txt | head -3
echo "== profile $(date +%T)"
for r in 2 0; do
  echo "refine = $r"
  for n in 1048576 4194304; do
    sw=1; [ $n = 1048576 ] && sw=2
    EXTRA="refine = $r" SWEEPS=$sw timeout 150 bash bench/gpu_hier.sh profile $n > /dev/null
    grep -E "profile so far|cycles, acc|done:" $OUT/profile_$n.txt | tail -3 | cut -c1-330
  done
done
echo "== end $(date +%T)"
