#!/usr/bin/env bash
# bench/compose_emu/run.sh BUILD_DIR — a check without a GPU of the runs'
# second pass (issue 15, ABI 4): the generated composite functions and the
# terms' own .cu files, compiled for the host (shim.h), summed in runs of
# 32 with and without the second pass, against the per-pair sum.  Prints one line for each; exit 0 when
# the two-pass sums agree and the one-pass sums do not.
set -euo pipefail
B=$(cd "${1:-build}" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
w=$(mktemp -d)
trap 'rm -rf "$w"' EXIT
inc="-I$root/core/include -I$root/potentials/coulomb_hs -I$root/potentials/lj_fene"
gcc -std=gnu11 -I"$root/core/src" -I"$root/core/include" "$here/gen.c" -L"$B/lib" -lmetro -Wl,-rpath,"$B/lib" -o "$w/gen"
"$w/gen" > "$w/composed.cu"
# the terms' own device code and the generated source, for the host
for t in lj_fene coulomb_hs; do
  g++ -O1 -w -x c++ -include "$here/shim.h" -DMETRO_TERM_NAME=$t $inc -c "$root/potentials/$t/$t.cu" -o "$w/$t.o"
done
g++ -O1 -w -include "$here/shim.h" -I"$w" -c "$here/harness.cpp" -o "$w/harness.o"
g++ -O1 $inc "$here/main.cpp" "$w/lj_fene.o" "$w/coulomb_hs.o" "$w/harness.o" -o "$w/emu"
"$w/emu"
if "$w/emu" broken; then echo "the one-pass sums agree too: the check cannot fail" >&2; exit 1; fi
