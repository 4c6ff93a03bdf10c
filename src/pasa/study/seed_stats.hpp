// Statistics over seeds: what a numerical claim drawn from random inputs needs to carry.
//
// - Spread of one quantity over independent draws (Table 4's NaN %): mean, sample sd, percentiles, and the
//   95 % prediction interval for ONE further draw, mean ± t_{n−1,0.975}·sd·√(1 + 1/n) (normal model).
//   The paper's value is one such draw (from its own generator), so this interval, not the standard error
//   of our mean, is what it should fall in; its percentile among our draws says where it falls.
// - Paired comparison of two algorithms on the same inputs (the sweep runs every algorithm on each seed's
//   problem): per seed the ratio a_i / b_i, summarised by the geometric mean with a t interval on the log
//   ratios, exp(mean ± t_{n−1,0.975}·sd/√n). A claim "a < b" is stated only where the interval excludes 1.
#pragma once

#include <cstddef>
#include <optional>
#include <vector>

namespace pasa {

// Quantile of Student's t distribution with `df` > 0 degrees of freedom at probability p in (0, 1)
// (bisection on the CDF, from the regularised incomplete beta function; |error| < 1e-10).
double student_t_quantile(double p, double df);

// Percentile q in [0, 100] of the values by linear interpolation between order statistics (the "type 7"
// definition of Hyndman & Fan, numpy's default). Throws std::invalid_argument for no values.
double percentile(std::vector<double> xs, double q);

// Percentage of the values below v, ties counted half (the mid-rank): 0 below every value, 100 above all.
double percentile_rank(const std::vector<double>& xs, double v);

struct SeedSpread {
  std::size_t n = 0;
  double mean = 0, sd = 0, min = 0, max = 0, p5 = 0, p50 = 0, p95 = 0;
  double predict_lo = 0, predict_hi = 0;  // 95 % prediction interval for one more draw (needs n >= 2)
  bool predict_empirical = false;         // the interval is the 2.5th–97.5th percentile (see seed_spread)
};
// Over finite values only (throws std::invalid_argument for fewer than 2). With nonnegative (a quantity that
// cannot be below 0: a NaN percentage, an RMSE), a normal prediction interval reaching below 0 says that the
// draws are too skewed for the normal model; the interval is then the empirical one, the 2.5th–97.5th
// percentile of the draws, and predict_empirical is set.
SeedSpread seed_spread(const std::vector<double>& xs, bool nonnegative = false);

struct PairedRatio {
  std::size_t n = 0;             // seeds where both values are finite and positive
  double geo_mean = 0;           // exp(mean of log(a_i / b_i))
  double lo = 0, hi = 0;         // 95 % t interval of the geometric mean ratio
  bool excludes_one() const { return hi < 1 || lo > 1; }
};
// a[i] and b[i] are the two algorithms' values on the same seed's inputs. Pairs with a non-finite or
// non-positive member are left out; nullopt when fewer than 2 pairs remain.
std::optional<PairedRatio> paired_ratio(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace pasa
