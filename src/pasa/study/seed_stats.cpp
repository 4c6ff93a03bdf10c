#include "pasa/study/seed_stats.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace pasa {

namespace {

// Continued fraction of the regularised incomplete beta function (modified Lentz; Numerical Recipes §6.4).
double beta_cf(double a, double b, double x) {
  constexpr double kTiny = 1e-300;
  const double qab = a + b, qap = a + 1, qam = a - 1;
  double c = 1, d = 1 - qab * x / qap;
  if (std::fabs(d) < kTiny) d = kTiny;
  d = 1 / d;
  double h = d;
  for (int m = 1; m <= 1000; ++m) {
    const double m2 = 2.0 * m;
    double aa = m * (b - m) * x / ((qam + m2) * (a + m2));
    d = 1 + aa * d;
    if (std::fabs(d) < kTiny) d = kTiny;
    c = 1 + aa / c;
    if (std::fabs(c) < kTiny) c = kTiny;
    d = 1 / d;
    h *= d * c;
    aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
    d = 1 + aa * d;
    if (std::fabs(d) < kTiny) d = kTiny;
    c = 1 + aa / c;
    if (std::fabs(c) < kTiny) c = kTiny;
    d = 1 / d;
    const double del = d * c;
    h *= del;
    if (std::fabs(del - 1) < 1e-15) break;
  }
  return h;
}

// I_x(a, b).
double incomplete_beta(double a, double b, double x) {
  if (x <= 0) return 0;
  if (x >= 1) return 1;
  const double front = std::exp(std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) + a * std::log(x) + b * std::log1p(-x));
  if (x < (a + 1) / (a + b + 2)) return front * beta_cf(a, b, x) / a;
  return 1 - front * beta_cf(b, a, 1 - x) / b;
}

// P(T <= t) for Student's t with df degrees of freedom.
double student_t_cdf(double t, double df) {
  const double tail = 0.5 * incomplete_beta(df / 2, 0.5, df / (df + t * t));  // P(T > |t|)
  return t >= 0 ? 1 - tail : tail;
}

}  // namespace

double student_t_quantile(double p, double df) {
  if (!(p > 0 && p < 1) || !(df > 0)) throw std::invalid_argument("student_t_quantile: needs 0 < p < 1 and df > 0");
  if (p < 0.5) return -student_t_quantile(1 - p, df);
  double lo = 0, hi = 1;
  while (student_t_cdf(hi, df) < p) hi *= 2;  // df = 1, p = 1 − 1e-12 needs hi ~ 3e11: 40 doublings
  for (int i = 0; i < 200 && hi - lo > 1e-12 * std::max(1.0, hi); ++i) {
    const double mid = 0.5 * (lo + hi);
    (student_t_cdf(mid, df) < p ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

double percentile(std::vector<double> xs, double q) {
  if (xs.empty()) throw std::invalid_argument("percentile of no values");
  std::sort(xs.begin(), xs.end());
  const double h = (static_cast<double>(xs.size()) - 1) * std::clamp(q, 0.0, 100.0) / 100;
  const auto i = static_cast<std::size_t>(std::floor(h));
  if (i + 1 >= xs.size()) return xs.back();
  return xs[i] + (h - static_cast<double>(i)) * (xs[i + 1] - xs[i]);
}

double percentile_rank(const std::vector<double>& xs, double v) {
  if (xs.empty()) throw std::invalid_argument("percentile rank among no values");
  double below = 0;
  for (double x : xs) below += x < v ? 1.0 : (x == v ? 0.5 : 0.0);
  return 100 * below / static_cast<double>(xs.size());
}

SeedSpread seed_spread(const std::vector<double>& all, bool nonnegative) {
  std::vector<double> xs;
  for (double x : all)
    if (std::isfinite(x)) xs.push_back(x);
  if (xs.size() < 2) throw std::invalid_argument("seed_spread needs at least 2 finite values");
  SeedSpread s;
  s.n = xs.size();
  const double n = static_cast<double>(s.n);
  double sum = 0;
  for (double x : xs) sum += x;
  s.mean = sum / n;
  double ss = 0;
  for (double x : xs) ss += (x - s.mean) * (x - s.mean);
  s.sd = std::sqrt(ss / (n - 1));
  s.min = *std::min_element(xs.begin(), xs.end());
  s.max = *std::max_element(xs.begin(), xs.end());
  s.p5 = percentile(xs, 5);
  s.p50 = percentile(xs, 50);
  s.p95 = percentile(xs, 95);
  const double half = student_t_quantile(0.975, n - 1) * s.sd * std::sqrt(1 + 1 / n);
  s.predict_lo = s.mean - half;
  s.predict_hi = s.mean + half;
  if (nonnegative && s.predict_lo < 0) {
    s.predict_lo = percentile(xs, 2.5);
    s.predict_hi = percentile(xs, 97.5);
    s.predict_empirical = true;
  }
  return s;
}

std::optional<PairedRatio> paired_ratio(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) throw std::invalid_argument("paired_ratio: the two algorithms have different seed counts");
  std::vector<double> logs;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::isfinite(a[i]) && std::isfinite(b[i]) && a[i] > 0 && b[i] > 0) logs.push_back(std::log(a[i] / b[i]));
  if (logs.size() < 2) return std::nullopt;
  const double n = static_cast<double>(logs.size());
  double sum = 0;
  for (double x : logs) sum += x;
  const double mean = sum / n;
  double ss = 0;
  for (double x : logs) ss += (x - mean) * (x - mean);
  const double half = student_t_quantile(0.975, n - 1) * std::sqrt(ss / (n - 1) / n);
  PairedRatio r;
  r.n = logs.size();
  r.geo_mean = std::exp(mean);
  r.lo = std::exp(mean - half);
  r.hi = std::exp(mean + half);
  return r;
}

}  // namespace pasa
