#!/usr/bin/env bash
# Last GPU batch of a session: every suite on the final tree, and a
# diagnosis of MPI on the GPU machine (its own OpenMPI), each step bounded.
# Run through scripts/gpu.sh.  Logs under $OUT.
set -uo pipefail
out=${OUT:-/tmp}
(cd build-gpu && ctest --output-on-failure -j 4) > $out/ctest_all.txt 2>&1
grep -E "tests passed|Failed|\*\*\*" $out/ctest_all.txt | head -20
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
echo "== MPI on this machine"
timeout 30 mpirun --oversubscribe -np 2 hostname; echo "hostname x2: rc=$?"
cmake -S . -B build-gpu-mpi -G Ninja -DCMAKE_BUILD_TYPE=Release -DMETRO_MPI=ON -DMETRO_FUZZ=OFF >$out/mpi_cmake.log 2>&1 &&
  cmake --build build-gpu-mpi -j >$out/mpi_build.log 2>&1 || { echo "no MPI build"; exit 0; }
w=$(mktemp -d)
printf '[run]\nseed = 21\nsweeps = 1200\nequilibration = 200\ncheck_every = 300\n[system]\nparticles = 13\n[potential]\nplugin = lj_fene\n[sampler]\nplugin = parallel_tempering\nt_min = 0.3\nt_max = 2\nreplicas = 7\nladders = 3\nexchange_every = 10\n[observable energy]\nplugin = energy\nevery = 10\n' > $w/pt.ini
for dev in cpu cuda; do
  build-gpu-mpi/bin/metro run $w/pt.ini --device $dev --output $w/one_$dev --quiet 2>/dev/null
  for mca in "" "--mca btl self,tcp"; do
    rm -rf $w/two_$dev
    timeout 60 mpirun --oversubscribe -np 2 $mca build-gpu-mpi/bin/metro run $w/pt.ini --device $dev --output $w/two_$dev --quiet >$out/mpi_${dev}.log 2>&1
    rc=$?
    same=$(cd $w/one_$dev && for f in *.csv checkpoint.bin; do cmp -s $f $w/two_$dev/$f && echo -n "$f "; done)
    echo "$dev, 2 ranks ${mca:-default transports}: rc=$rc; identical to one process: $same"
  done
done
rm -rf $w
