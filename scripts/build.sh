#!/usr/bin/env bash
# Configure and build metro into ${METRO_BUILD:-build} (Release).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/cuda/bin:$PATH"
b=${METRO_BUILD:-build}
gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
[ -f "$b/CMakeCache.txt" ] || cmake -S . -B "$b" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$b" -j "$(nproc)"
