# One figure of the paper (Fig. 9 or 10) in two panels; called by plot_figs.sh with term, out, fig, dist,
# am, x0 and d (folder of per-algorithm CSVs: {x0,am}_{fa32,fa16,pasa}[_nan].csv).
eval "set terminal ".term
set output out
set datafile separator ","
set datafile missing "nan"
set key below horizontal
set bmargin 5
set logscale y
set format y "10^{%L}"
set grid ytics
# Points whose output holds NaN (in any seed) get a "NaN" text mark near the top, as in the paper; the
# line then shows the mean over the seeds without NaN, if any.
set yrange [*:3]
set multiplot layout 1,2 title sprintf("Fig. %s: RMSE (Eq. 19), %s inputs, shape (1,16,1280,128); mean over seeds, bars min-max", fig, dist)
do for [panel in "x0 am"] {
  if (panel eq "x0") {
    set title sprintf("Am = %s, x0 varied", am); set xlabel "mean value x0"; unset logscale x; set offsets graph 0.04, graph 0.04, 0, 0; col = 2
  } else {
    set title sprintf("x0 = %s, Am varied", x0); set xlabel "amplitude Am"; set logscale x; set offsets graph 0.04, graph 0.04, 0, 0; col = 3
  }
  set ylabel "RMSE"
  f(a) = sprintf("%s/%s_%s.csv", d, panel, a)
  g(a) = sprintf("%s/%s_%s_nan.csv", d, panel, a)
  plot f("fa32") using col:6:8:9 with yerrorlines lw 2 pt 7 lc rgb "#1f77b4" title "FA-FP32", \
       f("fa16") using col:6:8:9 with yerrorlines lw 2 pt 5 lc rgb "#d62728" title "FA-FP16/FP32", \
       f("pasa") using col:6:8:9 with yerrorlines lw 2 pt 9 lc rgb "#2ca02c" title "PASA-FP16", \
       g("fa16") using col:(1.0):("NaN") with labels rotate by 90 tc rgb "#d62728" font ",11" notitle, \
       g("pasa") using col:(0.5):("NaN") with labels rotate by 90 tc rgb "#2ca02c" font ",11" notitle, \
       g("fa32") using col:(0.17):("NaN") with labels rotate by 90 tc rgb "#1f77b4" font ",11" notitle
}
unset multiplot
