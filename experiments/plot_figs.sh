#!/usr/bin/env bash
# Draws the paper's Figs. 9 and 10 (RMSE against x0 and Am, log y axis, NaN outputs marked "NaN" as the
# paper does, plus the RMSE of the uniform-weights output; the seed mean with its 95 % confidence band and
# the min-max bars, and below, PASA-FP16's paired RMSE ratios to FA-FP16/FP32 and FA-FP32 with 95 % intervals) and the same panels for the skill score
# 1 − RMSE / RMSE(uniform weights) from the CSVs written by pasa-tables, with gnuplot (Debian gnuplot-nox).
# Usage: experiments/plot_figs.sh [RESULTS_DIR]   (default: results; writes RESULTS_DIR/fig9.png, fig10.png,
# fig9_skill.png, fig10_skill.png)
set -euo pipefail
cd "$(dirname "$0")/.."
dir="${1:-results}"
for f in fig9_uniform_x0 fig9_uniform_am fig10_hybrid_x0 fig10_hybrid_am fig9_uniform_x0_paired \
  fig9_uniform_am_paired fig10_hybrid_x0_paired fig10_hybrid_am_paired; do
  [[ -f "$dir/$f.csv" ]] || { echo "plot_figs.sh: $dir/$f.csv not found (run pasa-tables first)" >&2; exit 2; }
done
if gnuplot -e 'set terminal pngcairo' 2>/dev/null; then term='pngcairo size 1400,@H@ font "sans,11"'; else term='png size 1400,@H@'; fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Split a figure CSV (figure,x0,Am,algorithm,seeds,rmse_mean,rmse_sd,rmse_min,rmse_max,nan_pct_mean,
# seeds_with_nan,rmse_uniform_baseline_mean,skill_mean,skill_sd,skill_min,skill_max) into one file per
# algorithm, plus the points where some seed's output holds NaN. Appended: the 95 % confidence interval of
# the mean over the n seeds, mean ± t(0.975, n−1)·sd/√n, for RMSE (columns 17, 18; the lower end floored at
# 1e-9 for the log axis) and skill (19, 20); without sd (one seed, NaN) the interval is the mean.
split() {  # split CSV PREFIX
  for a in fa32 fa16 pasa; do
    case $a in fa32) label="FA-FP32";; fa16) label="FA-FP16/FP32";; pasa) label="PASA-FP16";; esac
    awk -F, -v a="$label" -v OFS=, '
      BEGIN { split("12.706 4.303 3.182 2.776 2.571 2.447 2.365 2.306 2.262 2.228 2.201 2.179 2.160 2.145 2.131 " \
                    "2.120 2.110 2.101 2.093 2.086 2.080 2.074 2.069 2.064 2.060 2.056 2.052 2.048 2.045 2.042", t, " ") }
      NR > 1 && $4 == a {
        n = $5 + 0; q = n - 1 <= 30 ? t[n - 1] : 1.96
        r = (n > 1 && $7 != "nan") ? q * $7 / sqrt(n) : 0
        k = (n > 1 && $14 != "nan") ? q * $14 / sqrt(n) : 0
        lo = $6 - r; if (lo < 1e-9) lo = 1e-9
        print $0, lo, $6 + r, $13 - k, $13 + k
      }' "$1" > "$2_$a.csv"
    awk -F, -v a="$label" 'NR > 1 && $4 == a && $11 > 0' "$1" > "$2_${a}_nan.csv"
  done
}

# The paired ratios (fig*_paired.csv: figure,x0,Am,numerator,denominator,pairs,ratio_geo_mean,ratio_ci95_lo,
# ratio_ci95_hi,...) of PASA-FP16's RMSE to FA-FP16/FP32's and to FA-FP32's: x0, Am, ratio, 95 % interval
# (the CSV holds FA / PASA; inverted here). Points with fewer than 2 finite pairs are left out.
split_paired() {  # split_paired CSV PREFIX
  for a in fa32 fa16; do
    case $a in fa32) label="FA-FP32";; fa16) label="FA-FP16/FP32";; esac
    awk -F, -v a="$label" -v OFS=, 'NR > 1 && $4 == a && $5 == "PASA-FP16" && $6 >= 2 { print $2, $3, 1 / $7, 1 / $9, 1 / $8 }' \
      "$1" > "$2_ratio_$a.csv"
  done
}

# The GPU's RMSE (seed means on the same distributions, torch's draws: results/hardware/hw_summary.csv, written
# by experiments/gpu/summarize.py) at the panel's points, one file per config; empty where not measured.
hw="$dir/hardware/hw_summary.csv"
split_gpu() {  # split_gpu DISTRIBUTION PANEL(x0|am) FIXED_VALUE PREFIX
  for a in fa32 fa16 pasa; do
    case $a in fa32) label=fa_fp32;; fa16) label=fa_fp16_fp32;; pasa) label=pasa_fp16;; esac
    if [[ -f $hw ]]; then
      awk -F, -v g="$1" -v p="$2" -v v="$3" -v l="$label" \
        'NR > 1 && $1 == g && $4 == l && ((p == "x0" && $3 + 0 == v + 0) || (p == "am" && $2 + 0 == v + 0))' "$hw" > "$4_gpu_$a.csv"
    else
      : > "$4_gpu_$a.csv"
    fi
  done
}

figure() {  # figure NUMBER DISTRIBUTION X0_CSV AM_CSV FIXED_AM FIXED_X0
  local t="$tmp/fig$1"  # one folder per figure: the two figures are drawn at once
  mkdir -p "$t"
  split "$3" "$t/x0"
  split "$4" "$t/am"
  split_paired "${3%.csv}_paired.csv" "$t/x0"
  split_paired "${4%.csv}_paired.csv" "$t/am"
  split_gpu "$2" x0 "$5" "$t/x0"
  split_gpu "$2" am "$6" "$t/am"
  # (an algorithm without NaN points gives an empty _nan file: gnuplot's warning about it is dropped)
  for metric in rmse skill; do
    [[ $metric == rmse ]] && name="fig$1" || name="fig$1_skill"
    [[ $metric == rmse ]] && height=1000 || height=560  # the RMSE figure has a second row: the paired ratios
    seeds=$(awk -F, 'NR == 2 { print $5 }' "$3")
    gnuplot -e "seeds='$seeds'; term='${term//@H@/$height}'; out='$dir/$name.png'; fig='$1'; dist='$2'; am='$5'; x0='$6'; d='$t'; metric='$metric'" \
      experiments/figs.gp 2>&1 | { grep -v 'Skipping data file with no valid points' || true; } >&2
    echo "wrote $dir/$name.png"
  done
}
# The two figures at once.
figure 9 uniform "$dir/fig9_uniform_x0.csv" "$dir/fig9_uniform_am.csv" 0.5 20 &
fig9=$!
figure 10 hybrid "$dir/fig10_hybrid_x0.csv" "$dir/fig10_hybrid_am.csv" 10 20
wait "$fig9"
