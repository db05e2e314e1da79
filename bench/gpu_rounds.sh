#!/usr/bin/env bash
# A batch's decisions in parallel rounds on the GPU (issue 13's design
# study, bench/NOTES.md, "How sequential a batch's decisions are"), through
# scripts/gpu.sh or on any machine with a GPU and the build:
#   bash bench/gpu_rounds.sh
# Writes batches with bench/hier_chain_depth (the electrolyte's exact
# sequential chain on the host: 2^16 ions after 3 cycles, every batch of the
# third; 2^20 ions, the first 16 batches of a cycle from the placement),
# decides them on the GPU with bench/hier_rounds (rounds and a one-warp
# chain, both checked against the host's chain), and runs the sampler's
# profile at 2^20 (reference = exact, order 8) in the same call for hg_chain's
# deciding block.  Logs in $OUT (default /tmp) as gpu_rounds.tar.gz.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp}
logs=$(mktemp -d)
trap 'tar czf "$out/gpu_rounds.tar.gz" -C "$logs" . && rm -rf "$logs"' EXIT
bin=${METRO_BUILD:-build}/bin
for b in hier_chain_depth hier_rounds; do
  [ -x "$bin/$b" ] || { echo "gpu_rounds.sh: $bin/$b is not built (cmake --build ${METRO_BUILD:-build})" >&2; exit 1; }
done
work=$(mktemp -d)
rc=0
for spec in "65536 3 1024 0" "1048576 1 1024 16"; do
  set -- $spec
  "$bin/hier_chain_depth" $1 $2 $3 $4 1 "$work/b_$1.bin" | tee "$logs/depth_$1.txt" || rc=1
  "$bin/hier_rounds" "$work/b_$1.bin" 20 | tee "$logs/rounds_$1.txt" || rc=1
  rm -f "$work/b_$1.bin"
done
rm -rf "$work"
EXTRA="order = 8
reference = exact" bash bench/gpu_hier.sh profile 1048576 | tee "$logs/profile.txt" || rc=1
exit $rc
