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
if ((${#need[@]})); then
  echo "deps: installing ${need[*]}"
  SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
if ! command -v nvcc >/dev/null; then
  if [ -x /usr/local/cuda/bin/nvcc ]; then
    echo "deps: add /usr/local/cuda/bin to PATH (the scripts do it for themselves)"
  else
    echo "deps: the CUDA toolkit (12.4 or newer, with nvJitLink and cuRAND) is required" >&2
    exit 1
  fi
fi
