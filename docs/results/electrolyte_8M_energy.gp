# run in docs/results: gnuplot electrolyte_8M_energy.gp
set datafile separator ','
set terminal pngcairo size 900,600
set output 'electrolyte_8M_energy.png'
set grid
set xlabel 'cycle (sweep)'
set ylabel 'E / k_BT (10^6)'
set title '2^{23} ions, 4 systems from random placement: E relaxes until about cycle 32'
set key right top
f='electrolyte_8M_energy.csv'
plot for [k=2:5] f using 'sweep':(column(k)/1e6) with linespoints pt 7 ps 0.5 title sprintf('system %d', k-2), -2.464758 with lines dt 2 lc 'black' title 'mean over cycles 36-60'
