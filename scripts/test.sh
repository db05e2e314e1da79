#!/usr/bin/env bash
# The whole test suite: install what is missing, build, run every Check
# suite under CTest.  GPU suites (label gpu) report "skipped: no CUDA
# device" where there is none.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
scripts/build.sh
cd "${METRO_BUILD:-build}"
ctest --output-on-failure -j "$(nproc)" "$@"
