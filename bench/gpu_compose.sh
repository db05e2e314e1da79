#!/usr/bin/env bash
# GPU batch for issue 15 (composed potentials), through scripts/gpu.sh:
# the GPU suites on this tree, the single-potential speed against the tree
# before composition (old/, git archive 88a45b3, built beside) in the same
# run, alternating, and the composition's own cost.  Logs under $OUT.
set -uo pipefail
out=${OUT:-/tmp}
( cd old && cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DMETRO_FUZZ=OFF >$out/old_cmake.log 2>&1 &&
  nice cmake --build build-gpu -j 8 >$out/old_build.log 2>&1; echo "old build rc=$?" > $out/old_rc.txt ) &
(cd build-gpu && ctest --output-on-failure -j 3 -L gpu) > $out/ctest_gpu.txt 2>&1
grep -E "tests passed|Failed|\*\*\*|dimer|skipped" $out/ctest_gpu.txt | head -30
echo "== compute-sanitizer on the composed kernels (generated energy inlined into brush, PT, metropolis)"
for tool in memcheck racecheck; do
  CK_FORK=no timeout 240 compute-sanitizer --tool $tool --error-exitcode 9 build-gpu/bin/test_compose_gpu > $out/sanitizer_$tool.txt 2>&1
  echo "$tool: rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $out/sanitizer_$tool.txt | tail -1)"
done
wait
cat $out/old_rc.txt
export METRO_CACHE_DIR=/tmp/metro-cache
echo "== single-potential speed: new (this tree) and old (88a45b3), alternating"
for round in 1 2; do
  for t in new old; do
    d=build-gpu; [ $t = old ] && d=old/build-gpu
    echo "-- $t, round $round"
    $d/bin/brush_scaling --sizes 1048576 --reps 3 --no-conventional --no-cpu 2>&1 | tail -4
    $d/bin/pt_speedup --sizes 55 --no-cpu --max-replicas 16384 --repeats 3 2>&1 | tail -4
  done
done > $out/speed.txt 2>&1
cat $out/speed.txt
echo "== composition's cost"
bash bench/compose_cost.sh build-gpu 2>&1 | tee $out/compose_cost.txt
