#!/usr/bin/env bash
# Composition's cost on the GPU (issue 15), whole runs through `metro`:
#  1. brush, 2^20 particles: coulomb_hs alone (the 3:-1 electrolyte of
#     seed 002) beside a composed system of the same N (8192 chains of 64
#     charged monomers, lj_fene + coulomb_hs, and their 524288
#     counterions): seconds per cycle from runs of 1 and 5 cycles
#     (the difference removes start-up), medians of alternating rounds,
#     and the ratio;
#  2. parallel tempering of configs/polyelectrolyte.ini: particle updates
#     per second with 4096 replicas on the GPU beside 16 replicas on one
#     CPU core.
# Usage: bench/compose_cost.sh BUILD_DIR   (prints a table)
set -uo pipefail
. "$(dirname "$0")/electrolyte.sh" # potential: the electrolyte's [potential] section
B=${1:-build}
M=$B/bin/metro
w=$(mktemp -d)
calc() { awk "BEGIN { printf \"%.6g\", $1 }"; }
cat > $w/alone.ini <<INI
[run]
seed = 2
sweeps = 1
device = cuda
[system]
particles = 1048576
$(potential)
[sampler]
plugin = brush
INI
cat > $w/composed.ini <<'INI'
[run]
seed = 2
sweeps = 1
device = cuda
[system]
species = monomer, counterion
charges = -1, 1
diameters = 7.5
counts = 524288, 524288
chains = 8192x64
chain_species = monomer
[potential chain]
plugin = lj_fene
species = monomer
r0 = 8
R = 2
[potential coulomb]
plugin = coulomb_hs
cell_radius = 3795
bjerrum = 7.117
[sampler]
plugin = brush
step = 2530
INI
secs() { local t0=$(date +%s.%N); $M run "$1" --set run.sweeps=$2 ${COMPOSE_SET:-} --output $w/out --overwrite --quiet >/dev/null 2>$w/err || { cat $w/err >&2; echo nan; return; }; calc "$(date +%s.%N) - $t0"; }
printf "%-44s %12s %12s %8s\n" "figure" "unit" "value" "ratio"
# alternating rounds (the two configs see the same GPU clocks), each round
# a 1- and a 5-cycle run per config: start-up and the core's O(N^2) energy
# checks cancel in the difference; medians over the rounds
for c in alone composed; do secs $w/$c.ini 1 >/dev/null; done # warm-up: the first run of a composition compiles it (NVRTC)
R=${COMPOSE_ROUNDS:-3}
for r in $(seq 1 $R); do
  for c in alone composed; do
    t1=$(secs $w/$c.ini 1); t5=$(secs $w/$c.ini 5)
    echo "$(calc "($t5 - $t1) / 4")" >> $w/per_$c
    [ $r = 1 ] && grep -hE "brush: .*groups" $w/out/log.txt | sed 's/^/    /'
  done
done
median() { sort -g "$1" | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
per_alone=$(median $w/per_alone); per_composed=$(median $w/per_composed)
printf "%-44s %12s %12.4f   (rounds: %s)\n" "brush 2^20, alone: one cycle" "s" "$per_alone" "$(tr '\n' ' ' < $w/per_alone)"
printf "%-44s %12s %12.4f   (rounds: %s)\n" "brush 2^20, composed: one cycle" "s" "$per_composed" "$(tr '\n' ' ' < $w/per_composed)"
printf "%-44s %12s %12s %8.3f   (goal <= 1.15; medians of %d alternating rounds)\n" "composed / alone" "" "" "$(calc "$per_composed / $per_alone")" "$R"
# parallel tempering of the polyelectrolyte (66 + 66 particles); the CPU
# on one core (one OpenMP thread, pinned)
pt() { $2 $M run configs/polyelectrolyte.ini --device $1 --set sampler.replicas=$3 --set run.sweeps=$4 --set run.equilibration=0 --set "observable trajectory.every=$4" --set "observable pair_correlation.every=$4" --set "observable energy.every=$4" --set "observable polymer_shape.every=$4" --set "observable condensation.every=$4" --set sampler.threads=1 --output $w/pt --overwrite --quiet >/dev/null 2>$w/err || cat $w/err >&2
  # moves/s of the production phase, from the log's "done:" line
  sed -n 's/.*done:.* \([0-9.e+]*\) moves\/s.*/\1/p' $w/pt/log.txt; }
pt cuda "" 4096 20 >/dev/null   # warm-up, as above
gpu=$(pt cuda "" 4096 2000)
cpu=$(pt cpu "taskset -c 0" 16 200)
printf "%-44s %12s %12.4g\n" "PT polyelectrolyte, 4096 replicas, GPU" "updates/s" "$gpu"
printf "%-44s %12s %12.4g\n" "PT polyelectrolyte, 16 replicas, 1 CPU core" "updates/s" "$cpu"
printf "%-44s %12s %12s %8.1f\n" "GPU / one core" "" "" "$(calc "$gpu / $cpu")"
rm -rf $w
