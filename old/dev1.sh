#!/usr/bin/env bash
# one device call: GPU suites, extension == straight on CUDA, the small electrolyte
set -u
M=build-gpu/bin/metro
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/gpu.txt
(cd build-gpu && timeout 330 ctest --output-on-failure -j 3 -L gpu) > $OUT/ctest_gpu.txt 2>&1
tail -25 $OUT/ctest_gpu.txt
w=/tmp/ext; rm -rf $w; mkdir -p $w
ext() { # name config sampler-args...
  local n=$1 c=$2; shift 2
  $M run $c --device cuda --quiet --output $w/${n}_straight --set run.sweeps=$S "$@" > $w/$n.log 2>&1
  $M run $c --device cuda --quiet --output $w/${n}_split --set run.sweeps=$H "$@" >> $w/$n.log 2>&1
  $M resume $w/${n}_split --quiet --set run.sweeps=$S >> $w/$n.log 2>&1
  local diffs=0
  for f in $(cd $w/${n}_straight && ls *.csv); do cmp -s $w/${n}_straight/$f $w/${n}_split/$f || { diffs=$((diffs+1)); echo "  $n: $f differs"; }; done
  echo "$n: straight vs extended, $diffs csv files differ (of $(ls $w/${n}_straight/*.csv | wc -l))"
  tail -2 $w/$n.log
}
{
S=40000; H=17000; ext pt13 configs/polymer13_pt.ini --set run.equilibration=2000
S=40; H=17; ext brush configs/electrolyte_3to1_small.ini --set run.equilibration=5 --set "observable pair_correlation.every=5"
S=12; H=5; ext hier configs/electrolyte_3to1_small.ini --set sampler.plugin=hierarchical --set run.equilibration=2 --set "observable pair_correlation.every=3"
} > $OUT/extend.txt 2>&1
cat $OUT/extend.txt
# the small electrolyte as README quotes it: 6000 cycles, g(r) every 2
/usr/bin/time -f "wall %e s" $M run configs/electrolyte_3to1_small.ini --device cuda --quiet --output $w/small \
  --set run.sweeps=6000 --set "observable pair_correlation.every=2" > $OUT/small.log 2>&1
tail -3 $OUT/small.log
cp $w/small/electrostatics.csv $OUT/small_electrostatics.csv
cp $w/small/rho_q.csv $OUT/small_rho_q.csv
cp $w/small/energy_stats.csv $OUT/small_energy_stats.csv
tar czf $OUT/small_run.tgz -C $w small --exclude='checkpoint*' --exclude='*.gsd'
ls -la $w/small | head -30
