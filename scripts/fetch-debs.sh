#!/usr/bin/env bash
# Download (here, where Debian's registry is reachable) the packages the GPU
# machine lacks into .debs/ (git-ignored), to carry there: docs/DESIGN.md fact 8.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .debs && cd .debs
apt-get update -qq
apt-get download libinih1 libinih-dev check libsubunit0 libsubunit-dev pkgconf pkgconf-bin libpkgconf3 >/dev/null
ls
