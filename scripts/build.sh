#!/usr/bin/env bash
# Configure and build metro into ${METRO_BUILD:-build} (Release).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/cuda/bin:$PATH"
b=${METRO_BUILD:-build}
gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
cache=$b/CMakeCache.txt
built=   # the build file of the last configure that got that far
for f in build.ninja Makefile; do [ -f "$b/$f" ] && built=$b/$f; done
# A cache with no build file is from a configure that failed (run before
# scripts/deps.sh, say): it was never good.  CMake keeps the generator it
# first chose, so if that is not the one chosen now (Ninja installed since)
# the cache is dropped; otherwise it is reused with whatever options it has.
if [ -f "$cache" ] && [ -z "$built" ] && ((${#gen[@]})) &&
   ! grep -qx 'CMAKE_GENERATOR:INTERNAL=Ninja' "$cache"; then
  rm -rf "$cache" "$b/CMakeFiles"
fi
# Configure when there is no cache, no build file, or a cache written after
# the build file (a later configure failed).  A good cache is never
# discarded, so options set with cmake -D survive.
if [ ! -f "$cache" ]; then
  cmake -S . -B "$b" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release >/dev/null
elif [ -z "$built" ] || [ "$cache" -nt "$built" ]; then
  cmake -S . -B "$b" >/dev/null
fi
cmake --build "$b" -j "$(nproc)"
