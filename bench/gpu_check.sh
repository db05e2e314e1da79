#!/usr/bin/env bash
# One GPU batch: every test suite, compute-sanitizer on the brush kernel, an
# Nsight Compute profile of it at both ends of the scaling curve, and the
# brush timing trace.  Logs under $OUT.  Run via scripts/gpu.sh so the
# build exists: scripts/gpu.sh bench/gpu_check.sh
set -uo pipefail
out=${OUT:-/tmp}
b=build-gpu
(cd $b && ctest --output-on-failure -j 4) > $out/ctest_all.txt 2>&1; tail -6 $out/ctest_all.txt
cp $b/Testing/Temporary/LastTest.log $out/lasttest_all.log
for tool in racecheck memcheck synccheck; do
  CK_FORK=no METRO_BRUSH_SMALL=1 timeout 100 compute-sanitizer --tool $tool --error-exitcode 9 $b/bin/test_brush_gpu > $out/san_$tool.txt 2>&1
  echo "$tool rc=$? $(grep -E 'SUMMARY' $out/san_$tool.txt)"
done >> $out/sanitizers.txt
cat $out/sanitizers.txt
for n in 8192 1048576; do
  timeout 120 ncu --clock-control none --kernel-name regex:brush_cycle --launch-skip 2 --launch-count 1 \
    --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section ComputeWorkloadAnalysis \
    $b/bin/brush_scaling --sizes $n --no-cpu --no-conventional --reps 1 > $out/ncu_$n.txt 2>&1
  grep -E "Duration|Compute \(SM\) Throughput|Issue Slots Busy|Achieved Occupancy|Warp Cycles Per Issued|Stall|No Eligible" $out/ncu_$n.txt | head -12
done
METRO_BRUSH_TRACE=1 timeout 60 $b/bin/brush_scaling --sizes 8192 --no-cpu --no-conventional --reps 3 2>&1 | grep -i trace | tail -3
