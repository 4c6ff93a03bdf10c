#include "pasa/inputs/generators.hpp"

#include <atomic>
#include <cmath>
#include <cstring>
#include <numbers>
#include <utility>

#include <boost/random/bernoulli_distribution.hpp>
#include <boost/random/mersenne_twister.hpp>
#include <boost/random/normal_distribution.hpp>
#include <boost/random/uniform_real_distribution.hpp>
#include <fmt/format.h>

#include "pasa/core/error.hpp"
#include "pasa/core/memory.hpp"
#include "pasa/numeric/round.hpp"

namespace pasa {

namespace {

// SplitMix64 finaliser: a fixed, well-mixing map used to derive independent stream seeds.
std::uint64_t mix(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Draws the (S, D) matrix of one (batch, head). Every element consumes the same draws whatever the values,
// so streams stay aligned.
void fill_head(const TensorGen& g, double* out, std::size_t S, std::size_t D, std::uint64_t seed) {
  boost::random::mt19937_64 eng(seed);
  switch (g.kind) {
    case GenKind::uniform: {
      const double lo = g.x0 - g.am, hi = g.x0 + g.am;
      // Boost draws until the result is below the upper end, so an interval that is empty in double (am = 0,
      // or am below half an ulp of x0: x0 - am and x0 + am round to the same double) must not draw: it would
      // never return. Its values are that one double. (validate() keeps hi - lo finite.)
      boost::random::uniform_real_distribution<double> u(lo, lo < hi ? hi : std::nextafter(lo, INFINITY));
      for (std::size_t e = 0; e < S * D; ++e) out[e] = lo < hi ? u(eng) : lo;
      break;
    }
    case GenKind::hybrid: {
      boost::random::normal_distribution<double> base(g.x0, 1.0), outlier(0.0, 1.0);
      boost::random::bernoulli_distribution<double> pick(g.p);
      for (std::size_t e = 0; e < S * D; ++e) {
        const double x = base(eng);
        const double o = g.am * outlier(eng);
        out[e] = x + (pick(eng) ? o : 0.0);
      }
      break;
    }
    case GenKind::resonance: {
      boost::random::normal_distribution<double> nz(0.0, 1.0);
      const double phase = g.phase_deg * std::numbers::pi / 180.0;
      for (std::size_t s = 0; s < S; ++s)
        for (std::size_t d = 0; d < D; ++d) {
          const double ramp = S > 1 ? g.seq_bias * static_cast<double>(s) / static_cast<double>(S - 1) : 0.0;
          const double wave = g.am * std::cos(2 * std::numbers::pi * static_cast<double>(d) / g.wavelength + phase);
          out[s * D + d] = g.x0 + ramp + wave + g.noise * nz(eng);
        }
      break;
    }
  }
}

}  // namespace

std::string gen_kind_name(GenKind k) {
  switch (k) {
    case GenKind::uniform: return "uniform";
    case GenKind::hybrid: return "hybrid";
    case GenKind::resonance: return "resonance";
  }
  return "?";
}

GenKind gen_kind_by_name(const std::string& s) {
  for (GenKind k : {GenKind::uniform, GenKind::hybrid, GenKind::resonance})
    if (s == gen_kind_name(k)) return k;
  throw InputError(fmt::format("unknown generator kind '{}'; known: uniform, hybrid, resonance", s));
}

void validate(const TensorGen& g, const std::string& path) {
  auto need = [&](bool ok, const char* key, double v, const char* what) {
    if (!ok) throw InputError(fmt::format("{}/{}: {} (got {})", path, key, what, v));
  };
  need(std::isfinite(g.x0), "x0", g.x0, "must be finite");
  need(std::isfinite(g.am) && g.am >= 0, "am", g.am, "must be finite and >= 0");
  need(g.p >= 0 && g.p <= 1, "p", g.p, "must lie in [0, 1]");
  // Every intermediate of fill_head must stay finite whatever the shape (any S and D below 2^64), not only
  // the parameters: the resonance wave's argument 2π·d/wavelength + phase_deg·π/180 and the ramp
  // seq_bias·s/(S − 1) (computed in that order, so that seeds keep their values) overflow to inf for a tiny
  // wavelength or a huge phase or bias, and cos(inf) is NaN (wavelength 1e-320 gave NaN inputs). The bounds
  // below keep each term below 2^1020 for d, s < 2^64; they are far outside any meaningful value.
  need(std::isfinite(g.wavelength) && g.wavelength >= kMinWavelength, "wavelength", g.wavelength,
       "must be finite and >= 2^-950 (the wave's argument 2π·d/wavelength must stay finite)");
  need(std::isfinite(g.phase_deg) && std::abs(g.phase_deg) <= kMaxPhaseDeg, "phase_deg", g.phase_deg,
       "must be finite with |phase_deg| <= 2^1000");
  need(std::isfinite(g.seq_bias) && std::abs(g.seq_bias) <= kMaxSeqBias, "seq_bias", g.seq_bias,
       "must be finite with |seq_bias| <= 2^950 (seq_bias·s must stay finite for every row s)");
  need(std::isfinite(g.noise) && g.noise >= 0, "noise", g.noise, "must be finite and >= 0");
  // The values must stay inside double's range (they are rounded, saturating, to the storage format only
  // afterwards): the uniform interval's width 2·am, and a bound on every other kind's magnitude (a normal
  // draw is below 40 in magnitude: Boost's ziggurat tail is far thinner than 2^-1000 there).
  const double reach = g.kind == GenKind::uniform  ? 2 * g.am
                       : g.kind == GenKind::hybrid ? std::abs(g.x0) + 40 + 40 * g.am
                                                   : std::abs(g.x0) + std::abs(g.seq_bias) + g.am + 40 * g.noise;
  if (!(std::abs(g.x0) + reach <= 0x1p1020))
    throw InputError(fmt::format("{}: x0 = {}, am = {}{}: the generated values would leave double's range "
                                 "(|x0| + the spread must stay below 2^1020)", path, g.x0, g.am,
                                 g.kind == GenKind::resonance ? fmt::format(", seq_bias = {}, noise = {}", g.seq_bias, g.noise) : ""));
}

std::uint64_t stream_seed(std::uint64_t seed, const std::string& name, std::size_t b, std::size_t h) {
  std::uint64_t hname = 0xcbf29ce484222325ull;  // FNV-1a of the tensor name
  for (unsigned char c : name) hname = (hname ^ c) * 0x100000001b3ull;
  std::uint64_t s = mix(seed + 0x9E3779B97F4A7C15ull);
  s = mix(s ^ hname);
  s = mix(s ^ (static_cast<std::uint64_t>(b) * 0x9E3779B97F4A7C15ull));
  return mix(s ^ (static_cast<std::uint64_t>(h) + 0x632BE59BD9B4E019ull));
}

std::size_t inputs_bytes(const ProblemSpec& p, Storage storage) {
  if (p.paged) {  // Q as doubles, the cache's K and V as floats (attention/unified.hpp PagedCache)
    const PagedLayout& l = *p.paged;
    std::size_t blocks = 0, given = 0;  // what a generated table may need at most, what a given one names
    for (std::size_t s = 0; s < l.seqs.size(); ++s) {
      blocks = sat_add(blocks, l.blocks_of(s));
      for (std::size_t b : l.seqs[s].block_table) given = std::max(given, sat_add(b, 1));
    }
    blocks = std::max(l.num_blocks, l.given_tables() ? given : blocks);
    return sat_add(sat_mul(sizeof(double), sat_product(p.Nq, l.tokens(), p.D)),
                   sat_mul(2 * sizeof(float), sat_product(blocks, p.Nkv, l.block_size, p.D)));
  }
  const std::size_t q = sat_product(p.B, p.Nq, p.Sq, p.D), kv = sat_product(p.B, p.Nkv, p.Skv, p.D);
  // the position bias (a user's too: generate_inputs copies it into the inputs)
  const std::size_t pse = p.has_pse || p.pse_user ? sat_product(p.B, p.Nq, p.Sq, p.Skv) : 0;
  const std::size_t w = narrow_width(format_by_name(p.format));
  const std::size_t width = storage == Storage::narrow && !p.q_user && w != 0 ? w : sizeof(double);
  return sat_add(sat_mul(width, sat_add(q, sat_mul(2, kv))), sat_mul(sizeof(double), pse));
}

namespace {

// A paged problem (ProblemSpec::paged): the dense-only options refused, the layout checked.
void validate_paged(const ProblemSpec& p) {
  const std::pair<const char*, std::size_t> dims[] = {{"Nq", p.Nq}, {"Nkv", p.Nkv}, {"D", p.D}};
  for (const auto& [key, n] : dims)
    if (n == 0) throw InputError(fmt::format("/shape/{}: must be >= 1", key));
  if (p.Nq % p.Nkv != 0)
    throw InputError(fmt::format("/shape/Nkv: problem shape: Nq = {} is not a multiple of Nkv = {}", p.Nq, p.Nkv));
  Format f;
  try {
    f = format_by_name(p.format);
  } catch (const InputError& e) {
    throw InputError(fmt::format("/format: problem format '{}': {}", p.format, e.what()));
  }
  if (!(f.p <= 24 && f.emax <= 127 && f.emin() - (f.p - 1) >= -149))
    throw InputError(fmt::format("/format: {} is wider than fp32, the paged cache's storage (floats)", f.name));
  if (!std::isfinite(p.scale)) throw InputError(fmt::format("/scale: problem scale must be finite, got {}", p.scale));
  const std::pair<const char*, bool> dense_only[] = {
      {"/causal", p.causal}, {"/kv_len", !p.kv_len.empty()}, {"/pse", p.has_pse || p.pse_user != nullptr},
      {"/select", p.select_p > 0 || p.select_user != nullptr}, {"/capture", p.q_user || !p.capture.dir.empty()},
      {"/allow_nonfinite", p.allow_nonfinite}};
  for (const auto& [key, set] : dense_only)
    if (set)
      throw InputError(fmt::format("{}: not with \"kind\": \"paged\" (each sequence's new tokens are causal over its "
                                   "context; lengths come from \"sequences\")", key));
  validate(*p.paged, p.Nkv, p.D);
  validate(p.q, "/q");
  validate(p.k, "/k");
  validate(p.v, "/v");
}

}  // namespace

void validate(const ProblemSpec& p) {
  if (p.paged) return validate_paged(p);
  const std::pair<const char*, std::size_t> dims[] = {{"B", p.B},   {"Nq", p.Nq},   {"Nkv", p.Nkv},
                                                      {"Sq", p.Sq}, {"Skv", p.Skv}, {"D", p.D}};
  for (const auto& [key, n] : dims)
    if (n == 0)
      throw InputError(fmt::format("/shape/{}: problem shape has a zero: B={} Nq={} Nkv={} Sq={} Skv={} D={}", key,
                                   p.B, p.Nq, p.Nkv, p.Sq, p.Skv, p.D));
  if (p.Nq % p.Nkv != 0)
    throw InputError(fmt::format("/shape/Nkv: problem shape: Nq = {} is not a multiple of Nkv = {}", p.Nq, p.Nkv));
  try {
    (void)format_by_name(p.format);
  } catch (const InputError& e) {
    throw InputError(fmt::format("/format: problem format '{}': {}", p.format, e.what()));
  }
  if (!std::isfinite(p.scale)) throw InputError(fmt::format("/scale: problem scale must be finite, got {}", p.scale));
  if (!p.kv_len.empty() && p.kv_len.size() != p.B)
    throw InputError(fmt::format("/kv_len: problem kv_len has {} entries, expected B = {}", p.kv_len.size(), p.B));
  for (std::size_t b = 0; b < p.kv_len.size(); ++b)
    if (p.kv_len[b] > p.Skv)
      throw InputError(fmt::format("/kv_len/{}: problem kv_len[{}] = {} exceeds Skv = {}", b, b, p.kv_len[b], p.Skv));
  if (inputs_bytes(p) == kTooLarge)
    throw InputError(fmt::format("/shape: problem shape B={} Nq={} Nkv={} Sq={} Skv={} D={}: its element count overflows",
                                 p.B, p.Nq, p.Nkv, p.Sq, p.Skv, p.D));
  validate(p.q, "/q");
  validate(p.k, "/k");
  validate(p.v, "/v");
  if (p.has_pse) validate(p.pse, "/pse");
  if (!(p.select_p >= 0 && p.select_p <= 1))
    throw InputError(fmt::format("/select/p: a probability in [0, 1] expected, got {}", p.select_p));
  if (!std::isfinite(p.select_value))
    throw InputError(fmt::format("/select/value: must be finite, got {}", p.select_value));
  if (p.pse_user) {
    const Shape& s = p.pse_user->shape;
    if (p.has_pse) throw InputError("/pse: give a generator or a user tensor, not both");
    if ((s.B != 1 && s.B != p.B) || s.N != p.Nq || s.S != p.Sq || s.D != p.Skv || p.pse_user->data.size() != s.size())
      throw InputError(fmt::format("/pse: the user tensor has shape ({}, {}, {}, {}), expected (B or 1, Nq, Sq, Skv) = "
                                   "({} or 1, {}, {}, {})", s.B, s.N, s.S, s.D, p.B, p.Nq, p.Sq, p.Skv));
  }
  if (p.q_user || p.k_user || p.v_user) {
    if (!p.q_user || !p.k_user || !p.v_user) throw InputError("/capture: user Q, K and V come together");
    const Format f = format_by_name(p.format);
    const Shape want_q{p.B, p.Nq, p.Sq, p.D}, want_kv{p.B, p.Nkv, p.Skv, p.D};
    const std::pair<const Tensor*, Shape> ts[] = {{p.q_user.get(), want_q}, {p.k_user.get(), want_kv}, {p.v_user.get(), want_kv}};
    for (const auto& [t, want] : ts)
      if (!(t->shape == want) || t->data.size() != want.size() || !(t->format == f))
        throw InputError(fmt::format("/capture: a user tensor has shape ({}, {}, {}, {}) in {}, expected ({}, {}, {}, {}) in {}",
                                     t->shape.B, t->shape.N, t->shape.S, t->shape.D, t->format.name, want.B, want.N,
                                     want.S, want.D, p.format));
  }
  if (p.select_user) {
    if (p.select_p > 0) throw InputError("/select: give a probability p or a user mask, not both");
    if (p.select_user->size() != p.B * p.Sq * p.Skv)
      throw InputError(fmt::format("/select: the user mask has {} entries, expected B*Sq*Skv = {}",
                                   p.select_user->size(), p.B * p.Sq * p.Skv));
  }
}


void generate_head(const TensorGen& g, std::size_t b, std::size_t h, std::size_t S, std::size_t D, const Format& fmt,
                   std::uint64_t seed, const std::string& name, double* out) {
  RoundOptions ro;
  ro.overflow = Overflow::saturate;
  fill_head(g, out, S, D, stream_seed(seed, name, b, h));
  const std::span<double> span(out, S * D);
  round_span(span, span, fmt, ro);
}

Tensor generate_tensor(const TensorGen& g, Shape shape, const Format& fmt, std::uint64_t seed,
                       const std::string& name, int threads, Storage storage) {
  validate(g, name);
  if (storage == Storage::narrow && narrow_width(fmt) != 0 && shape.size() != 0) {
    // Head by head through one head of doubles per work item, each narrowed into its place.
    Tensor t;
    t.shape = shape;
    t.format = fmt;
    t.narrow = NarrowStorage::allocate(fmt, shape.size());
    const std::size_t w = t.narrow.width(), per_head = shape.S * shape.D;
    std::atomic<bool> ok{true};
    parallel_for(shape.B * shape.N, threads, [&](std::size_t bh) {
      Tensor head = Tensor::uninitialised({1, 1, shape.S, shape.D}, fmt);
      generate_head(g, bh / shape.N, bh % shape.N, shape.S, shape.D, fmt, seed, name, head.data.data());
      head = narrowed(std::move(head));
      if (!head.is_narrow()) ok.store(false);
      else std::memcpy(t.narrow.writable() + bh * per_head * w, head.narrow.bytes(), per_head * w);
    });
    if (ok) return t;  // (else some value has no narrow encoding: the wide tensor below)
  }
  Tensor t = Tensor::uninitialised(shape, fmt);  // (every head written below, on the threads: first touch)
  parallel_for(shape.B * shape.N, threads, [&](std::size_t w) {
    const std::size_t b = w / shape.N, h = w % shape.N;
    generate_head(g, b, h, shape.S, shape.D, fmt, seed, name, t.head(b, h));
  });
  return t;
}

AttentionInputs generate_inputs(const ProblemSpec& p, int threads, Storage storage) {
  validate(p);
  if (p.paged)  // (attention/unified.hpp generate_paged draws it)
    throw InputError("/kind: a paged problem runs unified attention over its cache (pasa-attn, pasa-sweep, "
                     "pasa.unified_attention), not dense inputs");
  const Format fmt = format_by_name(p.format);
  AttentionInputs in;
  if (p.q_user) {  // a model's tensors (validate checked their shapes and format)
    in.q = *p.q_user;
    in.k = *p.k_user;
    in.v = *p.v_user;
  } else {
    in.q = generate_tensor(p.q, {p.B, p.Nq, p.Sq, p.D}, fmt, p.seed, "q", threads, storage);
    in.k = generate_tensor(p.k, {p.B, p.Nkv, p.Skv, p.D}, fmt, p.seed, "k", threads, storage);
    in.v = generate_tensor(p.v, {p.B, p.Nkv, p.Skv, p.D}, fmt, p.seed, "v", threads, storage);
  }
  in.scale = p.scale;
  in.mask.causal = p.causal;
  in.mask.kv_len = p.kv_len;
  if (p.pse_user) in.pse = *p.pse_user;
  else if (p.has_pse) in.pse = generate_tensor(p.pse, {p.B, p.Nq, p.Sq, p.Skv}, fmt, p.seed, "pse", threads);
  if (p.select_user) {
    in.mask.select = *p.select_user;
  } else if (p.select_p > 0) {
    boost::random::mt19937_64 eng(stream_seed(p.seed, "select", 0, 0));
    boost::random::bernoulli_distribution<double> bern(p.select_p);
    in.mask.select.resize(p.B * p.Sq * p.Skv);
    for (auto& x : in.mask.select) x = bern(eng) ? 1 : 0;
  }
  in.mask.select_value = p.select_value;
  in.allow_nonfinite = p.allow_nonfinite;
  validate(in);
  return in;
}

}  // namespace pasa
