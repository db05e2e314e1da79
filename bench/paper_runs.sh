#!/usr/bin/env bash
# The papers' physics runs on the GPU machine, each timed, results packed
# into $OUT/NAME.tgz (run directory without checkpoint.bin, which can be
# large).  Plots are drawn afterwards on any machine with gnuplot:
#   tar xzf NAME.tgz && cd NAME && gnuplot *.gp
#   bench/paper_runs.sh NAME CONFIG [--set ...]...
set -uo pipefail
cd "$(dirname "$0")/.."
name=$1 cfg=$2; shift 2
out=${OUT:-/tmp}
bin=${METRO_BIN:-build-gpu/bin/metro}
start=$(date +%s.%N)
$bin run "$cfg" --device cuda --output "/tmp/runs/$name" --overwrite --quiet "$@" > "/tmp/runs-$name.txt" 2>&1
rc=$?
end=$(date +%s.%N)
mkdir -p "/tmp/runs/$name"; cp "/tmp/runs-$name.txt" "/tmp/runs/$name/stdout.txt"
printf "%s: exit %d, wall %.1f s\n" "$name" $rc "$(awk "BEGIN{print $end - $start}")" | tee -a "/tmp/runs/$name/stdout.txt"
tail -3 "/tmp/runs-$name.txt"
tar czf "$out/$name.tgz" --exclude=checkpoint.bin -C /tmp/runs "$name"
