// K, V and Q as the GEMMs of a tile read them (blocked_attention.hpp Run::keys_t_block ... stage_window):
// staged from the run's tensors at their own width (inputs/tensor.hpp: 2 bytes for fp16), either a window
// of whole KV heads at a time (for_items, where the heads' items reuse each block many times: prefill) or
// a tile at a time by the item that reads it (decode). Staging copies values exactly (the k, v and q
// formats are held by floats wherever floats are asked for), so where a block comes from changes no bit.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "pasa/attention/detail/blocked_attention.hpp"

namespace pasa::detail {
namespace {

// One kind of tile operand in the calling thread's buffer, with the block it holds (the run by its serial).
struct Staged {
  std::uint64_t run = 0;
  std::size_t head = 0, j0 = 0, n = 0;
  std::vector<float> f;
  std::vector<double> d;
  bool holds(const Run& r, std::size_t h, std::size_t j, std::size_t m) const {
    return run == r.serial && head == h && j0 == j && n == m;
  }
  void mark(const Run& r, std::size_t h, std::size_t j, std::size_t m) {
    run = r.serial;
    head = h;
    j0 = j;
    n = m;
  }
};
enum StagedKind : std::size_t { kKeysT, kKeysTf, kKeyRows, kValueRows, kValuePanels, kQuery, kStagedKinds };
Staged& staged(StagedKind k) {
  thread_local Staged s[kStagedKinds];
  return s[k];
}

// n × D row-major src to D × n.
template <class From, class To>
void transpose_block(const From* src, std::size_t n, std::size_t D, To* dst) {
  for (std::size_t d = 0; d < D; ++d)
    for (std::size_t s = 0; s < n; ++s) dst[d * n + s] = static_cast<To>(src[s * D + d]);
}

// The writers of one block [j0, j0 + n) of KV head (b, hk), shared by the tile and the window staging.
// Keys transposed (D × n) as doubles or floats: the layout of one s2 block of keys_t.
void write_keys_t(const Run& r, std::size_t b, std::size_t hk, std::size_t j0, std::size_t n, double* dst) {
  thread_local std::vector<double> rows;
  transpose_block(r.k.values(r.k.index(b, hk, j0), n * r.D, rows), n, r.D, dst);
}
void write_keys_t(const Run& r, std::size_t b, std::size_t hk, std::size_t j0, std::size_t n, float* dst) {
  thread_local std::vector<float> rows;
  rows.resize(n * r.D);
  r.k.read(r.k.index(b, hk, j0), n * r.D, rows.data());
  transpose_block(rows.data(), n, r.D, dst);
}
// V as the fused P·V kernel's panels: panel p at dst + p·ld, key j's 32 columns (zero-padded) at 32·j.
void write_value_panels(const Run& r, std::size_t b, std::size_t hk, std::size_t j0, std::size_t n, float* dst,
                        std::size_t ld) {
  const std::size_t D = r.D, P = (D + 31) / 32;
  thread_local std::vector<float> rows;
  rows.resize(n * D);
  r.v.read(r.v.index(b, hk, j0), n * D, rows.data());
  for (std::size_t p = 0; p < P; ++p) {
    const std::size_t w = std::min<std::size_t>(32, D - 32 * p);
    for (std::size_t j = 0; j < n; ++j) {
      float* out = dst + p * ld + 32 * j;
      std::copy_n(rows.data() + j * D + 32 * p, w, out);
      std::fill(out + w, out + 32, 0.0f);
    }
  }
}

}  // namespace

void Run::set_keys_t(std::size_t b, std::size_t hk, const double* keys) {
  PASA_ASSERT(held_keys);
  const std::size_t off = (b * Nkv + hk) * D * Skv;
  if (float_qk) {  // row-major, as the fused path reads K
    std::copy(keys, keys + Skv * D, keys_f32.data() + off);
    return;
  }
  for (std::size_t j0 = 0; j0 < Skv; j0 += spec.s2) {  // each s2 block transposed (D × n) at j0·D
    const std::size_t n = std::min(spec.s2, Skv - j0), at = off + j0 * D;
    if (qk_floats) transpose_block(keys + j0 * D, n, D, keys_t_f32.data() + at);
    else transpose_block(keys + j0 * D, n, D, keys_t.data() + at);
  }
}

KvWindowLimits& kv_window_limits() {
  static KvWindowLimits limits;
  return limits;
}

std::size_t kv_window_heads(std::size_t heads, std::size_t items_per_head, std::size_t bytes_per_head, int threads) {
  const KvWindowLimits& l = kv_window_limits();
  if (bytes_per_head == 0 || heads == 0) return 0;
  if (bytes_per_head <= l.whole_run / heads) return heads;
  if (items_per_head < l.min_items) return 0;
  const std::size_t want = (16 * static_cast<std::size_t>(std::max(threads, 1)) + items_per_head - 1) / items_per_head;
  return std::clamp<std::size_t>(std::min(want, l.cap / bytes_per_head), 1, heads);
}

std::size_t Run::window_bytes_per_head() const {
  if (tiles) return 0;  // (K and V read in place)
  const std::size_t P = (D + 31) / 32;
  std::size_t bytes = 0;
  if (!held_keys) bytes += D * Skv * (float_qk || qk_floats ? sizeof(float) : sizeof(double));
  if (float_pv) bytes += P * 32 * Skv * sizeof(float);
  else if (pv_floats) bytes += D * Skv * sizeof(float);
  return bytes;
}

std::size_t Run::window_heads(std::size_t items_per_head, int threads) const {
  return kv_window_heads(B * Nkv, items_per_head, window_bytes_per_head(), threads);
}

void Run::stage_window(std::size_t first, std::size_t count, int threads) const {
  Window& w = win_;
  w.count = 0;  // (holds nothing while it is rewritten)
  if (count == 0) {
    w = Window{};
    return;
  }
  const std::size_t P = (D + 31) / 32, head_elems = D * Skv, s2 = spec.s2;
  const bool keys = !held_keys;
  if (keys && float_qk) w.keys_f32.resize(count * head_elems);
  else if (keys && qk_floats) w.keys_t_f32.resize(count * head_elems);
  else if (keys) w.keys_t.resize(count * head_elems);
  if (float_pv) w.v_panels.resize(count * P * 32 * Skv);
  else if (pv_floats) w.v_rows.resize(count * head_elems);
  // Jobs of whole s2 blocks (the transposed layout's unit), about 2048 keys each, so that a window of one
  // head still spreads over the threads; each writes its own part of the buffers.
  const std::size_t chunk = std::max<std::size_t>(1, 2048 / s2) * s2, per_head = (Skv + chunk - 1) / chunk;
  parallel_for(count * per_head, threads, [&](std::size_t job) {
    const std::size_t h = job / per_head, head = first + h, b = head / Nkv, hk = head % Nkv;
    const std::size_t c0 = job % per_head * chunk, c1 = std::min(Skv, c0 + chunk);
    if (keys && float_qk) k.read(k.index(b, hk, c0), (c1 - c0) * D, w.keys_f32.data() + h * head_elems + c0 * D);
    for (std::size_t j0 = c0; keys && !float_qk && j0 < c1; j0 += s2) {
      const std::size_t n = std::min(s2, Skv - j0), at = h * head_elems + j0 * D;  // (block j0: D × n at j0·D)
      if (qk_floats) write_keys_t(*this, b, hk, j0, n, w.keys_t_f32.data() + at);
      else write_keys_t(*this, b, hk, j0, n, w.keys_t.data() + at);
    }
    if (float_pv) write_value_panels(*this, b, hk, c0, c1 - c0, w.v_panels.data() + h * P * 32 * Skv + 32 * c0, 32 * Skv);
    else if (pv_floats) v.read(v.index(b, hk, c0), (c1 - c0) * D, w.v_rows.data() + h * head_elems + c0 * D);
  });
  w.first = first;
  w.count = count;
}

namespace {
// keys_t_block and keys_t_block_f32 (T: double, float): the block j0 (D × n) of the held keys, else of the
// window (whole s2 blocks only: its layout), else staged in the thread's buffer (buf: s.d or s.f).
template <class T>
const T* keys_t_of(const Run& r, std::size_t b, std::size_t hk, std::size_t j0, std::size_t n, const T* held,
                   const T* window, Staged& s, std::vector<T>& buf) {
  const std::size_t head = b * r.Nkv + hk, at = head * r.D * r.Skv + j0 * r.D;
  if (held) return held + at;
  if (window && j0 % r.spec.s2 == 0 && n == std::min(r.spec.s2, r.Skv - j0)) return window + j0 * r.D;
  if (!s.holds(r, head, j0, n)) {
    buf.resize(r.D * n);
    write_keys_t(r, b, hk, j0, n, buf.data());
    s.mark(r, head, j0, n);
  }
  return buf.data();
}
}  // namespace

const double* Run::keys_t_block(std::size_t b, std::size_t hk, std::size_t j0, std::size_t n) const {
  const std::size_t head = b * Nkv + hk;
  const double* w = win_.holds(head) && !win_.keys_t.empty() ? win_.keys_t.data() + (head - win_.first) * D * Skv : nullptr;
  Staged& s = staged(kKeysT);
  return keys_t_of(*this, b, hk, j0, n, held_keys ? keys_t.data() : nullptr, w, s, s.d);
}

const float* Run::keys_t_block_f32(std::size_t b, std::size_t hk, std::size_t j0, std::size_t n) const {
  const std::size_t head = b * Nkv + hk;
  const float* w =
      win_.holds(head) && !win_.keys_t_f32.empty() ? win_.keys_t_f32.data() + (head - win_.first) * D * Skv : nullptr;
  Staged& s = staged(kKeysTf);
  return keys_t_of(*this, b, hk, j0, n, held_keys ? keys_t_f32.data() : nullptr, w, s, s.f);
}

namespace {
// key_rows_f32 and value_rows_f32: rows [j0, j0 + n) of KV head (b, hk) of t (K or V) as floats, from `whole`
// (the head's rows in the held or window buffer) where given, else staged in the thread's buffer.
const float* rows_of(const Run& r, const Tensor& t, std::size_t b, std::size_t hk, std::size_t j0, std::size_t n,
                     const float* whole, Staged& s) {
  if (whole) return whole + j0 * r.D;
  const std::size_t head = b * r.Nkv + hk;
  if (!s.holds(r, head, j0, n)) {
    s.f.resize(n * r.D);
    t.read(t.index(b, hk, j0), n * r.D, s.f.data());
    s.mark(r, head, j0, n);
  }
  return s.f.data();
}
}  // namespace

const float* Run::key_rows_f32(std::size_t b, std::size_t hk, std::size_t j0, std::size_t n) const {
  const std::size_t head = b * Nkv + hk;
  const float* whole = held_keys ? keys_f32.data() + head * Skv * D
                       : win_.holds(head) && !win_.keys_f32.empty() ? win_.keys_f32.data() + (head - win_.first) * Skv * D
                                                                    : nullptr;
  return rows_of(*this, k, b, hk, j0, n, whole, staged(kKeyRows));
}

const float* Run::value_rows_f32(std::size_t b, std::size_t hk, std::size_t j0, std::size_t n) const {
  const std::size_t head = b * Nkv + hk;
  const float* whole = win_.holds(head) && !win_.v_rows.empty() ? win_.v_rows.data() + (head - win_.first) * Skv * D : nullptr;
  return rows_of(*this, v, b, hk, j0, n, whole, staged(kValueRows));
}

const float* Run::value_panels(std::size_t b, std::size_t hk, std::size_t j0, std::size_t n, std::size_t* ld) const {
  const std::size_t head = b * Nkv + hk, P = (D + 31) / 32;
  if (win_.holds(head) && !win_.v_panels.empty()) {
    *ld = 32 * Skv;
    return win_.v_panels.data() + (head - win_.first) * P * 32 * Skv + 32 * j0;
  }
  *ld = 32 * n;
  Staged& s = staged(kValuePanels);
  if (!s.holds(*this, head, j0, n)) {
    s.f.resize(P * 32 * n);
    write_value_panels(*this, b, hk, j0, n, s.f.data(), 32 * n);
    s.mark(*this, head, j0, n);
  }
  return s.f.data();
}

const float* Run::query_rows_f32(std::size_t at, std::size_t count) const {
  Staged& s = staged(kQuery);
  if (!s.holds(*this, at, count, 0)) {
    s.f.resize(count);
    q.read(at, count, s.f.data());
    s.mark(*this, at, count, 0);
  }
  return s.f.data();
}

}  // namespace pasa::detail
