#!/usr/bin/env bash
# GPU batch for issue 15 (composed potentials), through scripts/gpu.sh, in
# parts that each fit one device call (logs under $OUT):
#   scripts/gpu.sh bash bench/gpu_compose.sh tests    every GPU suite;
#       compute-sanitizer on the composed kernels and polymer_shape; the MPI
#       build (machine's own OpenMPI) and test_mpi
#   scripts/gpu.sh bash bench/gpu_compose.sh speed    single-potential speed
#       against the tree before composition (old/: git archive 88a45b3,
#       built beside) in the same run, alternating; composition's cost
#       (bench/compose_cost.sh)
#   scripts/gpu.sh bash bench/gpu_compose.sh runs     test_compose_gpu's
#       runs case (brush's second pass), then again on a library whose
#       composite never takes the second pass: it must fail there
#   scripts/gpu.sh bash bench/gpu_compose.sh physics  the two polyelectrolyte
#       configs (monovalent, trivalent counterions) with 64 PT ladders; their
#       results copied to $OUT/mono and $OUT/tri
set -uo pipefail
out=${OUT:-/tmp}
case "${1:-tests}" in
tests)
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  ( cmake -S . -B build-gpu-mpi -G Ninja -DCMAKE_BUILD_TYPE=Release -DMETRO_MPI=ON -DMETRO_FUZZ=OFF >$out/mpi_cmake.log 2>&1 &&
    nice cmake --build build-gpu-mpi -j 6 >$out/mpi_build.log 2>&1; echo "mpi build rc=$?" >$out/mpi_rc.txt ) &
  (cd build-gpu && timeout 330 ctest --output-on-failure -j 3 -L gpu) > $out/ctest_gpu.txt 2>&1
  grep -E "tests passed|Failed|\*\*\*|dimer|skipped|Passed" $out/ctest_gpu.txt | head -30
  echo "== compute-sanitizer: the composed kernels (bench/sanitize_compose.sh) and polymer_shape's"
  bash bench/sanitize_compose.sh
  CK_FORK=no timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 build-gpu/bin/test_polymer_shape_gpu \
    > $out/san_polymer_shape.txt 2>&1
  echo "memcheck test_polymer_shape_gpu: rc=$? $(grep 'ERROR SUMMARY' $out/san_polymer_shape.txt)"
  wait
  cat $out/mpi_rc.txt
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  (cd build-gpu-mpi && timeout 120 ctest -R test_mpi --output-on-failure) 2>&1 | tail -6
  ;;
speed)
  ( cd old && cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DMETRO_FUZZ=OFF >$out/old_cmake.log 2>&1 &&
    nice cmake --build build-gpu -j 12 >$out/old_build.log 2>&1; echo "old build rc=$?" )
  export METRO_CACHE_DIR=/tmp/metro-cache
  echo "== single-potential speed: new (this tree) and old (88a45b3), alternating"
  for round in 1 2; do
    for t in new old; do
      d=build-gpu; [ $t = old ] && d=old/build-gpu
      echo "-- $t, round $round"
      $d/bin/brush_scaling --sizes 1048576 --reps 3 --no-conventional --no-cpu 2>&1 | tail -4
      # the full protocol (n_r up to 65536: the best n_r is the figure);
      # the rows from 16384 on show where the GPU fills
      $d/bin/pt_speedup --sizes 55 --no-cpu --max-replicas 65536 --repeats 3 2>&1 | grep -E "^ +(16384|32768|65536) |best n_r"
    done
  done 2>&1 | tee $out/speed.txt
  echo "== composition's cost"
  bash bench/compose_cost.sh build-gpu 2>&1 | tee $out/compose_cost.txt
  ;;
runs)
  (cd build-gpu && CK_RUN_CASE=runs ./bin/test_compose_gpu) 2>&1 | tail -3
  echo "== broken: near() false in every composite (compose.c), so no second pass"
  cp core/src/compose.c $out/compose.c.keep
  sed -i 's/"s->near < %.9gf"/"false \&\& s->near < %.9gf"/' core/src/compose.c
  grep -c 'false && s->near' core/src/compose.c
  cmake --build build-gpu -j "$(nproc)" >$out/broken_build.log 2>&1 || tail -20 $out/broken_build.log
  (cd build-gpu && CK_RUN_CASE=runs METRO_CACHE_DIR=/tmp/metro-cache-broken ./bin/test_compose_gpu) 2>&1 | tail -3
  echo "broken rc=${PIPESTATUS[0]}"
  cp $out/compose.c.keep core/src/compose.c
  touch core/src/compose.c
  cmake --build build-gpu -j "$(nproc)" >$out/restored_build.log 2>&1 || tail -20 $out/restored_build.log
  ;;
physics)
  export METRO_CACHE_DIR=/tmp/metro-cache
  w=/tmp/physics
  for c in mono tri; do
    ini=configs/polyelectrolyte.ini; [ $c = tri ] && ini=configs/polyelectrolyte_trivalent.ini
    /usr/bin/time -f "$c: %e s" timeout 230 build-gpu/bin/metro run $ini --device cuda --set sampler.ladders=64 \
      --set run.sweeps=${SWEEPS:-500000} --output $w/$c --overwrite --quiet 2>&1 | tail -2
    grep -E "done:" $w/$c/log.txt
  done
  # the tables only (the device tool brings back a few files)
  (cd $w && tar czf $out/physics.tgz */*.csv */config.ini */log.txt)
  ;;
esac
# (appended) sass: instruction counts of the PT and brush kernels, this tree
# against old/ (88a45b3), and of brush with a composite, from test_jit's
# cubins (METRO_JIT_DUMP)
if [ "${1:-}" = sass ]; then
  ( cd old && { [ -f build-gpu/CMakeCache.txt ] || cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DMETRO_FUZZ=OFF >$out/old_cmake.log 2>&1; } &&
    cmake --build build-gpu -j 16 --target test_jit >$out/old_build.log 2>&1; echo "old test_jit build rc=$?" )
  for t in new old; do
    d=build-gpu; [ $t = old ] && d=old/build-gpu
    mkdir -p $out/cubin_$t
    (cd $d && METRO_JIT_DUMP=$out/cubin_$t CK_RUN_CASE=link ./bin/test_jit >/dev/null 2>&1)
  done
  for f in cubin_new/parallel_tempering_lj_fene cubin_old/parallel_tempering_lj_fene cubin_new/brush_coulomb_hs \
           cubin_old/brush_coulomb_hs cubin_new/brush_composite; do
    [ -f $out/$f.cubin ] || { echo "$f: none"; continue; }
    cuobjdump -sass $out/$f.cubin > $out/$f.sass 2>&1
    echo "== $f"
    awk '/Function :/ { if (name) printf "  %-50s %6d instr\n", name, n; name = $3; n = 0 } /^ +\/\*[0-9a-f]+\*\// { n++ }
         END { printf "  %-50s %6d instr\n", name, n }' $out/$f.sass | grep -E "sweeps_g8|brush_(cycle|batch_p1|group)|brush" | head -12
  done
fi
