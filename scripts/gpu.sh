#!/usr/bin/env bash
# On the GPU machine (no package registry): unpack the carried .debs into
# /opt/debs (never into /), build into build-gpu, and run what is asked:
#   scripts/gpu.sh test            every suite, GPU ones included
#   scripts/gpu.sh CMD ARGS...     any command, with the environment set
# Logs go to $OUT when it is set.
set -uo pipefail
cd "$(dirname "$0")/.."
if [ ! -d /opt/debs/usr ]; then
  for f in .debs/*.deb; do dpkg -x "$f" /opt/debs; done
fi
export PATH=/opt/debs/usr/bin:/usr/local/cuda/bin:$PATH
export PKG_CONFIG_PATH=/opt/debs/usr/lib/x86_64-linux-gnu/pkgconfig
export PKG_CONFIG_SYSROOT_DIR=/opt/debs
export LD_LIBRARY_PATH=/opt/debs/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export METRO_BUILD=build-gpu
out=${OUT:-/tmp}
if [ ! -f build-gpu/CMakeCache.txt ]; then
  cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release >"$out/cmake.log" 2>&1 || { tail -40 "$out/cmake.log"; exit 1; }
fi
cmake --build build-gpu -j "$(nproc)" >"$out/build.log" 2>&1 || { grep -E "error|FAILED" -A5 "$out/build.log" | head -60; exit 1; }
case "${1:-test}" in
  test) shift || true; (cd build-gpu && ctest --output-on-failure -j 4 "$@") 2>&1 | tee "$out/ctest.log" ;;
  *) "$@" ;;
esac
