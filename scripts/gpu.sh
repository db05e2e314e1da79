#!/usr/bin/env bash
# On the GPU machine (no package registry): unpack the carried .debs into
# /opt/debs (never into /), build into build-gpu, and run what is asked:
#   scripts/gpu.sh test            every suite, GPU ones included
#   scripts/gpu.sh CMD ARGS...     any command, with the environment set
#   METRO_GPU_NOBUILD=1 scripts/gpu.sh CMD ARGS...   the same without building build-gpu
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
# METRO_GPU_NOBUILD=1: only the environment (a command that builds what it
# needs itself, as bench/gpu_8m.sh ensemble does)
if [ "${METRO_GPU_NOBUILD:-0}" = 1 ]; then
  "$@"
  exit
fi
if [ ! -f build-gpu/CMakeCache.txt ]; then
  cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release >"$out/cmake.log" 2>&1 || { tail -40 "$out/cmake.log"; exit 1; }
fi
# A warm device machine keeps build-gpu between calls, but each call copies
# the tree with its own modification times: a source edited here before an
# earlier call's build looks older than that build's objects, and ninja
# would keep the stale ones (seen: a test "passed" on a library built from
# a deliberately broken file).  So sources whose content changed since the
# last build are touched first.
# (the device's copy has no .git: every file outside the build folders)
sources() {
  find . \( -path ./.git -o -path ./.debs -o -path ./old -o -path './build*' -o -path ./runs \) -prune -o -type f -print0 |
    xargs -0 sha1sum | sort
}
sources >build-gpu/.sources.now
if [ -f build-gpu/.sources.built ]; then
  comm -13 build-gpu/.sources.built build-gpu/.sources.now | cut -c43- | while IFS= read -r f; do
    [ -f "$f" ] && touch "$f"
  done
fi
cmake --build build-gpu -j "$(nproc)" >"$out/build.log" 2>&1 || { grep -E "error|FAILED" -A5 "$out/build.log" | head -60; exit 1; }
[ -f build-gpu/.sources.now ] && mv build-gpu/.sources.now build-gpu/.sources.built
case "${1:-test}" in
  test) shift || true; (cd build-gpu && ctest --output-on-failure -j 4 "$@") 2>&1 | tee "$out/ctest.log" ;;
  *) "$@" ;;
esac
rc=$?
# A command may edit sources and rebuild (a benchmark of two variants, a
# test broken on purpose): record what it left, so that the next call's
# copy, which differs from it, is touched and rebuilt rather than kept
# behind the edited build's newer objects (seen: a build broken on purpose
# in one call ran as the real one in the next).
sources >build-gpu/.sources.built
exit $rc
