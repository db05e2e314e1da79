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

[ "${METRO_SANITIZE:-1}" = 0 ] && { echo "test: sanitizer pass skipped (METRO_SANITIZE=0)"; exit 0; }

export PATH="/usr/local/cuda/bin:$PATH"
asan=${METRO_ASAN_BUILD:-build-asan}
san="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
t0=$SECONDS
# -O2 -g without NDEBUG: asserts stay on, tests stay fast enough.
[ -f "$asan/CMakeCache.txt" ] || cmake -S . -B "$asan" "${gen[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_FLAGS="$san" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O2 -g" \
  -DCMAKE_EXE_LINKER_FLAGS="$san" -DCMAKE_SHARED_LINKER_FLAGS="$san" \
  -DCMAKE_MODULE_LINKER_FLAGS="$san" -DMETRO_FUZZ=OFF >/dev/null
cmake --build "$asan" -j "$(nproc)"
# A sanitizer report must fail the test: UBSan aborts on the first finding,
# ASan on every error; LeakSanitizer stays on, with only the CUDA runtime's
# own never-freed start-up allocations suppressed (scripts/lsan.supp says
# why).  Check forks each test, so a child that leaks or trips a sanitizer
# exits non-zero and Check reports that test as failed.
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:protect_shadow_gap=0:detect_odr_violation=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
export LSAN_OPTIONS="suppressions=$root/scripts/lsan.supp:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
(cd "$asan" && ctest --output-on-failure -j "$(nproc)" "$@")
echo "test: sanitizer pass took $((SECONDS - t0)) s"
