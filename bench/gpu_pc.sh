#!/usr/bin/env bash
# What one g(r) measurement costs on the CUDA backend, by path, in one run
# (through scripts/gpu.sh; logs under $OUT):
#   scripts/gpu.sh bash bench/gpu_pc.sh N...
# The paper's 3:-1 electrolyte at N ions, one hierarchical cycle from the
# random placement, pair_correlation measuring once with its defaults
# (r_max = wall margin - d/2, 250 bins); the figure is the observable's own
# "one measurement took T s" (host selection of central ions, counting,
# copies; the positions' copy to the host is the core's and not in it):
#   GPU cells   histogram = gpu, potential = false: the host's cell list,
#               the GPU's kernel pair_correlation_cells
#   CPU cells   histogram = cpu, potential = false: the host's cell list
#               counted on every core
#   GPU pairs   histogram = gpu, potential = true: every pair (the kernel
#               that served before the cell list, and still does with the
#               potential sums)
set -uo pipefail
out=${OUT:-/tmp}
export METRO_CACHE_DIR=/tmp/metro-cache
. "$(dirname "$0")/electrolyte.sh"
pc_ini() { # N HISTOGRAM POTENTIAL
  SEED=3 ini $1 hierarchical 1 "[observable pair_correlation]
plugin = pair_correlation
every = 1
histogram = $2
potential = $3
plots = false"
}
took() { # N HISTOGRAM POTENTIAL -> seconds of the measurement
  pc_ini "$@" > /tmp/pc.ini
  rm -rf /tmp/pc_run
  timeout 560 build-gpu/bin/metro run /tmp/pc.ini --output /tmp/pc_run --overwrite --quiet > $out/pc_$1_$2_$3.txt 2>&1
  cp /tmp/pc_run/log.txt $out/log_pc_$1_$2_$3.txt 2>/dev/null
  grep -oE 'one measurement took [0-9.e+-]+ s' /tmp/pc_run/log.txt | awk '{print $4}'
}
echo "| N | GPU cells, s | CPU cells ($(nproc) cores), s | GPU pairs with the potential sums (same run), s | GPU pairs / GPU cells | CPU cells / GPU cells |"
echo "|---|---|---|---|---|---|"
for n in "$@"; do
  g=$(took $n gpu false); c=$(took $n cpu false); p=$(took $n gpu true)
  echo "| $n | ${g:-fail} | ${c:-fail} | ${p:-fail} | $(awk -v a=${p:-nan} -v b=${g:-nan} 'BEGIN{printf "%.0f", a/b}') | $(awk -v a=${c:-nan} -v b=${g:-nan} 'BEGIN{printf "%.1f", a/b}') |"
done
