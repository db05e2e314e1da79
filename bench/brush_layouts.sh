#!/usr/bin/env bash
# Layout sweep for the brush sampler (run via scripts/gpu.sh): GPU time per
# cycle (one cycle per launch, then chained) of several
# (block, per_thread, eta) at each size, to choose the automatic layout.
b=build-gpu
bs="$b/bin/brush_scaling --no-cpu --no-conventional --reps 3"
run() { n=$1; shift; echo "N=$n $*: $($bs --sizes $n "$@" 2>&1 | grep -E '^ *[0-9]+ \|' | awk -F'|' '{print $2}')"; }
s() { echo "--set sampler.block=$1 --set sampler.per_thread=$2 --set sampler.eta=$3"; }
run 8192 $(s 128 1 2); run 8192 $(s 256 1 8)
run 65536 $(s 1024 1 16); run 65536 $(s 512 1 4)
run 262144 $(s 1024 1 8); run 262144 $(s 512 1 2)
run 1048576 $(s 256 2 2)
