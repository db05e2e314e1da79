#!/usr/bin/env bash
# Install what metro needs and is missing, from Debian's packages.
# The CUDA toolkit (nvcc, cudart, cuRAND, nvJitLink) is expected at
# /usr/local/cuda or on PATH; no GPU or driver is needed to build and test.
set -euo pipefail
need=()
have_pc() { pkg-config --exists "$1" 2>/dev/null; }
command -v pkg-config >/dev/null || need+=(pkg-config)
command -v cmake >/dev/null || need+=(cmake)
command -v ninja >/dev/null || need+=(ninja-build)
command -v cc >/dev/null || need+=(gcc)
have_pc inih || need+=(libinih-dev)
have_pc check || need+=(check)
command -v gnuplot >/dev/null || need+=(gnuplot-nox)
# the trajectory tests read metro's GSD and extended-XYZ files back with the
# formats' own libraries (Debian's, importable by /usr/bin/python3)
have_py() { [ -x /usr/bin/python3 ] && /usr/bin/python3 -c "import $1" 2>/dev/null; }
have_py gsd.hoomd || need+=(python3-gsd)
have_py ase.io || need+=(python3-ase)
# OpenMPI for the optional MPI build (-DMETRO_MPI=ON), which the test
# command builds beside the plain one to run tests/test_mpi.c
command -v mpicc >/dev/null && command -v mpirun >/dev/null || need+=(openmpi-bin libopenmpi-dev)
if ((${#need[@]})); then
  echo "deps: installing ${need[*]}"
  SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
# clang with libFuzzer builds tests/fuzz (scripts/test.sh fuzzes the config
# reader with it).  Optional: where it cannot be installed (no registry, as
# on the GPU machine) the fuzzer is skipped, nothing else.
if ! command -v clang >/dev/null || ! ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1; then
  echo "deps: installing clang libclang-rt-dev (for the fuzzer)"
  SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
  { $SUDO apt-get update -qq &&
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends clang libclang-rt-dev >/dev/null; } ||
    echo "deps: clang could not be installed; the config fuzzer will be skipped" >&2
fi
if ! command -v nvcc >/dev/null; then
  if [ -x /usr/local/cuda/bin/nvcc ]; then
    echo "deps: add /usr/local/cuda/bin to PATH (the scripts do it for themselves)"
  else
    echo "deps: the CUDA toolkit (12.4 or newer, with nvJitLink and cuRAND) is required" >&2
    exit 1
  fi
fi
