#!/usr/bin/env bash
# bench/gpu_batch.sh — one GPU call for brush's shared launches (issue 11),
# run through scripts/gpu.sh (which builds build-gpu first):
#   bash scripts/gpu.sh bash bench/gpu_batch.sh [quick|full]
# 1. the shared-launch GPU tests (grouped systems equal separate runs, bit
#    for bit); 2. bench/ensemble_scaling, shared launches, N = 8192 and
#    65536, K = 1, 8, 32, 128; 3. the same with one launch per system
#    (streams) at 8192 for comparison; 4. (full) the brush and ensemble
#    suites.  Each step has a time limit; logs go to $OUT.
set -uo pipefail
out=${OUT:-/tmp}
B=${METRO_BUILD:-build-gpu}
step() { echo "=== $* ($(date +%T))"; }
step shared-launch tests
(cd "$B" && CK_RUN_CASE=shared_launches timeout 150 ./bin/test_brush_gpu) 2>&1 | tee "$out/test_shared.log" | tail -15
step bench shared
timeout 200 "$B/bin/ensemble_scaling" --sizes 8192,65536 --systems 1,8,32,128 2>&1 | tee "$out/bench_shared.log"
step bench streams 8192
timeout 60 "$B/bin/ensemble_scaling" --mode streams --sizes 8192 --systems 1,8,32,128 2>&1 | tee "$out/bench_streams.log"
if [ "${1:-quick}" = full ]; then
  step suites
  (cd "$B" && timeout 240 ctest --output-on-failure -R "brush|ensemble" -j 3) 2>&1 | tee "$out/ctest.log" | tail -25
fi
step done
