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
// With a block scheme (QuantOptions::q_block, k_block, v_block) the groups are quantised in its place and the
// values (elements × scales) replace the stage's rounding: block_quantise_heads, grouped as the operand
// `role` (0 Q, 1 K, 2 V) of its GEMM.
// A narrow t (inputs/tensor.hpp) is read as it is where it passes to the stage unchanged and `wide` is not
// asked for (the algorithm reads it only through input_values and read); otherwise it is widened first.
const Tensor& quantised_input(const Tensor& t, const StageSpec& s, const QuantOptions& qo, bool transform,
                              std::size_t rows, RandomBits& rng, Tensor& own, std::vector<double>& scales,
                              int threads, Tensor* before = nullptr, const std::optional<BlockScheme>* block = nullptr,
                              int role = 0, bool wide = false) {
  if (t.is_narrow()) {
    const bool plain = !(block && *block) && qo.scales == QuantScale::none && !(transform && qo.hadamard);
    const bool passes = plain && (plain_fp64(s) || (t.format == s.format && s.round.mode != RoundMode::stochastic));
    if (passes && !wide) return t;
    own = widened(t, threads);  // (the same values: what follows rounds or transforms them as for a wide t)
    if (plain && !passes) {     // to_stage's rounding, in place on the widened copy (the same bits)
      own.format = s.format;
      round_in_place(std::span<double>(own.data), s.format, s.round, &rng, threads);
      return own;
    }
    return quantised_input(own, s, qo, transform, rows, rng, own, scales, threads, before, block, role);
  }
  if (block && *block) {
    own = t;
    const std::size_t B = t.shape.B, N = t.shape.N, S = t.shape.S, D = t.shape.D;
    if (transform && qo.hadamard) hadamard_rows(own.data.data(), B * N * S, D, hadamard_signs(D, qo.hadamard_seed));
    block_quantise_heads(own.data.data(), B * N, S, D, **block, role != 0, role == 2, &rng);
    own.format = block_value_format(**block);
    return own;
  }
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
  for (auto* f : {&keys_t_f32, &keys_f32}) add(*f);
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
                        setup_threads_, nullptr, &spec_.quant.q_block, 0, algorithm_info(spec_.name).shifts_keys)),
      k(quantised_input(in_.k, alloc.spec(Stage::k), spec_.quant, true, spec_.s2, setup_rng_, k_own_, k_scale_,
                        setup_threads_, spec_.quant.shift_first ? &k_pre_ : nullptr, &spec_.quant.k_block, 1,
                        algorithm_info(spec_.name).shifts_keys)),  // (PASA and smooth K read Q and K as doubles)
      v(quantised_input(in_.v, alloc.spec(Stage::v), spec_.quant, false, spec_.s2, setup_rng_, v_own_, v_scale_,
                        setup_threads_, nullptr, &spec_.quant.v_block, 2)),
      tiles(tiles_) {
  quantised = spec.quant.scales != QuantScale::none;
  block_scaled = spec.quant.blocks();
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
  pv = GemmSpec{spec.quant.p_block ? block_value_format(*spec.quant.p_block) : stage(Stage::p).format, v.format,
                stage(Stage::pv_acc), stage(Stage::pv), alloc.gemm_of(GemmId::pv)};
  scale = round_to(Stage::scale, in.effective_scale(), &setup_rng_);
  masked = in.mask.causal || !in.mask.kv_len.empty() || !in.mask.keep.empty();
  // [IFA]: the constant the select writes into masked scores, held in the score (scale) format (drawn after
  // the scale so that runs without a select mask keep their stochastic streams).
  if (!in.mask.select.empty()) select_value = round_to(Stage::scale, in.mask.select_value, &setup_rng_);
  biased = !in.pse.data.empty() || !in.mask.select.empty();
  held_keys = algorithm_info(spec.name).shifts_keys && !tiles;  // they fill the key buffers themselves
  set_keys_t_format(k.format);  // (decides float_tiles)
}

void Run::set_keys_t_format(const Format& f) {
  keys_t_format = f;
  qk.b_format = f;
  float_tiles = fused_tiles(*this);
  float_qk = float_tiles && gemm_output_in_floats(qk);
  float_pv = float_tiles && gemm_output_in_floats(pv);
  qk_floats = !float_qk && gemm_uses_floats(qk);
  pv_floats = !float_pv && gemm_uses_floats(pv);
  keys_t.clear();
  keys_t_f32.clear();
  keys_f32.clear();
  if (!held_keys) return;
  // Written in full by set_keys_t (every key of every head) before it is read: no zero fill.
  const std::size_t size = B * Nkv * D * Skv;
  if (float_qk) keys_f32.resize(size);
  else if (qk_floats) keys_t_f32.resize(size);
  else keys_t.resize(size);
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

const double* input_values(const Tensor& t, std::size_t i0, std::size_t n, int slot) {
  if (!t.is_narrow()) return t.data.data() + i0;
  thread_local std::vector<double> bufs[4];
  return t.values(i0, n, bufs[slot]);
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
  const std::size_t qoff = ((it.b * run.Nq + it.h) * run.Sq + it.r0) * run.D, qn = it.rows() * run.D;
  if (run.qk_floats) {  // Q and the keys as floats (the float kernels' operands)
    const float* kt = run.tiles ? run.tiles->keys_t(it.b, it.hk, j0, n) : run.keys_t_block_f32(it.b, it.hk, j0, n);
    gemm(run.qk, it.rows(), n, run.D, run.query_rows_f32(qoff, qn), run.D, kt, n, S, n, rng);
  } else if (run.tiles) {
    gemm(run.qk, it.rows(), n, run.D, input_values(run.q, qoff, qn, 0), run.D, run.tiles->keys_t(it.b, it.hk, j0, n), n,
         S, n, rng);
  } else {
    gemm(run.qk, it.rows(), n, run.D, input_values(run.q, qoff, qn, 0), run.D, run.keys_t_block(it.b, it.hk, j0, n), n,
         S, n, rng);
  }
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
  else if (run.pv_floats)
    gemm(run.pv, it.rows(), run.D, n, P, ldp, run.value_rows_f32(it.b, it.hk, j0, n), run.D, PV, run.D, rng);
  else gemm(run.pv, it.rows(), run.D, n, P, ldp, input_values(run.v, off, n * run.D, 1), run.D, PV, run.D, rng);
  if (run.quantised) {  // [FA3, §3.3] P·V dequantised with the V block's scale, rounded to pv
    const double sv = run.v_scale(it.b, it.hk, j0);
    run.round_each(Stage::pv, PV, it.rows() * run.D, rng, [&](std::size_t i) { return two_prod(PV[i], sv); });
  }
}

}  // namespace pasa::detail
