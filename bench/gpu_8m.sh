#!/usr/bin/env bash
# The 2^23 electrolyte (configs/electrolyte_3to1_8M.ini) on lent GPU
# machines.  Its 240 cycles take about 45 minutes on one H100 (10.5-11.5 s a
# cycle with reference = exact): more than one call (10 min), one machine
# (30 min held) or one session's device time.  Two ways:
# - ensemble: K independent systems on a K-GPU host, each call running on
#   (or resuming) all of them; 4 x (40 + 50) cycles take about 17 min:
#     T0=$(date +%s) METRO_GPU_NOBUILD=1 K=4 SWEEPS=50 DEADLINE=555 \
#       scripts/gpu.sh bash bench/gpu_8m.sh ensemble     (then again to finish)
#   (2026-11-27: 4 x (10 + 50) cycles on 4 H100s in 11.5 min: README).
#   CONFIG and RUNDIR choose another config, EQ and SWEEPS its cycles: the
#   paper's 2^20 with brush, 4 x (40 + 300) cycles in one call:
#     T0=$(date +%s) METRO_GPU_NOBUILD=1 K=4 EQ=40 SWEEPS=300 DEADLINE=570 \
#       CONFIG=configs/electrolyte_3to1.ini RUNDIR=runs/electrolyte_3to1 \
#       scripts/gpu.sh bash bench/gpu_8m.sh ensemble
#   The second call must come within the machine's idle release (30 s):
#   the checkpoints live on that machine only.  A second call that came 4
#   min late (a helper's turn cut off in between) found a fresh machine
#   and ran the first 50 cycles again: issue both calls from one turn.
# - one chain in pieces, each ended by SIGTERM: metro finishes its chunk,
#   writes the checkpoint and stops, and `metro resume` continues
#   byte-exactly.  Between machines the run directory travels through the
#   device's limits (files of 16 MiB, 64 MiB a call each way) as numbered
#   pieces of 15 MiB of one xz'd tar (a checkpoint is 134 MB at 2^23):
#   bench/gpu_8m.sh run SECS      start or resume; SIGTERM after SECS seconds
#   bench/gpu_8m.sh pack K        pieces 4K .. 4K+3 of the run directory to $OUT
#   bench/gpu_8m.sh take          keep the pieces carried in .ck8m/ (one call's
#                                 share) in runs/ck8m/ on the machine
#   bench/gpu_8m.sh unpack        the run directory from runs/ck8m/*
# Here, between calls, the pieces live in .ck8m-all/ and a call carries its
# share in .ck8m/ (both in .gitignore).
set -uo pipefail
cd "$(dirname "$0")/.."
cfg=${CONFIG:-configs/electrolyte_3to1_8M.ini}
dir=${RUNDIR:-runs/electrolyte_3to1_8M}
out=${OUT:-/tmp}
mkdir -p runs
case "${1:-}" in
  run)
    secs=${2:?run SECS}
    rm -rf runs/ck8m.tar.xz runs/ck8m-out # pieces of an older checkpoint
    if [ -f "$dir/checkpoint.bin" ]; then
      cmd=(resume "$dir")
    else
      cmd=(run "$cfg" --output "$dir")
    fi
    # checkpoint_minutes does not define the chain: a short one only bounds
    # what a hard kill (the call's own limit) would lose
    bash scripts/gpu.sh timeout -s TERM "$secs" build-gpu/bin/metro "${cmd[@]}" --set run.checkpoint_minutes=4 \
      2>&1 | tr '\r' '\n' >>runs/run8m.log
    cp runs/run8m.log "$out/"
    tail -n 30 runs/run8m.log
    ls -l "$dir"
    ;;
  pack)
    k=${2:?pack K}
    if [ ! -f runs/ck8m.tar.xz ]; then
      tar -C "$(dirname "$dir")" -cf - --exclude=checkpoint.bin.prev --exclude=.lock "$(basename "$dir")" | xz -T0 -2 >runs/ck8m.tar.xz || exit 1
      rm -rf runs/ck8m-out && mkdir runs/ck8m-out && split -b 15M -d -a 2 runs/ck8m.tar.xz runs/ck8m-out/ck8m.
      (cd runs && sha256sum ck8m.tar.xz >ck8m-out/SHA256)
    fi
    ls -l runs/ck8m.tar.xz runs/ck8m-out
    cp runs/ck8m-out/SHA256 "$out/"
    for i in 0 1 2 3; do
      p=runs/ck8m-out/ck8m.$(printf %02d $((4 * k + i)))
      [ -f "$p" ] && cp "$p" "$out/"
    done
    ls -l "$out"
    ;;
  take)
    mkdir -p runs/ck8m && cp .ck8m/* runs/ck8m/ && ls -l runs/ck8m
    ;;
  unpack)
    [ -d "$dir" ] && { echo "$dir exists: not overwritten"; exit 1; }
    (cd runs/ck8m && cat ck8m.[0-9][0-9] >../ck8m.tar.xz) &&
      (cd runs && sha256sum -c ck8m/SHA256) &&
      xz -dc runs/ck8m.tar.xz | tar -C "$(dirname "$dir")" -xf - && rm -f runs/ck8m.tar.xz && ls -l "$dir"
    ;;
  ensemble)
    # The electrolyte as K independent systems (seeds 2 .. 2+K-1), one per
    # GPU of the host: an MPI build, rank k on GPU k (the core's rank % GPUs).
    # Stopped by one SIGTERM to each rank at DEADLINE seconds after T0 (the
    # call's start; not through mpirun, which kills its ranks seconds after
    # a TERM of its own), resumed by the next call; at the end the results,
    # without the checkpoints, go to $OUT as one tar.
    k=${K:-4} deadline=${DEADLINE:-560} t0=${T0:-$(date +%s)}
    edir=${dir}_x$k
    if [ ! -f build-gpu-mpi/bin/metro ]; then
      cmake -S . -B build-gpu-mpi -G Ninja -DCMAKE_BUILD_TYPE=Release -DMETRO_MPI=ON >"$out/mpi_cmake.log" 2>&1 &&
        cmake --build build-gpu-mpi -j --target metro_cli coulomb_hs hierarchical brush energy pair_correlation \
          >"$out/mpi_build.log" 2>&1 || { tail -30 "$out/mpi_cmake.log" "$out/mpi_build.log"; exit 1; }
    fi
    echo "built at $(($(date +%s) - t0)) s"
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    if [ -f "$edir/system_000/checkpoint.bin" ]; then
      cmd=(resume "$edir")
    else
      # EQ and SWEEPS, when given, override the config's cycles
      cmd=(run "$cfg" --output "$edir" --set run.systems=$k ${EQ:+--set run.equilibration=$EQ} ${SWEEPS:+--set run.sweeps=$SWEEPS})
    fi
    left=$((deadline - ($(date +%s) - t0)))
    # (its output not on the pipe below: a sleep left holding the pipe kept
    # a call waiting to its limit after the run had ended)
    (sleep "$left" && pkill -TERM -x metro) </dev/null >/dev/null 2>&1 &
    stopper=$!
    touch runs/ens8m.log
    seen=$(wc -l <runs/ens8m.log) # the log of every call; this call's part shown
    mpirun --oversubscribe -np "$k" build-gpu-mpi/bin/metro "${cmd[@]}" --set run.checkpoint_minutes=4 2>&1 |
      tr '\r' '\n' >>runs/ens8m.log
    kill "$stopper" 2>/dev/null
    tail -n +$((seen + 1)) runs/ens8m.log | tail -n 40
    cp runs/ens8m.log "$out/"
    tail -n 5 "$edir"/system_*/log.txt
    # the results appear at the run's end, all at once
    if [ -f "$edir/system_000/electrostatics.csv" ]; then
      tar -C runs --exclude='checkpoint.bin*' --exclude=.lock -czf "$out/ens8m_results.tar.gz" "$(basename "$edir")"
      ls -l "$out"
    fi
    ;;
  *)
    sed -n '2,22p' "$0"
    exit 2
    ;;
esac
