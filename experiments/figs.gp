# One figure of the paper (Fig. 9 or 10) in two panels; called by plot_figs.sh with seeds (their number), term, out, fig, dist,
# am, x0, d (folder of per-algorithm CSVs: {x0,am}_{fa32,fa16,pasa}[_nan].csv, {x0,am}_ratio_{fa32,fa16}.csv)
# and metric. Each algorithm: its mean over the seeds (line), the 95 % confidence interval of that mean
# (shaded band: mean ± t·sd/√n) and the seeds' min–max (bars). Metric:
#   "rmse"   RMSE (PASA Eq. 19), log y axis, with the RMSE of the uniform-weights output (every row the
#            mean of V: the output that ignores the scores) as a dashed line, and the H100's RMSE where
#            measured ({x0,am}_gpu_{fa32,fa16,pasa}.csv from results/hardware/hw_summary.csv: column 6,
#            rmse_gpu_mean) as open markers; the GPU's PASA is Alg. 1 as printed (configs/hardware/)
#   "skill"  skill score 1 − RMSE / RMSE(uniform weights): 1 exact, 0 no information from QKᵀ, < 0 worse
#            than ignoring the scores (linear y axis, clipped at −1)
# With "rmse" a second row: PASA-FP16's RMSE over FA-FP16/FP32's and over FA-FP32's, paired by seed
# (geometric mean of the per-seed ratios, bars its 95 % interval; below 1: PASA's error is lower).
eval "set terminal ".term
set output out
set datafile separator ","
set datafile missing "nan"
set key below horizontal maxcols 4 width -1
set bmargin 8
set grid ytics
# Columns of the figure CSVs (pasa-tables): 5 seeds, 6 rmse_mean, 8/9 rmse_min/max, 12
# rmse_uniform_baseline_mean, 13 skill_mean, 15/16 skill_min/max; plot_figs.sh appends 17/18 the 95 %
# interval of the RMSE mean, 19/20 that of the skill mean.
if (metric eq "rmse") {
  set logscale y; set format y "10^{%L}"; set ylabel "RMSE"
  # Points whose output holds NaN (in any seed) get a "NaN" text mark near the top, as in the paper; the
  # line then shows the mean over the seeds without NaN, if any.
  set yrange [*:3]; ym = 6; ylo = 8; yhi = 9; clo = 17; chi = 18; nan_y1 = 1.0; nan_y2 = 0.5; nan_y3 = 0.17
  what = "RMSE (Eq. 19)"
} else {
  unset logscale y; set format y "%g"; set ylabel "skill = 1 - RMSE / RMSE(uniform weights)"
  set yrange [-1:1.1]; set ytics 0.25; ym = 13; ylo = 15; yhi = 16; clo = 19; chi = 20; nan_y1 = -0.55; nan_y2 = -0.75; nan_y3 = -0.95
  what = "skill score against the uniform-weights output"
}
rows = metric eq "rmse" ? 2 : 1
set multiplot layout rows,2 title sprintf("Fig. %s: %s, %s inputs, shape (1,16,1280,128); mean over %s seeds, band its 95 %% confidence interval, bars min-max", fig, what, dist, seeds)
set style fill transparent solid 0.18 noborder
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
    plot f("fa32") using col:clo:chi with filledcurves lc rgb "#1f77b4" notitle, \
         f("fa16") using col:clo:chi with filledcurves lc rgb "#d62728" notitle, \
         f("pasa") using col:clo:chi with filledcurves lc rgb "#2ca02c" notitle, \
         f("fa32") using col:ym:ylo:yhi with yerrorlines lw 2 pt 7 lc rgb "#1f77b4" title "FA-FP32", \
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
    plot f("fa32") using col:clo:chi with filledcurves lc rgb "#1f77b4" notitle, \
         f("fa16") using col:clo:chi with filledcurves lc rgb "#d62728" notitle, \
         f("pasa") using col:clo:chi with filledcurves lc rgb "#2ca02c" notitle, \
         f("fa32") using col:ym:ylo:yhi with yerrorlines lw 2 pt 7 lc rgb "#1f77b4" title "FA-FP32", \
         f("fa16") using col:ym:ylo:yhi with yerrorlines lw 2 pt 5 lc rgb "#d62728" title "FA-FP16/FP32", \
         f("pasa") using col:ym:ylo:yhi with yerrorlines lw 2 pt 9 lc rgb "#2ca02c" title "PASA-FP16", \
         0 with lines dt 2 lw 2 lc rgb "#555555" title "uniform weights (no attention)", \
         g("fa16") using col:(nan_y1):("NaN") with labels rotate by 90 tc rgb "#d62728" font ",11" notitle, \
         g("pasa") using col:(nan_y2):("NaN") with labels rotate by 90 tc rgb "#2ca02c" font ",11" notitle, \
         g("fa32") using col:(nan_y3):("NaN") with labels rotate by 90 tc rgb "#1f77b4" font ",11" notitle
  }
}
if (metric eq "rmse") {
  set style fill empty
  set logscale y; set format y "%g"; set yrange [*:*]; set ytics auto
  set ylabel "RMSE ratio (paired by seed)"
  do for [panel in "x0 am"] {
    if (panel eq "x0") {
      set title sprintf("PASA-FP16 / FA, Am = %s", am); set xlabel "mean value x0"; unset logscale x; col = 1
    } else {
      set title sprintf("PASA-FP16 / FA, x0 = %s", x0); set xlabel "amplitude Am"; set logscale x; col = 2
    }
    r(a) = sprintf("%s/%s_ratio_%s.csv", d, panel, a)
    plot r("fa16") using col:3:4:5 with yerrorlines lw 2 pt 5 lc rgb "#d62728" title "PASA-FP16 / FA-FP16/FP32 (95 % interval)", \
         r("fa32") using col:3:4:5 with yerrorlines lw 2 pt 7 lc rgb "#1f77b4" title "PASA-FP16 / FA-FP32 (95 % interval)", \
         1 with lines dt 2 lw 2 lc rgb "#555555" title "equal error"
  }
}
unset multiplot
