#!/usr/bin/env bash
# A batch's decisions in parallel rounds on the GPU (issue 13's design
# study, bench/NOTES.md, "How sequential a batch's decisions are"), through
# scripts/gpu.sh or on any machine with a GPU and the build:
#   bash bench/gpu_rounds.sh
# Writes batches with bench/hier_chain_depth (the electrolyte's exact
# sequential chain on the host: 2^16 ions after 3 cycles, every batch of the
# third; 2^20 ions, the first 16 batches of a cycle from the placement, and
# again from the state the GPU sampler itself reaches after EQ cycles,
# default 40, written as extended XYZ by the trajectory observable),
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
# the equilibrated start: the sampler (reference = exact, order 8) for EQ
# cycles at 2^20, its last configuration in extended XYZ
. bench/electrolyte.sh
eq=${EQ:-40}
ini 1048576 hierarchical $eq "order = 8
reference = exact
[observable trajectory]
plugin = trajectory
format = xyz
every = $eq" >"$work/eq.ini"
timeout 400 "$bin/metro" run "$work/eq.ini" --output "$work/eq" --overwrite >"$logs/equilibrate.txt" 2>&1 || rc=1
tail -3 "$logs/equilibrate.txt"
for spec in "65536 3 1024 0" "1048576 1 1024 16" "1048576 1 1024 16 $work/eq/trajectory.xyz"; do
  set -- $spec
  tag=$1${5:+_eq$eq}
  "$bin/hier_chain_depth" $1 $2 $3 $4 1 "$work/b_$tag.bin" ${5:-} | tee "$logs/depth_$tag.txt" || rc=1
  "$bin/hier_rounds" "$work/b_$tag.bin" 20 | tee "$logs/rounds_$tag.txt" || rc=1
  rm -f "$work/b_$tag.bin"
done
rm -rf "$work"
EXTRA="order = 8
reference = exact" bash bench/gpu_hier.sh profile 1048576 | tee "$logs/profile.txt" || rc=1
exit $rc
