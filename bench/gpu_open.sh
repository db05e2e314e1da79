#!/usr/bin/env bash
# The GPU figures of "bring your own system" (issue 10) and "past one
# system" (issue 11), in parts that each fit one device call.  Run through
# scripts/gpu.sh so the build exists:
#
#   scripts/gpu.sh bench/gpu_open.sh tests     every suite; compute-sanitizer
#       on the trajectory and ensemble suites and the parallel tempering
#       kernel's new first-replica offset
#   scripts/gpu.sh bench/gpu_open.sh figures   ensemble_scaling; the cost of
#       a GSD frame of 2^20 ions; brush at 2^20 with and without a GSD frame
#       every 10 cycles
#   scripts/gpu.sh bench/gpu_open.sh mpi       an MPI build with the
#       machine's own MPI, if CMake finds one: test_mpi, and parallel
#       tempering N = 55 with 2 x 32768 replicas on 1 and 2 ranks, and an
#       ensemble of 32 brush systems of 8192 ions on 1 and 2 ranks
#
# Logs under $OUT.
set -uo pipefail
. "$(dirname "$0")/electrolyte.sh" # potential: the electrolyte's [potential] section
out=${OUT:-/tmp}
b=build-gpu
m=$b/bin/metro
w=$(mktemp -d)

case "${1:-tests}" in
tests)
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  (cd $b && ctest --output-on-failure -j 4) > $out/ctest_all.txt 2>&1; tail -25 $out/ctest_all.txt | grep -v "^$"
  for t in test_trajectory_gpu test_ensemble_gpu; do
    for tool in memcheck racecheck; do echo "$tool $t"; done
  done | xargs -P 4 -L 1 bash -c 'CK_FORK=no timeout 280 compute-sanitizer --tool $0 --error-exitcode 9 '"$b"'/bin/$1 \
      > '"$out"'/san_${0}_$1.txt 2>&1; echo "$0 $1 rc=$? $(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" '"$out"'/san_${0}_$1.txt | tail -1)"'
  bench/gpu_reliability.sh sanitize-cli 2>&1 | tail -8
  ;;
figures)
  timeout 400 $b/bin/ensemble_scaling 2>&1 | tee $out/ensemble_scaling.txt
  $b/bin/frame_cost --frames 5 --dir $w 2>&1 | tee $out/frame_cost.txt
  # brush at 2^20: 20 cycles, g(r) off, with and without a GSD frame every
  # 10 cycles; the wall time of the production phase from the log
  base=configs/electrolyte_3to1.ini
  for mode in plain traj plain traj; do
    extra=()
    [ $mode = traj ] && extra=(--set "observable traj.plugin=trajectory" --set "observable traj.every=10")
    $m run $base --set run.sweeps=20 --set run.equilibration=0 --set "observable pair_correlation.every=20" \
       "${extra[@]}" --device cuda --output $w/$mode --overwrite --quiet 2>/dev/null
    echo "$mode: $(grep -E 'done:' $w/$mode/log.txt) $(ls -la $w/$mode/*.gsd 2>/dev/null | awk '{print $5" bytes"}')"
  done | tee $out/brush_traj.txt
  ;;
mpi)
  if cmake -S . -B build-gpu-mpi -G Ninja -DCMAKE_BUILD_TYPE=Release -DMETRO_MPI=ON > $out/mpi_cmake.log 2>&1 &&
     cmake --build build-gpu-mpi -j > $out/mpi_build.log 2>&1; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    (cd build-gpu-mpi && timeout 300 ctest -R test_mpi --output-on-failure) 2>&1 | tail -8
    for r in 1 2; do
      /usr/bin/time -f "%e s" mpirun --oversubscribe -np $r build-gpu-mpi/bin/metro run configs/polymer55_pt.ini \
        --set sampler.ladders=512 --set run.equilibration=0 --set run.sweeps=20000 --device cuda \
        --output $w/pt$r --quiet 2>&1 | tail -1
      echo "$r rank(s): $(grep -E 'done:' $w/pt$r/log.txt)"
    done
    # an ensemble of 32 brush systems of 8192 ions (shared launches, the
    # 256/2/8 layout) on 1 and 2 ranks: total moves/s from the wall time of
    # the production phase (the systems' own "done:" lines, summed)
    cat > $w/ens.ini <<INI
[run]
seed = 11
systems = 32
equilibration = 20
sweeps = 1500
device = cuda
[system]
particles = 8192
$(potential)
[sampler]
plugin = brush
block = 256
per_thread = 2
eta = 8
[observable energy]
plugin = energy
series = false
INI
    for r in 1 2; do
      /usr/bin/time -f "wall %e s" mpirun --oversubscribe -np $r build-gpu-mpi/bin/metro run $w/ens.ini \
        --output $w/ens$r --quiet 2>&1 | tail -1
      awk -v r=$r '/done:/ { for (i = 1; i <= NF; i++) if ($i ~ /moves\/s/) { gsub(/\(/, "", $(i-1)); s += $(i-1); n++ } }
        END { printf "%d rank(s): %d systems, summed %.4g moves/s\n", r, n, s }' $w/ens$r/system_*/log.txt
    done
  else
    echo "no MPI build here:"; grep -iE "mpi|error" $out/mpi_cmake.log | head -5
  fi
  ;;
esac
rm -rf $w
