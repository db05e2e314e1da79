#!/usr/bin/env bash
# The upkeep of local expansions on the GPU (bench/hier_upkeep.cu; issue
# 13's design study, bench/NOTES.md, "The upkeep on the GPU"), through
# scripts/gpu.sh or on any machine with nvcc and a GPU:
#   bash bench/gpu_upkeep.sh [N...]     default 1048576 8388608
# Runs hier_upkeep as the build made it twice (bench/CMakeLists.txt: with
# FMA, as it would run, and with --fmad=false, whose integers must equal
# the host's bit for bit; $METRO_BUILD, default build, which scripts/gpu.sh
# sets to build-gpu and builds first), checks both against the host,
# prints the table for orders 12 and 8 at each N, and with NCU=1 profiles
# gather_warp at the first N (ncu, the speed of light and the stalls).
# Logs in $OUT (default /tmp) as gpu_upkeep.tar.gz.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp}
logs=$(mktemp -d)
trap 'tar czf "$out/gpu_upkeep.tar.gz" -C "$logs" . && rm -rf "$logs"' EXIT
sizes=${*:-1048576 8388608}
bin=${METRO_BUILD:-build}/bin
for b in hier_upkeep hier_upkeep_exact; do
  [ -x "$bin/$b" ] || { echo "gpu_upkeep.sh: $bin/$b is not built (cmake --build ${METRO_BUILD:-build})" >&2; exit 1; }
done
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$logs/gpu.txt"
rc=0
for n in $sizes; do
  "$bin/hier_upkeep_exact" "$n" 12 2 | tee "$logs/exact_$n.txt" || rc=1
  for p in 12 8; do
    "$bin/hier_upkeep" "$n" "$p" 20 | tee "$logs/time_${n}_$p.txt" || rc=1
  done
done
if [ "${NCU:-0}" = 1 ]; then
  n=${sizes%% *}
  ncu --clock-control none -k regex:gather_warp --launch-skip 3 --launch-count 1 --section SpeedOfLight \
    --section Occupancy --section WarpStateStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
    "$bin/hier_upkeep" "$n" 12 4 >"$logs/ncu_$n.txt" 2>&1 || rc=1
  grep -E "Duration|Throughput|Pipe|Achieved Occupancy|Registers|Stall|Issue Slot|L2 Hit|DRAM" "$logs/ncu_$n.txt" | head -40
fi
# the table rows of every run, together
grep -h -A2 "^| N |" "$logs"/time_*.txt | grep -v -- "---" | sort -u | tee "$logs/table.md"
exit $rc
