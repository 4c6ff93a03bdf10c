# One figure of the paper (Fig. 9 or 10) in two panels; called by plot_figs.sh with term, out, fig, dist,
# am, x0, d (folder of per-algorithm CSVs: {x0,am}_{fa32,fa16,pasa}[_nan].csv) and metric:
#   "rmse"   RMSE (PASA Eq. 19), log y axis, with the RMSE of the uniform-weights output (every row the
#            mean of V: the output that ignores the scores) as a dashed line, and the H100's RMSE where
#            measured ({x0,am}_gpu_{fa32,fa16,pasa}.csv from results/hardware/hw_summary.csv: column 6,
#            rmse_gpu_mean) as open markers; the GPU's PASA is Alg. 1 as printed (configs/hardware/)
#   "skill"  skill score 1 − RMSE / RMSE(uniform weights): 1 exact, 0 no information from QKᵀ, < 0 worse
#            than ignoring the scores (linear y axis, clipped at −1)
eval "set terminal ".term
set output out
set datafile separator ","
set datafile missing "nan"
set key below horizontal maxcols 4 width -1
set bmargin 8
set grid ytics
# Columns of the figure CSVs (pasa-tables): 6 rmse_mean, 8/9 rmse_min/max, 12 rmse_uniform_baseline_mean,
# 13 skill_mean, 15/16 skill_min/max.
if (metric eq "rmse") {
  set logscale y; set format y "10^{%L}"; set ylabel "RMSE"
  # Points whose output holds NaN (in any seed) get a "NaN" text mark near the top, as in the paper; the
  # line then shows the mean over the seeds without NaN, if any.
  set yrange [*:3]; ym = 6; ylo = 8; yhi = 9; nan_y1 = 1.0; nan_y2 = 0.5; nan_y3 = 0.17
  what = "RMSE (Eq. 19)"
} else {
  unset logscale y; set format y "%g"; set ylabel "skill = 1 - RMSE / RMSE(uniform weights)"
  set yrange [-1:1.1]; set ytics 0.25; ym = 13; ylo = 15; yhi = 16; nan_y1 = -0.55; nan_y2 = -0.75; nan_y3 = -0.95
  what = "skill score against the uniform-weights output"
}
set multiplot layout 1,2 title sprintf("Fig. %s: %s, %s inputs, shape (1,16,1280,128); mean over seeds, bars min-max", fig, what, dist)
do for [panel in "x0 am"] {
  if (panel eq "x0") {
    set title sprintf("Am = %s, x0 varied", am); set xlabel "mean value x0"; unset logscale x; set offsets graph 0.04, graph 0.04, 0, 0; col = 2
  } else {
    set title sprintf("x0 = %s, Am varied", x0); set xlabel "amplitude Am"; set logscale x; set offsets graph 0.04, graph 0.04, 0, 0; col = 3
  }
  f(a) = sprintf("%s/%s_%s.csv", d, panel, a)
  g(a) = sprintf("%s/%s_%s_nan.csv", d, panel, a)
  h(a) = sprintf("%s/%s_gpu_%s.csv", d, panel, a)
  if (metric eq "rmse") {
    plot f("fa32") using col:ym:ylo:yhi with yerrorlines lw 2 pt 7 lc rgb "#1f77b4" title "FA-FP32", \
         f("fa16") using col:ym:ylo:yhi with yerrorlines lw 2 pt 5 lc rgb "#d62728" title "FA-FP16/FP32", \
         f("pasa") using col:ym:ylo:yhi with yerrorlines lw 2 pt 9 lc rgb "#2ca02c" title "PASA-FP16", \
         f("fa32") using col:12 with lines dt 2 lw 2 lc rgb "#555555" title "uniform weights (mean of V)", \
         h("fa32") using col:6 with points pt 6 ps 2.2 lw 2 lc rgb "#1f77b4" title "FA-FP32, H100", \
         h("fa16") using col:6 with points pt 4 ps 2.2 lw 2 lc rgb "#d62728" title "FA-FP16/FP32, H100", \
         h("pasa") using col:6 with points pt 8 ps 2.2 lw 2 lc rgb "#2ca02c" title "PASA-FP16 as printed, H100", \
         g("fa16") using col:(nan_y1):("NaN") with labels rotate by 90 tc rgb "#d62728" font ",11" notitle, \
         g("pasa") using col:(nan_y2):("NaN") with labels rotate by 90 tc rgb "#2ca02c" font ",11" notitle, \
         g("fa32") using col:(nan_y3):("NaN") with labels rotate by 90 tc rgb "#1f77b4" font ",11" notitle
  } else {
    plot f("fa32") using col:ym:ylo:yhi with yerrorlines lw 2 pt 7 lc rgb "#1f77b4" title "FA-FP32", \
         f("fa16") using col:ym:ylo:yhi with yerrorlines lw 2 pt 5 lc rgb "#d62728" title "FA-FP16/FP32", \
         f("pasa") using col:ym:ylo:yhi with yerrorlines lw 2 pt 9 lc rgb "#2ca02c" title "PASA-FP16", \
         0 with lines dt 2 lw 2 lc rgb "#555555" title "uniform weights (no attention)", \
         g("fa16") using col:(nan_y1):("NaN") with labels rotate by 90 tc rgb "#d62728" font ",11" notitle, \
         g("pasa") using col:(nan_y2):("NaN") with labels rotate by 90 tc rgb "#2ca02c" font ",11" notitle, \
         g("fa32") using col:(nan_y3):("NaN") with labels rotate by 90 tc rgb "#1f77b4" font ",11" notitle
  }
}
unset multiplot
