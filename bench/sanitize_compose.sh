#!/usr/bin/env bash
# bench/sanitize_compose.sh — compute-sanitizer (memcheck, racecheck) on the
# composed kernels through metro itself: charged chains of 8, 5 and 11 with their
# counterions under brush, parallel tempering and metropolis, polymer_shape
# measuring on the device.  On the GPU machine:
#   scripts/gpu.sh bash bench/sanitize_compose.sh     (logs under $OUT)
set -u
w=$(mktemp -d)
for s in brush parallel_tempering metropolis; do
  extra=""; [ $s = parallel_tempering ] && extra=$'t_min = 0.5\nt_max = 2\nreplicas = 4'
  [ $s = metropolis ] && extra="temperature = 1"
  cat > $w/$s.ini <<INI
[run]
seed = 4
sweeps = 20
device = cuda
[system]
species = m, c
charges = -1, 1
diameters = 0.5
counts = 24, 24
chains = 8, 5, 11
chain_species = m
[potential chain]
plugin = lj_fene
species = m
[potential coulomb]
plugin = coulomb_hs
cell_radius = 8
bjerrum = 2
[sampler]
plugin = $s
$extra
[observable shape]
plugin = polymer_shape
every = 1
plots = false
reweight = false
INI
  for tool in memcheck racecheck; do
    timeout 120 compute-sanitizer --tool $tool --error-exitcode 9 build-gpu/bin/metro run $w/$s.ini --output $w/o_${s}_$tool --quiet > $OUT/san_cli_${s}_$tool.txt 2>&1
    echo "$tool $s: rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/san_cli_${s}_$tool.txt | tail -1)"
  done
done
