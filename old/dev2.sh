#!/usr/bin/env bash
# final code: GPU suites, extension == straight on CUDA, the small electrolyte's files
set -u
M=build-gpu/bin/metro
(cd build-gpu && timeout 330 ctest --output-on-failure -j 3 -L gpu) > /tmp/ctest_gpu.txt 2>&1
tail -18 /tmp/ctest_gpu.txt
w=/tmp/ext2; rm -rf $w; mkdir -p $w
ext() { # name config sampler-args...
  local n=$1 c=$2; shift 2
  $M run $c --device cuda --quiet --output $w/${n}_straight --set run.sweeps=$S "$@" > $w/$n.log 2>&1
  $M run $c --device cuda --quiet --output $w/${n}_split --set run.sweeps=$H "$@" >> $w/$n.log 2>&1
  $M resume $w/${n}_split --quiet --set run.sweeps=$S >> $w/$n.log 2>&1
  local diffs=0
  for f in $(cd $w/${n}_straight && ls *.csv); do cmp -s $w/${n}_straight/$f $w/${n}_split/$f || { diffs=$((diffs+1)); echo "  $n: $f differs"; }; done
  echo "$n: straight vs extended, $diffs csv files differ (of $(ls $w/${n}_straight/*.csv | wc -l))"
}
{
grep -E "tests passed|Total Test" /tmp/ctest_gpu.txt
S=40000; H=17000; ext pt13 configs/polymer13_pt.ini --set run.equilibration=2000
S=40; H=17; ext brush configs/electrolyte_3to1_small.ini --set run.equilibration=5 --set "observable pair_correlation.every=5"
S=12; H=5; ext hier configs/electrolyte_3to1_small.ini --set sampler.plugin=hierarchical --set run.equilibration=2 --set "observable pair_correlation.every=3"
/usr/bin/time -f "small: wall %e s" $M run configs/electrolyte_3to1_small.ini --device cuda --quiet --output $w/small \
  --set run.sweeps=6000 --set "observable pair_correlation.every=2" > $w/small.log 2>&1
tail -2 $w/small.log
} > $OUT/summary.txt 2>&1
cat $OUT/summary.txt
for f in g.csv rho_q.csv fits.csv pair_correlation.gp electrostatics.csv energy_stats.csv log.txt; do cp $w/small/$f $OUT/small_$f; done
