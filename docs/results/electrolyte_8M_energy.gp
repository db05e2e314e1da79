# run in docs/results: gnuplot electrolyte_8M_energy.gp
# cycles 11-40 from the first run (10 equilibration cycles); 41-90 are the
# production of the second (40), whose cycles 41-60 were identical to the
# first's, bit for bit: the same seeds give the same chain
set datafile separator ','
set terminal pngcairo size 900,600
set output 'electrolyte_8M_energy.png'
set grid
set xlabel 'cycle (sweep)'
set ylabel 'E / k_BT (10^6)'
set title '2^{23} ions, 4 systems from random placement: E relaxes until about cycle 32; production 41-90'
set key right top
set arrow from 40.5, graph 0 to 40.5, graph 1 nohead dt 3 lc 'gray'
f='electrolyte_8M_energy.csv'
plot for [k=2:5] f using 'sweep':(column(k)/1e6) with linespoints pt 7 ps 0.5 title sprintf('system %d', k-2), -2.4647236 with lines dt 2 lc 'black' title 'mean over the production, cycles 41-90'
