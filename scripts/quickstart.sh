#!/usr/bin/env bash
# Quick start on a fresh machine: install what is missing, build, and run
# configs/quickstart.ini (a 13-monomer chain; seconds on the CPU backend).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
scripts/build.sh
./build/bin/metro run configs/quickstart.ini --output runs/quickstart --overwrite
echo "results in runs/quickstart (config.ini, energy_stats.csv, log.txt ...)"
