# gnuplot docs/results/polyelectrolyte_rg2.gp (from docs/results/): r_gyr^2
# and counterion condensation of the charged 66-mer against the coupling
set datafile separator ","
set terminal pngcairo size 1000,760 font ",11"
set output "polyelectrolyte_rg2.png"
set multiplot layout 2,1
set logscale x
set xrange [0.18:11]
set key top left
set ylabel "r_{gyr}^2 / r_0^2"
set title "66-mer, charge -1 per monomer, in a cell of radius 40 r_0: swelling, then collapse"
neutral = 30.37; dn = 1.03
set object 1 rect from 0.18, neutral - dn to 11, neutral + dn fc rgb "#dddddd" fs solid noborder behind
plot "polyelectrolyte_rg2.csv" using 1:3:4 with yerrorlines pt 7 ps 0.6 lc rgb "#1f77b4" title "66 monovalent counterions", \
     "" using 1:9:10 with yerrorlines pt 5 ps 0.6 lc rgb "#d62728" title "22 trivalent counterions", \
     neutral with lines dt 2 lc rgb "black" title "neutral chain (band: +-1 error)"
unset object 1
set title ""
set xlabel "coupling ξ = λ_B / (T r_0)   (parallel tempering over T, λ_B = 2 r_0 at T = 1)"
set ylabel "counterions within 1.5 r_0 of the chain"
set yrange [0:1.02]
set key bottom right
plot "polyelectrolyte_rg2.csv" using 1:7:8 with yerrorlines pt 7 ps 0.6 lc rgb "#1f77b4" title "monovalent", \
     "" using 1:13:14 with yerrorlines pt 5 ps 0.6 lc rgb "#d62728" title "trivalent", \
     1 - 1/x with lines dt 3 lc rgb "#1f77b4" title "Manning, monovalent: 1 - 1/ξ", \
     1 - 1/(3*x) with lines dt 3 lc rgb "#d62728" title "Manning, trivalent: 1 - 1/(3ξ)"
unset multiplot
