#include "pasa/blocked_attention.hpp"

#include <algorithm>
#include <cmath>

namespace pasa::detail {
namespace {

bool plain_fp64(const StageSpec& s) {
  return s.format == format_by_name("fp64") && s.round.mode == RoundMode::nearest_even &&
         s.round.overflow == Overflow::ieee && !s.round.flush_input && !s.round.flush_output;
}

// Rounds a whole tensor to a stage's format (a copy); nothing to do when it already holds that format.
Tensor to_stage(const Tensor& t, const StageSpec& s, RandomBits& rng) {
  Tensor r = t;
  if (!(plain_fp64(s) || (t.format == s.format && s.round.mode != RoundMode::stochastic))) {
    round_span(std::span<const double>(r.data), std::span<double>(r.data), s.format, s.round, &rng);
    r.format = s.format;
  }
  return r;
}

// §2.2: PASA with bf16 inputs runs its bf16 stages in fp16.
Allocation effective_allocation(const AttentionInputs& in, const AlgorithmSpec& spec) {
  Allocation a = spec.alloc;
  const Format bf16 = format_by_name("bf16");
  if (spec.name == "pasa" && spec.pasa.bf16_to_fp16 &&
      (in.q.format == bf16 || in.k.format == bf16 || in.v.format == bf16))
    for (auto& s : a.stages)
      if (s.format == bf16) s.format = format_by_name("fp16");
  return a;
}

}  // namespace

Run::Run(const AttentionInputs& in_, const AlgorithmSpec& spec_)
    : in(in_), spec(spec_), alloc(effective_allocation(in_, spec_)) {
  B = in.q.shape.b;
  Nq = in.q.shape.n;
  Nkv = in.k.shape.n;
  Sq = in.q.shape.s;
  Skv = in.k.shape.s;
  D = in.q.shape.d;
  group = Nq / Nkv;
  for (std::size_t i = 0; i < kStageCount; ++i) native_[i] = plain_fp64(alloc.stages[i]);
  // The inputs rounded to their engine formats. Stochastic rounding of inputs uses a fixed stream (seeded
  // from spec.seed) in tensor order, so it is independent of the threads too.
  RandomBits rng(spec.seed);
  q = to_stage(in.q, st(Stage::q), rng);
  k = to_stage(in.k, st(Stage::k), rng);
  v = to_stage(in.v, st(Stage::v), rng);
  kt.assign(B * Nkv * D * Skv, 0.0);
  kt_format = k.format;
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t h = 0; h < Nkv; ++h) set_kt(b, h, k.head(b, h));
  scale = rnd(Stage::scale, in.effective_scale(), &rng);
  masked = in.mask.causal || !in.mask.kv_len.empty() || !in.mask.keep.empty();
  qk = GemmSpec{q.format, kt_format, st(Stage::qk_acc), st(Stage::s), alloc.gemm};
  pv = GemmSpec{st(Stage::p).format, v.format, st(Stage::pv_acc), st(Stage::pv), alloc.gemm};
}

void Run::rnd(Stage s, double* x, std::size_t n, RandomBits* rng) const {
  if (native(s)) return;
  const StageSpec& sp = st(s);
  round_span(std::span<const double>(x, n), std::span<double>(x, n), sp.format, sp.round, rng);
}

double Run::rnd(Stage s, double x, RandomBits* rng) const {
  if (native(s)) return x;
  const StageSpec& sp = st(s);
  return round(x, sp.format, sp.round, rng);
}

void Run::set_kt(std::size_t b, std::size_t hk, const double* keys) {
  double* t = kt.data() + (b * Nkv + hk) * D * Skv;
  for (std::size_t s = 0; s < Skv; ++s)
    for (std::size_t d = 0; d < D; ++d) t[d * Skv + s] = keys[s * D + d];
}

std::vector<Item> make_items(const Run& run) {
  std::vector<Item> items;
  const std::size_t s1 = run.spec.s1;
  for (std::size_t b = 0; b < run.B; ++b)
    for (std::size_t h = 0; h < run.Nq; ++h)
      for (std::size_t r0 = 0; r0 < run.Sq; r0 += s1)
        items.push_back(Item{b, h, h / run.group, r0, std::min(run.Sq, r0 + s1)});
  return items;
}

RandomBits item_stream(const AlgorithmSpec& spec, std::size_t item_index) {
  RandomBits mix(spec.seed ^ (0xD1B54A32D192ED03ull * (item_index + 1)));
  return RandomBits(mix.next());
}

bool tile_visibility(const Run& run, const Item& it, std::size_t j0, std::size_t j1, std::vector<std::uint8_t>& vis) {
  const std::size_t n = j1 - j0;
  vis.assign(it.rows() * n, 1);
  if (!run.masked) return true;
  bool any = false;
  for (std::size_t r = it.r0; r < it.r1; ++r)
    for (std::size_t j = j0; j < j1; ++j) {
      const bool v = visible(run.in, it.b, r, j);
      vis[(r - it.r0) * n + (j - j0)] = v;
      any = any || v;
    }
  return any;
}

void tile_scores(const Run& run, const Item& it, std::size_t j0, std::size_t n, double* S, RandomBits* rng) {
  const double* q = run.q.head(it.b, it.h) + it.r0 * run.D;
  gemm(run.qk, it.rows(), n, run.D, q, run.D, run.kt_head(it.b, it.hk) + j0, run.Skv, S, n, rng);
}

void tile_scale(const Run& run, double* S, std::size_t count, RandomBits* rng) {
  for (std::size_t i = 0; i < count; ++i) S[i] *= run.scale;
  run.rnd(Stage::scale, S, count, rng);
}

void tile_mask(double* Z, const std::vector<std::uint8_t>& vis, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i)
    if (!vis[i]) Z[i] = kNegInf;
}

void tile_pv(const Run& run, const Item& it, const double* P, std::size_t ldp, std::size_t j0, std::size_t n, double* PV,
             RandomBits* rng) {
  gemm(run.pv, it.rows(), run.D, n, P, ldp, run.v.head(it.b, it.hk) + j0 * run.D, run.D, PV, run.D, rng);
}

void rowsum_in_order(const Run& run, Stage s, const double* X, std::size_t rows, std::size_t n, std::size_t ld,
                     double* out, RandomBits* rng) {
  std::fill(out, out + rows, 0.0);
  for (std::size_t c = 0; c < n; ++c) {
    for (std::size_t r = 0; r < rows; ++r) out[r] += X[r * ld + c];
    run.rnd(s, out, rows, rng);
  }
}

double row_max(const double* x, std::size_t n) {
  double m = kNegInf;
  for (std::size_t c = 0; c < n; ++c)
    if (x[c] > m) m = x[c];
  return m;
}

void row_exp(const Run& run, const double* z, std::size_t n, double shift, double* p, RandomBits* rng) {
  const double sh = shift == kNegInf ? 0.0 : shift;
  for (std::size_t c = 0; c < n; ++c) p[c] = z[c] - sh;
  run.rnd(Stage::exp, p, n, rng);
  for (std::size_t c = 0; c < n; ++c) p[c] = std::exp(p[c]);
  run.rnd(Stage::exp, p, n, rng);
}

void write_row(const Run& run, const Item& it, std::size_t r, const double* o, double lse, AttentionOutput& out) {
  double* dst = out.o.head(it.b, it.h) + r * run.D;
  std::copy(o, o + run.D, dst);
  out.lse[(it.b * run.Nq + it.h) * run.Sq + r] = lse;
}

// The scaled, masked scores of one tile; returns false when the mask hides the whole tile.
bool tile_logits(const Run& run, const Item& it, std::size_t j0, std::size_t n, std::vector<double>& Z,
                 std::vector<std::uint8_t>& vis, RandomBits* rng) {
  if (!tile_visibility(run, it, j0, j0 + n, vis)) return false;
  Z.resize(it.rows() * n);
  tile_scores(run, it, j0, n, Z.data(), rng);
  tile_scale(run, Z.data(), Z.size(), rng);
  if (run.masked) tile_mask(Z.data(), vis, Z.size());
  return true;
}

void finish_rows(const Run& run, const Item& it, const std::vector<double>& O, const std::vector<double>& l,
                 const std::vector<double>& m, const std::vector<std::uint8_t>& seen, bool divide,
                 const std::vector<double>* lse_shift, AttentionOutput& out, RandomBits* rng) {
  std::vector<double> row(run.D);
  for (std::size_t r = 0; r < it.rows(); ++r) {
    if (!seen[r]) {
      std::fill(row.begin(), row.end(), 0.0);
      write_row(run, it, it.r0 + r, row.data(), kNegInf, out);
      continue;
    }
    for (std::size_t d = 0; d < run.D; ++d) row[d] = divide ? O[r * run.D + d] / l[r] : O[r * run.D + d];
    if (divide) run.rnd(Stage::div, row.data(), run.D, rng);
    run.rnd(Stage::out, row.data(), run.D, rng);
    double lse = m[r] + std::log(l[r]);
    if (lse_shift) lse += (*lse_shift)[(it.b * run.Nq + it.h) * run.Sq + it.r0 + r];
    write_row(run, it, it.r0 + r, row.data(), lse, out);
  }
}

void normalised_output(const Run& run, const Item& it, const std::vector<double>& m, const std::vector<double>& d,
                       const std::vector<std::uint8_t>& seen, AttentionOutput& out, RandomBits* rng,
                       const std::vector<double>& Zrow) {
  const std::size_t rows = it.rows(), S = run.Skv;
  std::vector<double> A(rows * S), O(rows * run.D);
  for (std::size_t r = 0; r < rows; ++r) {
    double* a = A.data() + r * S;
    row_exp(run, Zrow.data() + r * S, S, m[r], a, rng);
    for (std::size_t c = 0; c < S; ++c) a[c] = a[c] / d[r];  // Eq. 9
    run.rnd(Stage::div, a, S, rng);
  }
  run.rnd(Stage::p, A.data(), A.size(), rng);
  tile_pv(run, it, A.data(), S, 0, S, O.data(), rng);
  finish_rows(run, it, O, d, m, seen, false, nullptr, out, rng);
}

}  // namespace pasa::detail
