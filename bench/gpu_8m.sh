#!/usr/bin/env bash
# The 2^23 electrolyte (configs/electrolyte_3to1_8M.ini) on a lent GPU
# machine, across calls and across machines.  Its ~220 cycles take about
# 42 minutes with reference = exact (11.5 s a cycle on the H100), more
# than one call (10 min), one machine (30 min held) or one session's
# device time, so the run goes in pieces, each ended by SIGTERM:
# metro finishes its chunk, writes the checkpoint and stops, and `metro
# resume` continues byte-exactly.  Between machines the run directory
# travels through the device's limits (files of 16 MiB, 64 MiB a call each
# way) as numbered pieces of 15 MiB of one xz'd tar:
#   bench/gpu_8m.sh run SECS      start or resume; SIGTERM after SECS seconds
#   bench/gpu_8m.sh pack K        pieces 4K .. 4K+3 of the run directory to $OUT
#   bench/gpu_8m.sh take          keep the pieces carried in .ck8m/ (one call's
#                                 share) in runs/ck8m/ on the machine
#   bench/gpu_8m.sh unpack        the run directory from runs/ck8m/*
# Here, between calls, the pieces live in .ck8m-all/ and a call carries its
# share in .ck8m/ (both ignored by .git/info/exclude).
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
  *)
    sed -n '2,18p' "$0"
    exit 2
    ;;
esac
