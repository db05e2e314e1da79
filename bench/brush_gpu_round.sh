#!/usr/bin/env bash
# One GPU round for brush work (run via scripts/gpu.sh): the brush GPU
# suites, racecheck and memcheck on a small case, the scaling table (GPU
# columns) and per-group traces at three sizes.  Logs under $OUT.
set -uo pipefail
out=${OUT:-/tmp}
b=build-gpu
(cd $b && ctest --output-on-failure -L gpu -R 'brush|two_ions|coulomb') > $out/ctest_brush.txt 2>&1; tail -4 $out/ctest_brush.txt
for tool in racecheck memcheck; do
  CK_FORK=no METRO_BRUSH_SMALL=1 timeout 120 compute-sanitizer --tool $tool --error-exitcode 9 $b/bin/test_brush_gpu > $out/san_$tool.txt 2>&1
  echo "$tool rc=$? $(grep -E 'SUMMARY' $out/san_$tool.txt)"
done
timeout 240 $b/bin/brush_scaling --sizes ${SIZES:-8192,16384,32768,65536,262144,1048576} --no-cpu --no-conventional > $out/scaling.txt 2>&1
tail -8 $out/scaling.txt
for n in ${TRACE:-8192 65536 1048576}; do
  METRO_BRUSH_TRACE=$out/trace_$n.csv timeout 120 $b/bin/brush_scaling --sizes $n --no-cpu --no-conventional --reps 3 > /dev/null 2>&1
done
