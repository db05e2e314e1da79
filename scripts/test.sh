#!/usr/bin/env bash
# The whole test suite: install what is missing, build, run every Check
# suite under CTest.  GPU suites (label gpu) report "skipped: no CUDA
# device" where there is none.
#
# Then, unless METRO_SANITIZE=0 (a quick local run; CI always runs it):
#  1. the same suites built with AddressSanitizer + UndefinedBehaviorSanitizer
#     in ${METRO_ASAN_BUILD:-build-asan} (plugins too: CMAKE_C_FLAGS reaches
#     every C target, MODULE libraries included);
#  2. the config fuzzer (tests/fuzz/) for METRO_FUZZ_SECONDS (default 60)
#     when clang with libFuzzer is present.
# Any failure, sanitizer report or fuzzer crash fails the command.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
scripts/deps.sh
scripts/build.sh
(cd "${METRO_BUILD:-build}" && ctest --output-on-failure -j "$(nproc)" "$@")

# The MPI build (-DMETRO_MPI=ON) in ${METRO_MPI_BUILD:-build-mpi}, and the
# runs over 1, 2 and 4 ranks (mpirun --oversubscribe) that must write what
# one process writes.  Skipped, with a note, where OpenMPI is missing.
if command -v mpicc >/dev/null && command -v mpirun >/dev/null; then
  mpib=${METRO_MPI_BUILD:-build-mpi}
  gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
  [ -f "$mpib/build.ninja" ] || [ -f "$mpib/Makefile" ] || { rm -rf "$mpib"; PATH="/usr/local/cuda/bin:$PATH" \
    cmake -S . -B "$mpib" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DMETRO_MPI=ON -DMETRO_FUZZ=OFF >/dev/null; }
  PATH="/usr/local/cuda/bin:$PATH" cmake --build "$mpib" -j "$(nproc)" >/dev/null
  # mpirun refuses root unless told (CI runs as root)
  (cd "$mpib" && OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ctest --output-on-failure -L mpi)
else
  echo "test: no OpenMPI (mpicc, mpirun): the MPI tests are skipped"
fi

[ "${METRO_SANITIZE:-1}" = 0 ] && { echo "test: sanitizer pass skipped (METRO_SANITIZE=0)"; exit 0; }

export PATH="/usr/local/cuda/bin:$PATH"
asan=${METRO_ASAN_BUILD:-build-asan}
san="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
t0=$SECONDS
# -O2 -g without NDEBUG: asserts stay on, tests stay fast enough.
# (configured once; a configure that failed left no build file and is redone)
[ -f "$asan/build.ninja" ] || [ -f "$asan/Makefile" ] || { rm -rf "$asan"; cmake -S . -B "$asan" "${gen[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_FLAGS="$san" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O2 -g" \
  -DCMAKE_EXE_LINKER_FLAGS="$san" -DCMAKE_SHARED_LINKER_FLAGS="$san" \
  -DCMAKE_MODULE_LINKER_FLAGS="$san" -DMETRO_FUZZ=OFF >/dev/null; }
cmake --build "$asan" -j "$(nproc)"
# A sanitizer report must fail the test: UBSan stops at its first finding,
# ASan at every error, and LeakSanitizer is on in full.  No leak is
# suppressed: measured on the driverless CI machine, the CUDA runtime
# (cudaGetDeviceCount failing), cuRAND's host generators and nvJitLink leave
# nothing LeakSanitizer reports, so a suppressions file would only hide
# metro's own leaks.  Check forks each test (CK_FORK), and LeakSanitizer
# runs when each child exits: a test that leaks or trips a sanitizer exits
# non-zero and Check reports it as failed ("Early exit with return value").
# protect_shadow_gap=0 lets the CUDA driver map its memory on a machine that
# has one.
export ASAN_OPTIONS="detect_leaks=1:protect_shadow_gap=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
(cd "$asan" && ctest --output-on-failure -j "$(nproc)" "$@")
echo "test: sanitizer pass took $((SECONDS - t0)) s"

# Timed fuzzing of the config reader (built in the plain tree, where CTest
# has already run every seed once).  New inputs go to a corpus in the build
# tree, never into the seeds; a crash leaves its input in fuzz-artifacts/
# and fails the command.
fuzz="${METRO_BUILD:-build}/bin/fuzz_config"
if [ -x "$fuzz" ]; then
  b=${METRO_BUILD:-build}
  mkdir -p "$b/fuzz-corpus" "$b/fuzz-artifacts"
  case $b in /*) plugins=$b/lib/metro/plugins ;; *) plugins=$root/$b/lib/metro/plugins ;; esac
  METRO_PLUGIN_PATH="$plugins" "$fuzz" -max_total_time="${METRO_FUZZ_SECONDS:-60}" \
    -max_len=8192 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -dict=tests/fuzz/config.dict -artifact_prefix="$b/fuzz-artifacts/" \
    "$b/fuzz-corpus" tests/fuzz/corpus 2>"$b/fuzz.log" || { tail -n 60 "$b/fuzz.log"; echo "test: fuzz_config failed (input in $b/fuzz-artifacts/)" >&2; exit 1; }
  grep -a -E '^stat::number_of_executed_units|^Done' "$b/fuzz.log" || true
else
  echo "test: no clang with libFuzzer, fuzz_config skipped"
fi
