#!/usr/bin/env bash
# GPU batch for issue 13 (the hierarchical sampler on CUDA), through
# scripts/gpu.sh (logs in one archive under $OUT):
#   scripts/gpu.sh bash bench/gpu_hier.sh tests   test_hierarchical_gpu and
#       compute-sanitizer (memcheck, racecheck) on the new kernels
#   scripts/gpu.sh bash bench/gpu_hier.sh sanitize  compute-sanitizer
#       memcheck and racecheck over a run of the new kernels
#   scripts/gpu.sh bash bench/gpu_hier.sh time N...  logs of both samplers
#   scripts/gpu.sh bash bench/gpu_hier.sh profile N...  the hierarchical
#       sampler's phases per run (METRO_HIER_PROFILE=1: CUDA events)
#   scripts/gpu.sh bash bench/gpu_hier.sh startup N...  start-up of the
#       hierarchical sampler: placement, the tree's build, the initial
#       energy from the tree (energy = tree) and, for N <= DIRECT_MAX
#       (default 2^22), from the core's direct sum (energy = direct)
#   scripts/gpu.sh bash bench/gpu_hier.sh table N...  the issue's table
#       (also table.md in the logs' archive):
#       seconds per cycle of brush and of hierarchical with reference =
#       float and reference = exact, in the same run (the samplers' own
#       sampling time, "done: ... (sampling T s: ...", over SWEEPS cycles,
#       default 2, without the closing energy check, checkpoint and results;
#       brush takes BRUSH_SWEEPS, default 1, above 2^20; NO_BRUSH=1 skips
#       it), the fraction of moves the enclosure alone decided, the exact
#       passes and the host's stops of each, the ratios
#       (2^16 ... 2^23 take ~320 s on an H100, brush's 2^23 run ~150 s
#       of it: with a device call's 600 s limit, a call of their own)
#   scripts/gpu.sh bash bench/gpu_hier.sh refined N...  where the refined
#       look's time goes (reference = exact, order 8, METRO_HIER_PROFILE=1):
#       in order and overlapping, each with its default teams and with
#       METRO_HIER_REFINE_SLOTS=S (default 50: smaller teams) and =100000
#       (one team of 16 a point, in waves): seconds per cycle (SWEEPS,
#       default 2), refined trials and µs a batch of the refined look and
#       of the first look
#   scripts/gpu.sh bash bench/gpu_hier.sh numbering N...  reference = exact
#       from the same placement numbered as placed and along a Z-order
#       curve ([system] numbering = space): seconds per cycle (SWEEPS,
#       default 2), the enclosure's share, the exact passes, and the phases
#       (METRO_HIER_PROFILE=1, CUDA events)
set -uo pipefail
out=${OUT:-/tmp}
# The logs go into one archive, $out/gpu_hier_<mode>.tar.gz: the device
# machine returns at most 8 files a call, and a table's run leaves 20 and
# more (one table's logs were lost so), the table itself as table.md
mode=${1:-tests}
logs=$(mktemp -d)
trap 'tar czf "$out/gpu_hier_$mode.tar.gz" -C "$logs" . && rm -rf "$logs"' EXIT
export METRO_CACHE_DIR=/tmp/metro-cache
. "$(dirname "$0")/electrolyte.sh" # ini N SAMPLER SWEEPS EXTRA
# seconds a sweep from a run's log: the core's sampling time (the sweeps
# alone, not the closing energy check, checkpoint and results, which take
# seconds at 2^23), over SWEEPS
sampling() { grep -osE 'sampling [0-9.e+-]+ s' "$1" | awk -v s=$2 '{print $2/s}'; }
# the count after WHAT (moves, enclosure, refined look, exact, reference)
# in the sampler's summary line of a run's log: count LOG WHAT
count() { grep -sE 'hierarchical: [0-9]+ cycles' "$1" | sed -E "s/.*$2 ([0-9]+).*/\\1/"; }
# refined trials a batch, the refined look's and the first look's µs a
# batch: from the last profile line of a run's output ($1) and its log ($2)
refined_row() {
  local nb=$(count "$2" moves) rt=$(count "$2" "refined look")
  local pr=$(grep -ohE 'profile so far: [0-9.e+-]+ s walks, [0-9.e+-]+ s rules, [0-9.e+-]+ s refined' "$1" | tail -1)
  echo "${pr:-none}" | awk -v m=${nb:-0} -v r=${rt:-0} -v b=${BATCH:-1024} '{nb = m / b;
    if (nb > 0 && NF >= 10) printf "%.1f | %.0f | %.0f", r / nb, $10 / nb * 1e6, $4 / nb * 1e6; else printf "nan | nan | nan"}'
}
case "$mode" in
tests)
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  timeout ${TEST_TIMEOUT:-420} build-gpu/bin/test_hierarchical_gpu > $logs/test_hier_gpu.txt 2>&1
  echo "test_hierarchical_gpu rc=$?"
  grep -vE "^\s*$" $logs/test_hier_gpu.txt | tail -30
  ;;
sanitize)
  # both references; the second run coarse (order 1, no refined look), so
  # the chain's exact passes in double and the stops run too
  for ref in float exact; do
    extra="batch = 256
energy = tree
reference = $ref"
    [ $ref = exact ] && extra="$extra
order = 1
order_refine = 1
theta = 0.8
refine = 0"
    ini 4096 hierarchical 2 "$extra" > /tmp/san.ini
    for tool in memcheck racecheck; do
      # (order 1: the running energy drifts past the default check)
      timeout 250 compute-sanitizer --tool $tool --error-exitcode 9 build-gpu/bin/metro run /tmp/san.ini --set run.drift_tolerance=1 \
        --output /tmp/san_$tool --overwrite --quiet > $logs/san_${ref}_$tool.txt 2>&1
      echo "$ref $tool: rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $logs/san_${ref}_$tool.txt)"
    done
  done
  ;;
time)
  shift
  for n in "$@"; do
    for s in hierarchical brush; do
      ini $n $s ${SWEEPS:-2} "${EXTRA:-}" > /tmp/t_$s.ini
      /usr/bin/time -f "  wall %e s" timeout 500 build-gpu/bin/metro run /tmp/t_$s.ini --output /tmp/t_$s --overwrite --quiet 2>&1 | tail -2
      echo "N=$n $s: $(grep -E 'hierarchical: [0-9]+ cycles|brush: [0-9]+ cycles|done' /tmp/t_$s/log.txt | tr '\n' ' ')"
    done
  done
  ;;
profile)
  shift
  for n in "$@"; do
    ini $n hierarchical ${SWEEPS:-2} "${EXTRA:-}" > /tmp/t_p.ini
    METRO_HIER_PROFILE=1 timeout 500 build-gpu/bin/metro run /tmp/t_p.ini --output /tmp/t_p --overwrite > $logs/profile_$n.txt 2>&1
    echo "N=$n: $(grep -E 'profile so far|hierarchical: [0-9]+ cycles|done:' $logs/profile_$n.txt | tail -3 | tr '\n' ' ')"
  done
  ;;
startup)
  shift
  echo "| N | energy | placed, s | initial energy, s | tree built, s | end check, s | whole run (wall), s | E at start |"
  echo "|---|---|---|---|---|---|---|---|"
  for n in "$@"; do
    for how in tree direct; do
      [ $how = direct ] && [ $n -gt ${DIRECT_MAX:-4194304} ] && continue
      # one move: the run is its start-up, the tree's build and two sums
      ini $n hierarchical 1 "trials = 1
energy = $how" > /tmp/t_s.ini
      rm -rf /tmp/t_s
      t0=$(date +%s.%N)
      timeout 560 build-gpu/bin/metro run /tmp/t_s.ini --output /tmp/t_s --overwrite --quiet > $logs/startup_${how}_$n.txt 2>&1
      w=$(awk -v a=$t0 -v b=$(date +%s.%N) 'BEGIN{printf "%.1f", b-a}')
      cp /tmp/t_s/log.txt $logs/log_startup_${how}_$n.txt 2>/dev/null
      pl=$(grep -oE 'placed [0-9]+ particles in [0-9.]+ s' /tmp/t_s/log.txt | awk '{print $5}')
      ie=$(grep -oE 'initial energies in [0-9.]+ s' /tmp/t_s/log.txt | awk '{print $4}')
      tb=$(grep -oE '[0-9.e+-]+ s building the tree' /tmp/t_s/log.txt | awk '{print $1}')
      ec=$(grep -oE 'from the tree in [0-9.e+-]+ s' /tmp/t_s/log.txt | tail -1 | awk '{print $5}')
      [ $how = direct ] && ec="(direct)"
      e0=$(grep -oE 'replica 0: E = [0-9.e+-]+' /tmp/t_s/log.txt | awk '{print $5}')
      echo "| $n | $how | $pl | $ie | $tb | $ec | $w | ${e0:-} |"
    done
  done
  ;;
refined)
  shift
  echo "| N | batches | METRO_HIER_REFINE_SLOTS | sampling s/cycle | refined trials a batch | refined look µs a batch | first look µs a batch |"
  echo "|---|---|---|---|---|---|---|"
  for n in "$@"; do
    for ov in 0 1; do
      for slots in default ${SLOTS:-50} 100000; do
        ini $n hierarchical ${SWEEPS:-2} "reference = exact
order = 8
${EXTRA:-}" > /tmp/t_r.ini
        rm -rf /tmp/t_r
        tag=${ov}_${slots}_$n
        envs=(METRO_HIER_OVERLAP=$ov METRO_HIER_PROFILE=1)
        [ $slots = default ] || envs+=(METRO_HIER_REFINE_SLOTS=$slots)
        env "${envs[@]}" timeout 300 build-gpu/bin/metro run /tmp/t_r.ini --output /tmp/t_r --overwrite > $logs/refined_$tag.txt 2>&1
        cp /tmp/t_r/log.txt $logs/log_refined_$tag.txt 2>/dev/null
        t=$(sampling /tmp/t_r/log.txt ${SWEEPS:-2})
        echo "| $n | $([ $ov = 1 ] && echo overlapping || echo "in order") | $slots | ${t:-nan} | $(refined_row $logs/refined_$tag.txt /tmp/t_r/log.txt) |"
      done
    done
  done
  ;;
numbering)
  shift
  echo "| N | numbering | s/cycle | enclosure | exact passes | phases (profile so far) |"
  echo "|---|---|---|---|---|---|"
  for n in "$@"; do
    for num in placed space; do
      SYSTEM="numbering = $num" ini $n hierarchical ${SWEEPS:-2} "reference = exact
${EXTRA:-}" > /tmp/t_n.ini
      rm -rf /tmp/t_n
      METRO_HIER_PROFILE=1 timeout 560 build-gpu/bin/metro run /tmp/t_n.ini --output /tmp/t_n --overwrite > $logs/numbering_${num}_$n.txt 2>&1
      cp /tmp/t_n/log.txt $logs/log_numbering_${num}_$n.txt 2>/dev/null
      t=$(sampling /tmp/t_n/log.txt ${SWEEPS:-2})
      mv=$(count /tmp/t_n/log.txt moves) en=$(count /tmp/t_n/log.txt enclosure) ex=$(count /tmp/t_n/log.txt exact)
      ph=$(grep -ohE 'profile so far: .*' $logs/numbering_${num}_$n.txt | tail -1)
      echo "| $n | $num | ${t:-nan} | $(awk -v a=$en -v b=$mv 'BEGIN{printf "%.5f", a/b}') | $ex | $ph |"
    done
  done
  ;;
table)
  shift
  say() { echo "$*" | tee -a "$logs/table.md"; }
  say "| N | brush s/cycle | float s/cycle | exact s/cycle | brush / exact | float / exact | enclosure (float, exact) | exact passes (float, exact) | reference (float, exact) |"
  say "|---|---|---|---|---|---|---|---|---|"
  for n in "$@"; do
    sw=${SWEEPS:-2}; bsw=$sw; [ $n -gt 1048576 ] && bsw=${BRUSH_SWEEPS:-1}
    tb=nan
    if [ "${NO_BRUSH:-0}" != 1 ]; then
      ini $n brush $bsw "" > /tmp/t_b.ini
      rm -rf /tmp/t_b
      timeout 560 build-gpu/bin/metro run /tmp/t_b.ini --output /tmp/t_b --overwrite --quiet > /dev/null 2>&1
      cp /tmp/t_b/log.txt $logs/log_b_$n.txt 2>/dev/null
      tb=$(sampling /tmp/t_b/log.txt $bsw)
      [ -n "$tb" ] || tb=nan
    fi
    row=""
    for ref in float exact; do
      ini $n hierarchical $sw "reference = $ref
${EXTRA:-}" > /tmp/t_h.ini
      rm -rf /tmp/t_h
      timeout 560 build-gpu/bin/metro run /tmp/t_h.ini --output /tmp/t_h --overwrite --quiet > $logs/run_${ref}_$n.txt 2>&1
      cp /tmp/t_h/log.txt $logs/log_${ref}_$n.txt 2>/dev/null
      t=$(sampling /tmp/t_h/log.txt $sw)
      mv=$(count /tmp/t_h/log.txt moves) en=$(count /tmp/t_h/log.txt enclosure)
      eval "t_$ref=\${t:-nan} en_$ref=$(awk -v a=$en -v b=$mv 'BEGIN{printf "%.5f", a/b}')"
      eval "ex_$ref=$(count /tmp/t_h/log.txt exact) rf_$ref=$(count /tmp/t_h/log.txt reference)"
    done
    r() { awk -v a=$1 -v b=$2 'BEGIN{printf "%.2f", a/b}'; }
    say "| $n | $tb | $t_float | $t_exact | $(r $tb $t_exact) | $(r $t_float $t_exact) | $en_float, $en_exact | $ex_float, $ex_exact | $rf_float, $rf_exact |"
  done
  ;;
esac
