#!/usr/bin/env bash
# bench/gpu_batch.sh — one GPU call for brush's shared launches (issue 11),
# run through scripts/gpu.sh (which builds build-gpu first):
#   bash scripts/gpu.sh bash bench/gpu_batch.sh [quick|full|layouts|tuned]
# 1. the shared-launch GPU tests (grouped systems equal separate runs, bit
#    for bit); 2. bench/ensemble_scaling, shared launches, N = 8192 and
#    65536, K = 1, 8, 32, 128; 3. the same with one launch per system
#    (streams) at 8192 for comparison; 4. (full) the brush and ensemble
#    suites.  `layouts` instead: N = 8192 shared at K = 32, 128 in other
#    layouts (block/per_thread/eta) and with chained cycles, then ncu's view
#    of one shared launch (K = 128, auto layout).  `tuned`: the whole N =
#    8192 table in the two best of those layouts.  Each step has a time
#    limit; logs go to $OUT.
set -uo pipefail
out=${OUT:-/tmp}
B=${METRO_BUILD:-build-gpu}
step() { echo "=== $* ($(date +%T))"; }
if [ "${1:-quick}" = tuned ]; then
  for L in 256/2/8 128/2/4; do
    IFS=/ read -r T P E <<<"$L"
    for mode in shared streams; do
      step "$mode, layout $L"
      timeout 90 "$B/bin/ensemble_scaling" --mode $mode --sizes 8192 --systems 1,8,32,128 --set sampler.block=$T \
        --set sampler.per_thread=$P --set sampler.eta=$E 2>&1 | tee -a "$out/tuned.log" | grep -E "^ +8192|settings"
    done
  done
  step "auto layout again"
  timeout 60 "$B/bin/ensemble_scaling" --sizes 8192 --systems 1,128 2>&1 | tee -a "$out/tuned.log" | grep -E "^ +8192"
  step done
  exit 0
fi
if [ "${1:-quick}" = layouts ]; then
  for L in 256/2/4 128/2/4 256/2/8 256/2/2 512/1/4 256/4/8; do
    IFS=/ read -r T P E <<<"$L"
    step "layout $L"
    timeout 60 "$B/bin/ensemble_scaling" --sizes 8192 --systems 32,128 --set sampler.block=$T --set sampler.per_thread=$P \
      --set sampler.eta=$E 2>&1 | tee -a "$out/layouts.log" | grep -E "^ +8192|settings"
  done
  step "auto layout, 4 cycles per launch"
  timeout 60 "$B/bin/ensemble_scaling" --sizes 8192 --systems 32,128 --set sampler.cycles_per_launch=4 2>&1 |
    tee -a "$out/layouts.log" | grep -E "^ +8192|settings"
  step ncu
  timeout 200 ncu -k regex:brush_batch --launch-skip 30 --launch-count 1 --section SpeedOfLight \
    --section ComputeWorkloadAnalysis --section Occupancy --section LaunchStats --section SchedulerStats \
    "$B/bin/ensemble_scaling" --sizes 8192 --systems 128 --reps 1 >"$out/ncu.log" 2>&1
  grep -vE "^==PROF==|^ *$" "$out/ncu.log" | tail -90
  step done
  exit 0
fi
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
