#include "pasa/attention/detail/blocked_attention.hpp"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstdint>
#include <functional>
#include <numbers>
#include <thread>
#include <type_traits>

#include "pasa/attention/algorithm.hpp"
#include "pasa/attention/detail/fused_tile.hpp"
#include "pasa/attention/quantise.hpp"
#include "pasa/core/memory.hpp"

namespace pasa::detail {
namespace {

// Whether every x[i] is a float value (NaNs excepted: they fail the comparison), and with `bits` = 11 also
// of at most 11 significant bits (the float's 13 low significand bits zero).
bool floats_only(const double* x, std::size_t n, int bits = 24) {
  const std::uint32_t low = bits == 24 ? 0 : 0x1FFF;
  std::uint32_t bad = 0;  // (an integer or-reduction: GCC vectorises it, not a bool and-reduction)
  for (std::size_t i = 0; i < n; ++i) {
    const float f = static_cast<float>(x[i]);
    bad |= static_cast<std::uint32_t>(static_cast<double>(f) != x[i]) | (std::bit_cast<std::uint32_t>(f) & low);
  }
  return bad == 0;
}

// dst = src rounded to f (dst may be src: in place): in chunks on `threads` threads, each chunk's pages
// first touched by the thread that writes them, except for stochastic rounding, whose random stream runs in
// element order (every other mode rounds each element on its own: the same bits).
void round_into(std::span<const double> src, std::span<double> dst, const Format& f, const RoundOptions& o,
                RandomBits* rng, int threads) {
  constexpr std::size_t kChunk = std::size_t{1} << 16;
  if (o.mode == RoundMode::stochastic || threads <= 1 || src.size() <= kChunk) {
    round_span(src, dst, f, o, rng);
    return;
  }
  parallel_for((src.size() + kChunk - 1) / kChunk, threads, [&](std::size_t c) {
    const std::size_t i0 = c * kChunk, n = std::min(kChunk, src.size() - i0);
    round_span(src.subspan(i0, n), dst.subspan(i0, n), f, o, rng);
  });
}
void round_in_place(std::span<double> x, const Format& f, const RoundOptions& o, RandomBits* rng, int threads) {
  round_into(std::span<const double>(x), x, f, o, rng, threads);
}

// dst[i] = float(src[i]) (exact: the values are floats), in chunks on `threads` threads; each chunk's pages
// are first touched by the thread that writes them.
void to_floats(const uninit_vector<double>& src, uninit_vector<float>& dst, int threads) {
  constexpr std::size_t kChunk = std::size_t{1} << 16;
  dst.resize(src.size());
  parallel_for((src.size() + kChunk - 1) / kChunk, threads, [&](std::size_t c) {
    const std::size_t i0 = c * kChunk, i1 = std::min(src.size(), i0 + kChunk);
    for (std::size_t i = i0; i < i1; ++i) dst[i] = static_cast<float>(src[i]);
  });
}

bool plain_fp64(const StageSpec& s) {
  return s.format == format_by_name("fp64") && s.round.mode == RoundMode::nearest_even &&
         s.round.overflow == Overflow::ieee && !s.round.flush_input && !s.round.flush_output;
}

// A tensor rounded to a stage's format: t itself when it already holds that format, else a rounded copy
// in own.
const Tensor& to_stage(const Tensor& t, const StageSpec& s, RandomBits& rng, Tensor& own, int threads) {
  if (plain_fp64(s) || (t.format == s.format && s.round.mode != RoundMode::stochastic)) return t;
  // Rounded straight from t into an uninitialised tensor on the threads (a copy first would be one thread
  // writing the whole tensor: the serial part of every run whose inputs are not in their stage formats).
  own = Tensor::uninitialised(t.shape, s.format);
  round_into(std::span<const double>(t.data), std::span<double>(own.data), s.format, s.round, &rng, threads);
  return own;
}

// [FA3, §3.3] an input under QuantOptions: the Hadamard transform along D (Q and K, when asked), then each
// group (tensor, (batch, head), or `rows` rows of a head) divided by its fp32 scale and rounded once to the
// stage; scales gets one entry per group of `rows` rows in (batch, head, block) order. Without scales the
// transformed values are rounded to the stage as they are.
const Tensor& quantised_input(const Tensor& t, const StageSpec& s, const QuantOptions& qo, bool transform,
                              std::size_t rows, RandomBits& rng, Tensor& own, std::vector<double>& scales,
                              int threads, Tensor* before = nullptr) {
  if (qo.scales == QuantScale::none && !(transform && qo.hadamard)) return to_stage(t, s, rng, own, threads);
  own = t;
  const std::size_t B = t.shape.B, N = t.shape.N, S = t.shape.S, D = t.shape.D;
  if (transform && qo.hadamard) hadamard_rows(own.data.data(), B * N * S, D, hadamard_signs(D, qo.hadamard_seed));
  if (before) *before = own;
  own.format = s.format;
  if (qo.scales == QuantScale::none) {
    const std::span<double> all(own.data);  // the transformed values, rounded to the stage
    if (!plain_fp64(s)) round_in_place(all, s.format, s.round, &rng, threads);
    return own;
  }
  scales = quantise_groups(own.data.data(), B * N, S, D, rows, qo, s, &rng);
  return own;
}

// §2.2: PASA with bf16 inputs runs its bf16 stages in fp16.
Allocation effective_allocation(const AttentionInputs& in, const AlgorithmSpec& spec) {
  keep_freed_memory();  // before the run's first big buffer (see memory.hpp)
  Allocation a = spec.alloc;
  const Format bf16 = format_by_name("bf16");
  if (algorithm_info(spec.name).pasa_options && spec.pasa.bf16_to_fp16 &&
      (in.q.format == bf16 || in.k.format == bf16 || in.v.format == bf16))
    for (auto& s : a.stages) {
      if (s.format == bf16) s.format = format_by_name("fp16");
      if (s.reduce.acc == bf16) s.reduce.acc = format_by_name("fp16");
    }
  return a;
}

std::uint64_t next_run_serial() {
  static std::atomic<std::uint64_t> last{0};
  return ++last;
}

}  // namespace

Run::~Run() {
  // Buffers from glibc's mmap threshold up (32 MiB at most, core/memory.hpp) are mappings of their own;
  // the kernel unmaps several at once (dev VM: four of 128 MiB in 58–99 ms on two threads, 107–153 ms on one).
  constexpr std::size_t kMapped = std::size_t{32} << 20;
  std::vector<std::function<void()>> frees;
  auto add = [&](auto& buf) {
    if (buf.capacity() * sizeof(buf[0]) >= kMapped) frees.emplace_back([&buf] { std::decay_t<decltype(buf)>().swap(buf); });
  };
  for (Tensor* x : {&q_own_, &k_own_, &v_own_, &k_pre_}) add(x->data);
  add(keys_t);
  for (auto* f : {&keys_t_f32, &v_f32, &q_f32, &keys_f32, &v_panels}) add(*f);
  const std::size_t t = std::min<std::size_t>(frees.size(), static_cast<std::size_t>(setup_threads_));
  if (t < 2) return;  // (the members free themselves)
  auto share = [&](std::size_t w) {
    for (std::size_t j = w; j < frees.size(); j += t) frees[j]();
  };
  std::vector<std::thread> pool;
  std::size_t started = 1;
  try {
    for (; started < t; ++started) pool.emplace_back(share, started);
  } catch (...) {  // no thread to be had: the calling thread frees their share
  }
  for (std::size_t w = started; w < t; ++w) share(w);
  share(0);
  for (auto& th : pool) th.join();
}

Run::Run(const AttentionInputs& in_, const AlgorithmSpec& spec_, const KvTiles* tiles_, int threads)
    : in(in_),
      spec(spec_),
      alloc(effective_allocation(in_, spec_)),
      setup_threads_(std::max(1, threads)),
      setup_rng_(spec_.seed),
      serial(next_run_serial()),
      q(quantised_input(in_.q, alloc.spec(Stage::q), spec_.quant, true, spec_.s1, setup_rng_, q_own_, q_scale_,
                        setup_threads_)),
      k(quantised_input(in_.k, alloc.spec(Stage::k), spec_.quant, true, spec_.s2, setup_rng_, k_own_, k_scale_,
                        setup_threads_, spec_.quant.shift_first ? &k_pre_ : nullptr)),
      v(quantised_input(in_.v, alloc.spec(Stage::v), spec_.quant, false, spec_.s2, setup_rng_, v_own_, v_scale_,
                        setup_threads_)),
      tiles(tiles_) {
  quantised = spec.quant.scales != QuantScale::none;
  B = in.q.shape.B;
  Nq = in.q.shape.N;
  Nkv = in.k.shape.N;
  Sq = in.q.shape.S;
  Skv = in.k.shape.S;
  D = in.q.shape.D;
  group = Nq / Nkv;
  for (std::size_t i = 0; i < kStageCount; ++i) {
    const StageSpec& sp = alloc.stages[i];
    const bool plain = sp.round.mode == RoundMode::nearest_even && sp.round.overflow == Overflow::ieee &&
                       !sp.round.flush_input && !sp.round.flush_output;
    native_[i] = plain_fp64(sp);
    fp32_[i] = sp.format == format_by_name("fp32") && plain;
    acc_native_[i] = sp.acc() == format_by_name("fp64") && plain;
    acc_fp32_[i] = sp.acc() == format_by_name("fp32") && plain;
  }
  qk = GemmSpec{q.format, k.format, stage(Stage::qk_acc), stage(Stage::s), alloc.gemm_of(GemmId::qk)};
  pv = GemmSpec{stage(Stage::p).format, v.format, stage(Stage::pv_acc), stage(Stage::pv), alloc.gemm_of(GemmId::pv)};
  scale = round_to(Stage::scale, in.effective_scale(), &setup_rng_);
  masked = in.mask.causal || !in.mask.kv_len.empty() || !in.mask.keep.empty();
  // [IFA]: the constant the select writes into masked scores, held in the score (scale) format (drawn after
  // the scale so that runs without a select mask keep their stochastic streams).
  if (!in.mask.select.empty()) select_value = round_to(Stage::scale, in.mask.select_value, &setup_rng_);
  biased = !in.pse.data.empty() || !in.mask.select.empty();
  set_keys_t_format(k.format);  // (decides float_tiles)
  const bool shifts_keys = algorithm_info(spec.name).shifts_keys;  // they fill keys_t themselves
  if (!shifts_keys && !tiles)  // (each (batch, head) writes its own part of the key buffers)
    parallel_for(B * Nkv, setup_threads_, [&](std::size_t bh) { set_keys_t(bh / Nkv, bh % Nkv, k.head(bh / Nkv, bh % Nkv)); });
}

void Run::set_keys_t_format(const Format& f) {
  keys_t_format = f;
  qk.b_format = f;
  float_tiles = fused_tiles(*this);
  float_qk = float_tiles && gemm_output_in_floats(qk);
  float_pv = float_tiles && gemm_output_in_floats(pv);
  // Every buffer below is written in full before it is read (set_keys_t covers every key of every head):
  // uninit_vector leaves out the zero fill.
  const std::size_t size = tiles ? 0 : B * Nkv * D * Skv;  // tiles: K and V are read in place
  keys_t.clear();
  keys_t_f32.clear();
  keys_f32.clear();
  if (float_qk) keys_f32.resize(size);
  else if (gemm_uses_floats(qk)) keys_t_f32.resize(size);
  else keys_t.resize(size);
  if (float_pv && v_panels.empty()) {  // V packed once, as fused_pv's GEMM reads it
    const std::size_t P = (D + 31) / 32;
    v_panels.resize(B * Nkv * P * 32 * Skv);
    parallel_for(B * Nkv, setup_threads_, [&](std::size_t bh) {
      for (std::size_t p = 0; p < P; ++p) {
        float* dst = v_panels.data() + (bh * P + p) * 32 * Skv;
        const std::size_t w = std::min<std::size_t>(32, D - 32 * p);
        for (std::size_t j = 0; j < Skv; ++j) {
          const double* src = v.data.data() + (bh * Skv + j) * D + 32 * p;
          for (std::size_t c = 0; c < w; ++c) dst[32 * j + c] = static_cast<float>(src[c]);
          for (std::size_t c = w; c < 32; ++c) dst[32 * j + c] = 0.0f;
        }
      }
    });
  }
  if (!float_pv && gemm_uses_floats(pv) && !tiles && v_f32.empty()) to_floats(v.data, v_f32, setup_threads_);
  // Q as floats for the general path's float GEMMs; the fused path's own kernel converts an item's rows as it
  // packs them (fused_begin_item), which spares the run a pass over Q and a copy of it.
  if (!float_qk && gemm_uses_floats(qk) && q_f32.empty()) to_floats(q.data, q_f32, setup_threads_);
}

void Run::round_to(Stage s, double* x, std::size_t n, RandomBits* rng) const {
  if (native(s)) return;
  const StageSpec& sp = stage(s);
  if (fp32_[static_cast<std::size_t>(s)]) {  // a float conversion is RNE to fp32 with IEEE overflow
    for (std::size_t i = 0; i < n; ++i) x[i] = static_cast<float>(x[i]);
    return;
  }
  round_span(std::span<const double>(x, n), std::span<double>(x, n), sp.format, sp.round, rng);
}

double Run::round_to(Stage s, double x, RandomBits* rng) const {
  if (native(s)) return x;
  const StageSpec& sp = stage(s);
  return round(x, sp.format, sp.round, rng);
}

void Run::round_acc(Stage s, double* x, std::size_t n, RandomBits* rng) const {
  const auto i = static_cast<std::size_t>(s);
  if (acc_native_[i]) return;
  if (acc_fp32_[i]) {
    for (std::size_t j = 0; j < n; ++j) x[j] = static_cast<float>(x[j]);
    return;
  }
  const StageSpec& sp = stage(s);
  round_span(std::span<const double>(x, n), std::span<double>(x, n), sp.acc(), sp.round, rng);
}

namespace {
// Keys block by block (s2 keys), each block transposed to D × n and stored contiguously at dst + j0·D,
// so that the QKᵀ GEMM of a tile reads a compact (D × n, stride n) matrix.
template <class T>
void transpose_keys(const double* src, std::size_t S, std::size_t D, std::size_t s2, T* dst) {
  for (std::size_t j0 = 0; j0 < S; j0 += s2) {
    const std::size_t n = std::min(s2, S - j0);
    T* blk = dst + j0 * D;
    for (std::size_t d = 0; d < D; ++d)
      for (std::size_t s = 0; s < n; ++s) blk[d * n + s] = static_cast<T>(src[(j0 + s) * D + d]);
  }
}
}  // namespace

void Run::set_keys_t(std::size_t b, std::size_t hk, const double* keys) {
  const std::size_t off = (b * Nkv + hk) * D * Skv;
  if (float_qk) std::copy(keys, keys + Skv * D, keys_f32.data() + off);  // row-major, as the fused path reads K
  else if (!keys_t_f32.empty()) transpose_keys(keys, Skv, D, spec.s2, keys_t_f32.data() + off);
  else transpose_keys(keys, Skv, D, spec.s2, keys_t.data() + off);
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
  const std::size_t n = j1 - j0, per_head = (it.r1 - it.r0) * n;
  vis.assign(it.rows() * n, 1);
  if (!run.masked) return true;
  bool any = false;
  for (std::size_t r = it.r0; r < it.r1; ++r)
    for (std::size_t j = j0; j < j1; ++j) {
      const bool v = visible(run.in, it.b, r, j);
      vis[(r - it.r0) * n + (j - j0)] = v;
      any = any || v;
    }
  // The masks are per query row, the same for every head of the item.
  for (std::size_t g = 1; g < it.heads; ++g) std::copy_n(vis.begin(), per_head, vis.begin() + g * per_head);
  return any;
}

void tile_scores(const Run& run, const Item& it, std::size_t j0, std::size_t n, double* S, RandomBits* rng) {
  if (it.heads > 1 && it.r1 - it.r0 < run.Sq) {  // the heads' rows are not adjacent in Q: one GEMM per head
    Item one = it;
    one.heads = 1;
    for (std::size_t g = 0; g < it.heads; ++g, ++one.h) tile_scores(run, one, j0, n, S + g * one.rows() * n, rng);
    return;
  }
  const double* q = run.q.head(it.b, it.h) + it.r0 * run.D;
  const std::size_t off = (it.b * run.Nkv + it.hk) * run.D * run.Skv + j0 * run.D;  // block j0: D × n
  const std::size_t qoff = ((it.b * run.Nq + it.h) * run.Sq + it.r0) * run.D;
  if (run.tiles) {
    const float* kt = run.tiles->keys_t(it.b, it.hk, j0, n);
    if (!run.q_f32.empty()) gemm(run.qk, it.rows(), n, run.D, run.q_f32.data() + qoff, run.D, kt, n, S, n, rng);
    else gemm(run.qk, it.rows(), n, run.D, q, run.D, kt, n, S, n, rng);
  } else if (!run.keys_t_f32.empty() && !run.q_f32.empty())
    gemm(run.qk, it.rows(), n, run.D, run.q_f32.data() + qoff, run.D, run.keys_t_f32.data() + off, n, S, n, rng);
  else if (!run.keys_t_f32.empty()) gemm(run.qk, it.rows(), n, run.D, q, run.D, run.keys_t_f32.data() + off, n, S, n, rng);
  else gemm(run.qk, it.rows(), n, run.D, q, run.D, run.keys_t.data() + off, n, S, n, rng);
  if (run.quantised) {  // [FA3, §3.3] dequantisation after the GEMM: S·(s_q·s_k), each product rounded to s
    const double f = run.round_to(Stage::s, run.q_scale(it.b, it.h, it.r0) * run.k_scale(it.b, it.hk, j0), rng);
    run.round_each(Stage::s, S, it.rows() * n, rng, [&](std::size_t i) { return two_prod(S[i], f); });
  }
}

void tile_scale(const Run& run, double* S, std::size_t count, RandomBits* rng) {
  if (run.fusable(Stage::scale)) {
    const double scale = run.scale;
    run.fused(Stage::scale, [&](auto rnd) {
      for (std::size_t i = 0; i < count; ++i) S[i] = rnd(two_prod(S[i], scale));
    });
    return;
  }
  run.round_each(Stage::scale, S, count, rng, [&](std::size_t i) { return two_prod(S[i], run.scale); });
}

void tile_bias_select(const Run& run, const Item& it, std::size_t j0, std::size_t n, double* Z, RandomBits* rng,
                      const double* frame) {
  for (std::size_t k = 0; k < it.rows(); ++k) {
    const std::size_t r = it.row_of(k);
    double* z = Z + k * n;
    if (const double* pse = pse_row(run.in, it.b, it.head_of(k), r)) {  // Z + pse, one rounding to the score format
      const double* p = pse + j0;
      if (run.fusable(Stage::scale)) {
        run.fused(Stage::scale, [&](auto rnd) {
          for (std::size_t c = 0; c < n; ++c) z[c] = rnd(two_sum(z[c], p[c]));
        });
      } else {
        run.round_each(Stage::scale, z, n, rng, [&](std::size_t c) { return two_sum(z[c], p[c]); });
      }
    }
    if (const std::uint8_t* sel = select_row(run.in, it.b, r)) {
      // The selected score is the value in the unshifted frame (after scale and pse); in a shifted frame
      // (Z = s − f) it is value − f, one rounding to the score format, as the other scores of the tile.
      const double f = frame ? frame[k]
                             : (run.score_frame.empty() ? 0.0 : run.score_frame[(it.b * run.Nq + it.head_of(k)) * run.Sq + r]);
      const double z_sel = f == 0 ? run.select_value : run.round_exact(Stage::scale, two_sum(run.select_value, -f), rng);
      for (std::size_t c = 0; c < n; ++c)
        if (sel[j0 + c]) z[c] = z_sel;
    }
  }
}

void tile_mask(double* Z, const std::vector<std::uint8_t>& vis, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i)
    if (!vis[i]) Z[i] = kNegInf;
}

void tile_pv(const Run& run, const Item& it, const double* P, std::size_t ldp, std::size_t j0, std::size_t n, double* PV,
             RandomBits* rng) {
  const std::size_t off = (it.b * run.Nkv + it.hk) * run.Skv * run.D + j0 * run.D;
  if (run.tiles)
    gemm(run.pv, it.rows(), run.D, n, P, ldp, run.tiles->values(it.b, it.hk, j0, n), run.D, PV, run.D, rng);
  else if (!run.v_f32.empty()) gemm(run.pv, it.rows(), run.D, n, P, ldp, run.v_f32.data() + off, run.D, PV, run.D, rng);
  else gemm(run.pv, it.rows(), run.D, n, P, ldp, run.v.data.data() + off, run.D, PV, run.D, rng);
  if (run.quantised) {  // [FA3, §3.3] P·V dequantised with the V block's scale, rounded to pv
    const double sv = run.v_scale(it.b, it.hk, j0);
    run.round_each(Stage::pv, PV, it.rows() * run.D, rng, [&](std::size_t i) { return two_prod(PV[i], sv); });
  }
}

namespace {

// dst[r] = rnd_acc(dst[r] + src[r]) for the rows: one addition of every row's accumulator.
inline void add_acc(const Run& run, Stage s, double* dst, const double* src, std::size_t rows, RandomBits* rng) {
  run.round_acc_each(s, dst, rows, rng, [&](std::size_t r) { return two_sum(dst[r], src[r]); });
}

// Pairwise order over columns [a, b): dst = x[a] if b − a = 1, else rnd_acc(sum[a, a+h) + sum[a+h, b)) with
// h = (b − a)/2. scratch holds rows values per recursion level.
void pairwise_columns(const Run& run, Stage s, const double* T, std::size_t rows, std::size_t st, std::size_t a,
                      std::size_t b, double* dst, double* scratch, RandomBits* rng) {
  if (b - a == 1) {
    std::copy(T + a * st, T + a * st + rows, dst);
    return;
  }
  const std::size_t h = (b - a) / 2;
  pairwise_columns(run, s, T, rows, st, a, a + h, dst, scratch + rows, rng);
  pairwise_columns(run, s, T, rows, st, a + h, b, scratch, scratch + rows, rng);
  add_acc(run, s, dst, scratch, rows, rng);
}

}  // namespace

namespace {


// The sequential and blocked orders of reduce_columns with a plain RNE fp32 accumulator on float terms
// (T: n columns of rows floats, stride st): every addition a float addition, which is the exact sum rounded
// once to fp32 (IEEE 754 §4.3.1, overflow included), so the same bits as add_acc, with twice the lanes and
// no exact-sum and fold steps. out: the rows' accumulated sums.
void reduce_columns_float(ReduceOrder order, std::size_t k, const float* T, std::size_t rows, std::size_t n,
                          std::size_t st, double* out) {
  thread_local std::vector<float> buffer;
  if (order == ReduceOrder::sequential) k = 1;  // one lane
  buffer.assign(rows * k, 0.0f);                 // a lane with no element holds +0
  float* lanes = buffer.data();
  for (std::size_t l = 0; l < k && l < n; ++l) {
    float* p = lanes + l * rows;
    std::copy(T + l * st, T + l * st + rows, p);
    for (std::size_t c = l + k; c < n; c += k) {
      const float* x = T + c * st;
      for (std::size_t r = 0; r < rows; ++r) p[r] = p[r] + x[r];
    }
  }
  for (std::size_t off = k / 2; off >= 1; off /= 2)
    for (std::size_t l = 0; l < off; ++l) {
      float* p = lanes + l * rows;
      const float* q = lanes + (l + off) * rows;
      for (std::size_t r = 0; r < rows; ++r) p[r] = p[r] + q[r];
    }
  for (std::size_t r = 0; r < rows; ++r) out[r] = lanes[r];
}

// The blocked order with k lanes (K: k known at compile time, so that the lanes live in registers; 0: any k)
// on each row of X (rows × n, stride ld) in float, out[r] = the row's sum; false (out partly written) when
// a term is not a float.
template <std::size_t K>
bool warp_rows(const double* X, std::size_t rows, std::size_t n, std::size_t ld, std::size_t k, double* out) {
  if constexpr (K != 0) k = K;
  thread_local std::vector<float> lane_buffer;
  lane_buffer.resize(k);
  float* p = lane_buffer.data();
  for (std::size_t r = 0; r < rows; ++r) {
    const double* x = X + r * ld;
    if (!floats_only(x, n)) return false;
    float lanes[K == 0 ? 1 : K];
    float* q = K == 0 ? p : lanes;
    std::fill(q, q + k, 0.0f);  // a lane with no element holds +0
    const std::size_t first = std::min(k, n);
    for (std::size_t l = 0; l < first; ++l) q[l] = static_cast<float>(x[l]);
    std::size_t c0 = k;
    for (; c0 + k <= n; c0 += k)
      for (std::size_t l = 0; l < k; ++l) q[l] = q[l] + static_cast<float>(x[c0 + l]);
    for (std::size_t l = 0; c0 + l < n; ++l) q[l] = q[l] + static_cast<float>(x[c0 + l]);
    for (std::size_t off = k / 2; off >= 1; off /= 2)
      for (std::size_t l = 0; l < off; ++l) q[l] = q[l] + q[l + off];
    out[r] = q[0];
  }
  return true;
}

}  // namespace

void reduce_finish(const Run& run, Stage s, ReduceOp op, std::size_t rows, std::size_t n, double* out,
                   RandomBits* rng) {
  const StageSpec& sp = run.stage(s);
  const Reduction& red = sp.reduce;
  if (op == ReduceOp::mean) {  // torch.mean: the sum divided by n in the accumulator
    const double dn = static_cast<double>(n);
    run.round_acc_each(s, out, rows, rng, [&](std::size_t r) { return exact_quotient(out[r], dn); });
  }
  // One rounding to the stage format. With acc = the stage's format the value is already in it, unless it
  // is a lone x[0] of the pairwise order (a sum of one term: no addition has rounded it).
  const bool rounded = op == ReduceOp::mean || n > 1 || red.order != ReduceOrder::pairwise;
  if (!(sp.acc() == sp.format && rounded)) run.round_to(s, out, rows, rng);
}

void reduce_columns(const Run& run, Stage s, ReduceOp op, const double* T, std::size_t rows, std::size_t n,
                    std::size_t st, double* out, RandomBits* rng, const float* Tf) {
  if (n == 0) {
    std::fill(out, out + rows, 0.0);
    return;
  }
  const StageSpec& sp = run.stage(s);
  const Reduction& red = sp.reduce;
  thread_local std::vector<double> buffer;
  if (Tf) {  // float terms, fp32 accumulator (reduce_rows checked both), not pairwise
    reduce_columns_float(red.order, static_cast<std::size_t>(red.width), Tf, rows, n, st, out);
  } else switch (red.order) {
    case ReduceOrder::sequential:  // s = −0; s = rnd_acc(s + x[c]) for every c
      // Every term enters the accumulator by a rounded addition: a first term wider than acc (an fp32 exp
      // summed in fp16) is rounded as it enters, as the hardware's register would hold it (a copy kept it
      // unrounded; the reference emulator caught the difference). −0 is the exact identity of addition
      // (−0 + x = x, signed zeros included), so a first term already in acc enters unchanged.
      std::fill(out, out + rows, -0.0);
      for (std::size_t c = 0; c < n; ++c) add_acc(run, s, out, T + c * st, rows, rng);
      break;
    case ReduceOrder::pairwise: {
      std::size_t depth = 1;
      for (std::size_t m = n; m > 1; m = m - m / 2) ++depth;  // the longer half is the second one
      buffer.resize(rows * depth);
      pairwise_columns(run, s, T, rows, st, 0, n, out, buffer.data(), rng);
      break;
    }
    case ReduceOrder::blocked: {  // the warp pattern: k strided lanes, then the shuffle-down tree
      const std::size_t k = static_cast<std::size_t>(red.width);
      buffer.assign(rows * k, 0.0);  // a lane with no element holds +0
      double* lanes = buffer.data();
      for (std::size_t l = 0; l < k && l < n; ++l) {  // a lane with terms from −0, as the sequential order
        double* p = lanes + l * rows;
        std::fill(p, p + rows, -0.0);
        for (std::size_t c = l; c < n; c += k) add_acc(run, s, p, T + c * st, rows, rng);
      }
      for (std::size_t off = k / 2; off >= 1; off /= 2)
        for (std::size_t l = 0; l < off; ++l) add_acc(run, s, lanes + l * rows, lanes + (l + off) * rows, rows, rng);
      std::copy(lanes, lanes + rows, out);
      break;
    }
  }
  reduce_finish(run, s, op, rows, n, out, rng);
}

void reduce_rows(const Run& run, Stage s, ReduceOp op, const double* X, std::size_t rows, std::size_t n, std::size_t ld,
                 double* out, RandomBits* rng) {
  // Transposed first, so that each step adds one contiguous column to the rows' partial sums.
  const std::size_t st = rows + 1;  // an odd stride: a power-of-two one makes the transposition thrash L1
  const Reduction& red = run.stage(s).reduce;
  if (run.acc_fp32(s) && red.order == ReduceOrder::blocked && red.width >= 8) {
    // The warp pattern row by row, its lanes contiguous: no transposition (the same float additions as
    // reduce_columns_float, in the same order per lane).
    const std::size_t k = static_cast<std::size_t>(red.width);
    const bool floats = k == 32 ? warp_rows<32>(X, rows, n, ld, k, out) : warp_rows<0>(X, rows, n, ld, k, out);
    if (floats) {
      if (n == 0) std::fill(out, out + rows, 0.0);
      else reduce_finish(run, s, op, rows, n, out, rng);
      return;
    }
  }
  if (run.acc_fp32(s) && red.order != ReduceOrder::pairwise) {
    // fp32 accumulator: float terms (NaNs excepted) reduce in float registers (reduce_columns_float).
    thread_local std::vector<float> fbuffer;
    fbuffer.resize(st * n);
    float* t = fbuffer.data();
    bool floats = true;
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t c = 0; c < n; ++c) {
        const double x = X[r * ld + c];
        const float f = static_cast<float>(x);
        floats &= static_cast<double>(f) == x;
        t[c * st + r] = f;
      }
    if (floats) {
      reduce_columns(run, s, op, nullptr, rows, n, st, out, rng, t);
      return;
    }
  }
  thread_local std::vector<double> buffer;
  buffer.resize(st * n);
  double* t = buffer.data();  // (a plain pointer: every access to a thread_local goes through a TLS lookup)
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < n; ++c) t[c * st + r] = X[r * ld + c];
  reduce_columns(run, s, op, t, rows, n, st, out, rng);
}

void rescale_factors(const Run& run, const double* m_old, const double* m_new, std::size_t rows, double* alpha,
                     RandomBits* rng) {
  run.round_each(Stage::max, alpha, rows, rng, [&](std::size_t r) { return two_sum(m_old[r], -m_new[r]); });
  exp_to_stage(run, alpha, rows, rng);
  for (std::size_t r = 0; r < rows; ++r)
    if (m_old[r] == kNegInf) alpha[r] = 0.0;
}

void rescale_add(const Run& run, Stage s, double* acc, const double* alpha, const double* add, std::size_t rows,
                 std::size_t width, RandomBits* rng) {
  if (run.fusable(s)) {  // the same roundings in one pass
    run.fused(s, [&](auto rnd) {
      for (std::size_t r = 0; r < rows; ++r) {
        const double a = alpha[r];
        double* x = acc + r * width;
        const double* y = add + r * width;
        for (std::size_t d = 0; d < width; ++d) x[d] = rnd(two_sum(rnd(two_prod(a, x[d])), y[d]));
      }
    });
    return;
  }
  if (width == 1) {  // one value per row (l): one call, the same roundings and draws in the same order
    run.round_each(s, acc, rows, rng, [&](std::size_t r) { return two_prod(alpha[r], acc[r]); });
  } else {
    for (std::size_t r = 0; r < rows; ++r) {  // row by row: a constant factor keeps the loop vectorised
      double* x = acc + r * width;
      const double a = alpha[r];
      run.round_each(s, x, width, rng, [&](std::size_t d) { return two_prod(a, x[d]); });
    }
  }
  run.round_each(s, acc, rows * width, rng, [&](std::size_t i) { return two_sum(acc[i], add[i]); });
}

double row_max(const double* x, std::size_t n) {
  double m = kNegInf;
  for (std::size_t c = 0; c < n; ++c)
    if (x[c] > m) m = x[c];
  return m;
}

void exp_span(double* x, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) x[i] = exp_one(x[i]);
}

// e^x rounded once to a stage of more than 24 bits, where exp_one's ~2 ulp of double cannot decide the
// rounding. Ziv's strategy: exp_dd (relative error < 2^-98) decides it when both ends of an interval of
// ±2^-95·|e^x| around it round alike (rounding is monotone, so e^x, inside, rounds the same); otherwise (e^x
// within 2^-95 of a breakpoint, or outside exp_dd's range) MPFR's e^x, rounded to odd (exp_odd).
double exp_rounded_wide(double x, const StageSpec& sp, RandomBits* rng) {
  DD e{};
  if (x >= -635.0 && x <= 0.5) {
    e = exp_dd(DD{x, 0.0});
    if (sp.format.p == 53 && sp.format.emin() <= -1022 && sp.round.mode == RoundMode::nearest_even) {
      // hi is RN(e^x) unless lo lies within the error bound of ±ulp(hi)/2 (e.hi is normal here).
      const double half_ulp = std::bit_cast<double>((std::bit_cast<std::uint64_t>(e.hi) & 0x7FF0000000000000ull) -
                                                    (53ull << 52));
      if (std::fabs(std::fabs(e.lo) - half_ulp) > 0x1p-95 * e.hi) {
        const bool plain = sp.round.overflow == Overflow::ieee && !sp.round.flush_input && !sp.round.flush_output;
        return plain ? e.hi : round(e.hi, sp.format, sp.round);
      }
    }
    if (sp.round.mode != RoundMode::stochastic) {
      const double w = 0x1p-95 * e.hi;
      const DD below = two_sum(e.hi, e.lo - w), above = two_sum(e.hi, e.lo + w);
      const double r = round_sum(below.hi, below.lo, sp.format, sp.round);
      if (r == round_sum(above.hi, above.lo, sp.format, sp.round)) return r;
      e = exp_odd(x);
    }
  } else {
    e = exp_odd(x);
  }
  return round_sum(e.hi, e.lo, sp.format, sp.round, rng);
}

void exp_to_stage(const Run& run, double* x, std::size_t n, RandomBits* rng) {
  const StageSpec& sp = run.stage(Stage::exp);
  if (sp.via == ExpVia::fp32) {  // CUDA/PyTorch: expf on the float argument, then a cast
    for (std::size_t i = 0; i < n; ++i) x[i] = std::exp(static_cast<float>(x[i]));
  } else if (sp.format.p > 24) {
    for (std::size_t i = 0; i < n; ++i) x[i] = exp_rounded_wide(x[i], sp, rng);
    return;
  } else {
    exp_span(x, n);
  }
  run.round_to(Stage::exp, x, n, rng);
}

void tile_exp(const Run& run, const double* Z, std::size_t rows, std::size_t n, std::size_t ld, const double* shift,
              double* P, RandomBits* rng) {
  for (std::size_t r = 0; r < rows; ++r) {
    const double sh = shift[r] == kNegInf ? 0.0 : shift[r];
    run.round_each(Stage::exp, P + r * ld, n, rng, [&](std::size_t c) { return two_sum(Z[r * ld + c], -sh); });
  }
  const std::size_t count = rows == 0 ? 0 : (rows - 1) * ld + n;
  exp_to_stage(run, P, count, rng);
  if (const int po = run.spec.quant.p_offset; po != 0) {  // [FA3] Max_offset: P = 2^po·e^{x − m}, exact
    for (std::size_t i = 0; i < count; ++i) P[i] = std::ldexp(P[i], po);
    run.round_to(Stage::exp, P, count, rng);  // (the exp stage's overflow and underflow)
  }
}

void write_row(const Run& run, std::size_t b, std::size_t h, std::size_t r, const double* o, double lse,
               AttentionOutput& out) {
  double* dst = out.o.head(b, h) + r * run.D;
  std::copy(o, o + run.D, dst);
  out.lse[(b * run.Nq + h) * run.Sq + r] = lse;
}

// The scaled, masked scores of one tile; returns false when the mask hides the whole tile.
bool tile_logits(const Run& run, const Item& it, std::size_t j0, std::size_t n, std::vector<double>& Z,
                 std::vector<std::uint8_t>& vis, RandomBits* rng) {
  if (!tile_visibility(run, it, j0, j0 + n, vis)) return false;
  Z.resize(it.rows() * n);
  tile_scores(run, it, j0, n, Z.data(), rng);
  tile_scale(run, Z.data(), Z.size(), rng);
  if (run.biased) tile_bias_select(run, it, j0, n, Z.data(), rng);
  if (run.masked) tile_mask(Z.data(), vis, Z.size());
  return true;
}

namespace {
// x[i] = the float quotient a[i]/b (a and b floats); false when one underflows to zero or a subnormal, or
// is not finite.
bool float_quotients(const double* a, double b, double* x, std::size_t n) {
  const float bf = static_cast<float>(b);
  bool normal = true;
  for (std::size_t i = 0; i < n; ++i) {
    const float q = static_cast<float>(a[i]) / bf;
    const float m = std::fabs(q);
    normal &= (m >= 0x1p-126f && m <= 0x1.fffffep127f) || (m == 0.0f && a[i] == 0.0);  // 0/b: exact
    x[i] = q;
  }
  return normal;
}
}  // namespace

void finish_rows(const Run& run, const Item& it, const std::vector<double>& O, const std::vector<double>& l,
                 const std::vector<double>& m, const std::vector<std::uint8_t>& seen, bool divide,
                 const std::vector<double>* lse_shift, AttentionOutput& out, RandomBits* rng) {
  std::vector<double> row(run.D);
  // An RNE div stage of p <= 11 bits (fp16; bf16 has 8, fp8 4 or 3) on operands of at most 11 bits (O and l in
  // fp16, say): RN_p(RN_fp32(a/b)) = RN_p(a/b), since 24 >= 2·11 + 2 [Figueroa 1995, "When is double rounding
  // innocuous?"], as long as the float quotient is a normal number (all 24 bits); float_quotients checks
  // that. (An fp32 l breaks the premise: then the exact quotient.)
  const StageSpec& div = run.stage(Stage::div);
  const bool narrow_div = div.format.p <= 11 && div.round.mode == RoundMode::nearest_even && !div.round.flush_input &&
                          !div.round.flush_output;
  for (std::size_t r = 0; r < it.rows(); ++r) {
    const std::size_t h = it.head_of(r), i = it.row_of(r);
    if (!seen[r]) {
      std::fill(row.begin(), row.end(), 0.0);
      write_row(run, it.b, h, i, row.data(), kNegInf, out);
      continue;
    }
    const double* o = &O[r * run.D];
    if (divide && run.fusable(Stage::div)) {  // the same rounding in one vectorised loop
      const double lr = l[r];
      const std::size_t D = run.D;
      double* x = row.data();
      if (!run.native(Stage::div) && floats_only(o, D) && static_cast<float>(lr) == lr) {
        // fp32 stage, fp32 operands: a float division is the correctly rounded quotient (IEEE 754 §5.4.1,
        // subnormals and overflow included), the same bits as the exact quotient rounded once, in a
        // quarter of the time (no residual, twice the lanes).
        const float lf = static_cast<float>(lr);
        for (std::size_t d = 0; d < D; ++d) x[d] = static_cast<float>(o[d]) / lf;
      } else {
        run.fused(Stage::div, [&](auto rnd) {
          for (std::size_t d = 0; d < D; ++d) x[d] = rnd(exact_quotient(o[d], lr));
        });
      }
    } else if (divide && narrow_div && floats_only(o, run.D, 11) && floats_only(&l[r], 1, 11) &&
               float_quotients(o, l[r], row.data(), run.D)) {
      run.round_to(Stage::div, row.data(), run.D, rng);
    } else if (divide) {
      run.round_each(Stage::div, row.data(), run.D, rng, [&](std::size_t d) { return exact_quotient(o[d], l[r]); });
    } else {
      std::copy(o, o + run.D, row.begin());
    }
    run.round_to(Stage::out, row.data(), run.D, rng);
    // l carries QuantOptions' 2^p_offset
    double lse = m[r] + std::log(l[r]) - run.spec.quant.p_offset * std::numbers::ln2;
    if (lse_shift) lse += (*lse_shift)[(it.b * run.Nq + h) * run.Sq + i];
    write_row(run, it.b, h, i, row.data(), lse, out);
  }
}

void normalised_output(const Run& run, const Item& it, const std::vector<double>& m, const std::vector<double>& d,
                       const std::vector<std::uint8_t>& seen, AttentionOutput& out, RandomBits* rng,
                       const std::vector<double>& Zrow) {
  const std::size_t rows = it.rows(), S = run.Skv;
  std::vector<double> A(rows * S), O(rows * run.D);
  tile_exp(run, Zrow.data(), rows, S, S, m.data(), A.data(), rng);
  for (std::size_t r = 0; r < rows; ++r)  // Eq. 9
    run.round_each(Stage::div, &A[r * S], S, rng, [&](std::size_t c) { return exact_quotient(A[r * S + c], d[r]); });
  run.round_to(Stage::p, A.data(), A.size(), rng);
  tile_pv(run, it, A.data(), S, 0, S, O.data(), rng);
  finish_rows(run, it, O, d, m, seen, false, nullptr, out, rng);
}

}  // namespace pasa::detail
