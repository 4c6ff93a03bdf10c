# Range reduction by PASA's shift per head (the paper's Fig. 5 and Figs. 11-14, from the toolkit's inputs):
# usage: gnuplot -e "dir='results'" experiments/plot_ranges.gp   (reads DIR/ranges.csv, writes DIR/ranges.png)
# Left: K (red) and K' = M·K (blue) per head; right: S/α (red) and S' (blue), symmetric-log scale; one
# group of heads per Table 4 point (row number on the axis), the overflow count of S in the key.
if (!exists("dir")) dir = 'results'
set datafile separator ','
set terminal pngcairo size 1400,520 font ',10'
set output dir.'/ranges.png'
set multiplot layout 1,2
set key top left
set grid ytics
set xlabel 'Table 4 row . head'
# x position: row + head/(heads+2); columns: no 1, head 6, k_min 7, k_max 8, kp_min 9, kp_max 10,
# s_min 11, s_max 12, sp_min 13, sp_max 14
x(r, h) = r + h / 20.0
set title 'keys: K and K'' (range per head)'
plot dir.'/ranges.csv' every ::1 using (x($1,$6)-0.01):(($7+$8)/2):7:8 with yerrorbars lc rgb '#c0392b' pt 0 title 'K', \
     '' every ::1 using (x($1,$6)+0.01):(($9+$10)/2):9:10 with yerrorbars lc rgb '#2e86c1' pt 0 title 'K'''
slog(v) = v >= 0 ? log10(1 + v) : -log10(1 - v)
set title 'scores: S/α and S'' (range per head, sign·log10(1 + |x|))'
set ylabel 'sign · log10(1 + |score|)'
alpha = sqrt(128)
plot dir.'/ranges.csv' every ::1 using (x($1,$6)-0.01):(slog(($11+$12)/2/alpha)):(slog($11/alpha)):(slog($12/alpha)) with yerrorbars lc rgb '#c0392b' pt 0 title 'S/α', \
     '' every ::1 using (x($1,$6)+0.01):(slog(($13+$14)/2)):(slog($13)):(slog($14)) with yerrorbars lc rgb '#2e86c1' pt 0 title 'S'''
unset multiplot
