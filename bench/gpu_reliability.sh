#!/usr/bin/env bash
# The GPU half of "runs that lose nothing" (issue 9), in two parts that each
# fit one device call.  Run through scripts/gpu.sh so the build exists:
#
#   scripts/gpu.sh bench/gpu_reliability.sh runs        every suite; the
#       65,536-replica parallel tempering run and pt_speedup at that size;
#       kill -9 at two points of a GPU brush run and of a GPU parallel
#       tempering run, resumed, compared byte for byte with straight runs
#   scripts/gpu.sh bench/gpu_reliability.sh sanitize    compute-sanitizer
#       memcheck and racecheck over every GPU suite
#
# Logs under $OUT.
set -uo pipefail
out=${OUT:-/tmp}
b=build-gpu
m=$b/bin/metro
w=$(mktemp -d)

# Run config $1 into $w/$2 straight, and again killed with SIGKILL after $3
# and $4 seconds, each time resumed; compare every CSV and the checkpoint.
kill_resume() {
  local cfg=$1 name=$2 t1=$3 t2=$4; shift 4
  $m run "$cfg" --device cuda --output $w/$name.a --quiet "$@" 2>>$out/kill_$name.log || { echo "$name: straight run failed"; return; }
  $m run "$cfg" --device cuda --output $w/$name.b --quiet "$@" 2>>$out/kill_$name.log & local pid=$!
  sleep "$t1"; kill -9 $pid 2>/dev/null; wait $pid 2>/dev/null
  $m resume $w/$name.b --device cuda --quiet 2>>$out/kill_$name.log & pid=$!
  sleep "$t2"; kill -9 $pid 2>/dev/null; wait $pid 2>/dev/null
  $m resume $w/$name.b --device cuda --quiet 2>>$out/kill_$name.log || { echo "$name: resume failed"; return; }
  local same=0 diff=0
  for f in $w/$name.a/*.csv $w/$name.a/checkpoint.bin; do
    if cmp -s "$f" "$w/$name.b/$(basename $f)"; then same=$((same + 1)); else diff=$((diff + 1)); echo "  differs: $(basename $f)"; fi
  done
  echo "$name: killed at ${t1} s and ${t2} s after (re)start, resumed: $same files identical, $diff differ" \
       "($(grep -c 'resumed from' $w/$name.b/log.txt) resumes in the log)"
}

case "${1:-runs}" in
runs)
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee $out/gpu.txt
  (cd $b && ctest --output-on-failure -j 4) > $out/ctest_all.txt 2>&1; tail -15 $out/ctest_all.txt
  cp $b/Testing/Temporary/LastTest.log $out/lasttest_all.log 2>/dev/null

  echo "== parallel tempering, N = 55, 64 temperatures x 1024 ladders = 65,536 replicas"
  $m run configs/polymer55_pt.ini --set sampler.ladders=1024 --set run.equilibration=0 --set run.sweeps=20000 \
     --device cuda --output $w/pt65536 --quiet 2>&1 | tail -2
  grep -E "done:|lanes" $w/pt65536/log.txt
  timeout 300 $b/bin/pt_speedup --sizes 55 --max-replicas 65536 --no-cpu --repeats 3 2>&1 | tail -12

  echo "== kill -9 and resume on the GPU"
  kill_resume configs/electrolyte_3to1_small.ini brush 6 5 --set run.sweeps=300 --set run.equilibration=20 \
      --set run.checkpoint_minutes=0.02
  kill_resume configs/polymer13_pt.ini pt 4 3 --set run.sweeps=200000 --set run.equilibration=10000 \
      --set run.checkpoint_minutes=0.02
  ;;
sanitize)
  # CK_FORK=no: the sanitizer follows one process; brush at small sizes
  # (METRO_BRUSH_SMALL) so racecheck ends in minutes.  Eight at a time: the GPU is shared, the host has 16 cores.
  ls $b/bin/test_*_gpu | while read t; do
    for tool in memcheck racecheck; do echo "$tool $t"; done
  done | xargs -P 8 -L 1 bash -c 'n=$(basename $1); CK_FORK=no METRO_BRUSH_SMALL=1 timeout 240 compute-sanitizer \
      --tool $0 --error-exitcode 9 $1 > '"$out"'/san_${0}_$n.txt 2>&1; echo "$0 $n rc=$? $(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" '"$out"'/san_${0}_$n.txt | tail -1)"' \
      | sort | tee $out/sanitizers.txt
  ;;
sanitize-cli)
  # The suites that run long chains (metropolis, the two ions, quickstart)
  # outlast the sanitizers' slowdown; their kernels are covered here by
  # short runs of the program: every sampler's CUDA path, both metropolis
  # schemes, the core's energy kernel, each observable's device path.
  c=$w/cfg; mkdir -p $c
  printf '[run]\nsweeps = 200\ncheck_every = 50\n[system]\nparticles = 13\n[potential]\nplugin = lj_fene\n[sampler]\nplugin = metropolis\ntemperature = 1\nscheme = %s\n[observable energy]\nplugin = energy\n' block > $c/mb.ini
  printf '[run]\nsweeps = 200\ncheck_every = 50\n[system]\nparticles = 13\n[potential]\nplugin = lj_fene\n[sampler]\nplugin = metropolis\ntemperature = 1\nscheme = %s\n[observable energy]\nplugin = energy\n' reduction > $c/mr.ini
  printf '[run]\nsweeps = 40\ncheck_every = 20\n[system]\nparticles = 2\n[potential]\nplugin = coulomb_hs\nvalences = 1,-1\ndiameters = 4\ncell_radius = 20\n[sampler]\nplugin = metropolis\ntemperature = 1\n[observable energy]\nplugin = energy\n' > $c/ions.ini
  printf '[run]\nsweeps = 100\ncheck_every = 50\n[system]\nparticles = 13\n[potential]\nplugin = lj_fene\n[sampler]\nplugin = parallel_tempering\nreplicas = 8\nladders = 70\nexchange_every = 10\n[observable polymer_shape]\nplugin = polymer_shape\nevery = 10\n[observable energy]\nplugin = energy\nevery = 10\n' > $c/pt.ini
  for cfg in mb mr ions pt; do for tool in memcheck racecheck; do echo "$tool $cfg"; done; done |
    xargs -P 8 -L 1 bash -c 'CK_FORK=no timeout 280 compute-sanitizer --tool $0 --error-exitcode 9 '"$m"' run '"$c"'/$1.ini \
      --device cuda --output '"$w"'/$0_$1 --quiet > '"$out"'/sancli_${0}_$1.txt 2>&1; echo "$0 $1 rc=$? $(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" '"$out"'/sancli_${0}_$1.txt | tail -1)"' \
    | sort | tee $out/sanitizers_cli.txt
  ;;
esac
rm -rf $w
