// The module's problems and paged KV cache: generate() (a dense problem's q, k, v with their masks, or a paged
// problem's cache and sequences) and unified attention with its golden, baseline and score statistics over a
// paged batch (attention/unified.hpp).
#include "module_support.hpp"
#include "pasa/attention/unified.hpp"
#include "pasa/core/memory.hpp"
#include "pasa/inputs/generators.hpp"
#include "pasa/io/metrics_json.hpp"
#include "pasa/io/problem_json.hpp"

namespace pasa_py {
namespace {

// Paged KV / unified attention (attention/unified.hpp): Q, the cache's K and V and the sequences, as
// generate() returns them for a "kind": "paged" problem.

struct PagedArrays {
  TensorArg q, k, v;
  std::optional<std::string> format;
  double scale = 0;
  std::vector<pasa::PagedSequence> seqs;

  PagedArrays(const py::handle& q_, const py::handle& k_, const py::handle& v_, const py::handle& sequences,
              std::optional<std::string> format_, double scale_)
      : q(q_, "q"), k(k_, "k_cache"), v(v_, "v_cache"), format(std::move(format_)), scale(scale_) {
    if (k.shape.size() != 4 || v.shape.size() != 4)
      throw InputError(fmt::format("k_cache, v_cache: (num_blocks, Nkv, block_size, D) arrays expected, got {} and {} "
                                   "dimensions", k.shape.size(), v.shape.size()));
    const json j = to_json_value(sequences, "sequences");
    if (!j.is_array()) throw InputError("sequences: a list of dicts {q_len, ctx_len, shared_blocks, block_table} expected");
    for (std::size_t s = 0; s < j.size(); ++s) {
      const std::string at = fmt::format("sequences/{}", s);
      pasa::require_object(j[s], at);
      pasa::check_keys(j[s], {"q_len", "ctx_len", "shared_blocks", "block_table"}, at);
      for (const char* key : {"q_len", "ctx_len", "block_table"})
        if (!j[s].contains(key)) pasa::json_fail(at, fmt::format("missing \"{}\"", key));
      pasa::PagedSequence sq;
      pasa::read_size(j[s], "q_len", at, sq.q_len);
      pasa::read_size(j[s], "ctx_len", at, sq.ctx_len);
      pasa::read_size(j[s], "shared_blocks", at, sq.shared_blocks);
      const json& t = j[s].at("block_table");
      if (!t.is_array()) pasa::json_fail(at + "/block_table", "expected a list of cache block indices");
      for (std::size_t b = 0; b < t.size(); ++b) sq.block_table.push_back(pasa::as_size(t[b], fmt::format("{}/block_table/{}", at, b)));
      seqs.push_back(std::move(sq));
    }
  }

  // Without the GIL. The cache's values as floats: validate(PagedBatch) refuses a format wider than fp32.
  pasa::PagedBatch batch() const {
    std::unique_ptr<pasa::Format> f;
    if (format) f = std::make_unique<pasa::Format>(named("format", *format, pasa::format_by_name));
    pasa::PagedBatch pb;
    pb.q = q.tensor(f.get());
    const pasa::Tensor kt = k.tensor(f.get() ? f.get() : &pb.q.format), vt = v.tensor(f.get() ? f.get() : &pb.q.format);
    if (!(kt.shape == vt.shape))
      throw InputError("k_cache, v_cache: the two arrays' shapes differ");
    pasa::PagedCache& c = pb.cache;
    c.num_blocks = kt.shape.B, c.Nkv = kt.shape.N, c.block_size = kt.shape.S, c.D = kt.shape.D;
    c.format = pb.q.format;
    const pasa::Format& cf = c.format;
    if (!(cf.p <= 24 && cf.emax <= 127 && cf.emin() - (cf.p - 1) >= -149))
      throw InputError(fmt::format("format: the cache holds floats: give format= of at most fp32's width (the "
                                   "arrays are {}; generate() returns the problem's format)", cf.name));
    c.k.assign(kt.data.begin(), kt.data.end());
    c.v.assign(vt.data.begin(), vt.data.end());
    pb.seqs = seqs;
    pb.scale = scale;
    pasa::validate(pb);
    return pb;
  }
};

py::tuple unified_attention_py(const py::object& q, const py::object& k, const py::object& v, const py::object& sequences,
                               const std::optional<std::string>& algorithm, const py::object& alloc,
                               const std::optional<double>& beta, const py::object& s1, const py::object& s2,
                               const py::object& seed, const py::object& spec, const std::optional<std::string>& format,
                               const std::optional<double>& scale, const py::object& threads) {
  const pasa::AlgorithmSpec algo =
      algorithm_spec("pasa.unified_attention", spec, algorithm, alloc, beta, opt_size_arg("s1", s1),
                     opt_size_arg("s2", s2), opt_int_arg("seed", seed), "fa2", "fa_fp16_fp32");
  const PagedArrays arrays(q, k, v, sequences, format, scale_value(scale));
  const int t = threads_arg(threads);
  pasa::Shape shape;
  pasa::AttentionOutput out = interruptible([&] {
    const pasa::PagedBatch pb = arrays.batch();
    shape = pb.q.shape;
    return pasa::unified_attention(pb, algo, t);
  });
  return py::make_tuple(tensor_out(std::move(out.o), 4), lse_out(std::move(out.lse), shape, 4));
}

py::dict unified_golden_py(const py::object& q, const py::object& k, const py::object& v, const py::object& sequences,
                           const std::optional<std::string>& format, const std::optional<double>& scale, const py::object& precision_bits,
                           bool fast, const py::object& threads) {
  const PagedArrays arrays(q, k, v, sequences, format, scale_value(scale));
  const pasa::GoldenOptions opt = golden_options(precision_bits, fast, threads);
  pasa::Shape shape;
  pasa::Golden g = interruptible([&] {
    const pasa::PagedBatch pb = arrays.batch();
    shape = pb.q.shape;
    return pasa::unified_golden(pb, opt);
  });
  return golden_dict(std::move(g), shape, 4);
}

py::array_t<double> unified_baseline_py(const py::object& q, const py::object& k, const py::object& v,
                                        const py::object& sequences, const std::optional<std::string>& format,
                                        const std::optional<double>& scale, const py::object& threads) {
  const PagedArrays arrays(q, k, v, sequences, format, scale_value(scale));
  const int t = threads_arg(threads);
  pasa::Tensor b = interruptible([&] { return pasa::unified_baseline(arrays.batch(), t); });
  return tensor_out(std::move(b), 4);
}

py::dict unified_score_stats_py(const py::object& q, const py::object& k, const py::object& v, const py::object& sequences,
                                const std::string& score_format, const std::optional<std::string>& format, const std::optional<double>& scale,
                                const py::object& threads) {
  const pasa::Format sf = named("score_format", score_format, pasa::format_by_name);
  const PagedArrays arrays(q, k, v, sequences, format, scale_value(scale));
  const int t = threads_arg(threads);
  const pasa::ScoreStats st = interruptible([&] { return pasa::unified_score_stats(arrays.batch(), sf, t); });
  return numbers_as_floats(pasa::to_json(st));
}

// A paged problem's inputs as generate() returns them: the arguments of unified_attention().
py::dict generate_paged_py(const pasa::ProblemSpec& spec, int t) {
  pasa::PagedBatch pb = interruptible([&] { return pasa::generate_paged(spec, t); });
  const pasa::PagedCache& c = pb.cache;
  auto cache = [&](const std::vector<float, pasa::HugePageAllocator<float>>& x) {
    return to_numpy(std::vector<double>(x.begin(), x.end()),
                    {static_cast<py::ssize_t>(c.num_blocks), static_cast<py::ssize_t>(c.Nkv),
                     static_cast<py::ssize_t>(c.block_size), static_cast<py::ssize_t>(c.D)});
  };
  py::dict d;
  d["k_cache"] = cache(c.k);
  d["v_cache"] = cache(c.v);
  d["q"] = tensor_out(std::move(pb.q), 4);
  py::list seqs;
  for (const pasa::PagedSequence& s : pb.seqs) {
    py::dict q;
    q["q_len"] = s.q_len;
    q["ctx_len"] = s.ctx_len;
    q["shared_blocks"] = s.shared_blocks;
    q["block_table"] = py::cast(s.block_table);
    seqs.append(q);
  }
  d["sequences"] = seqs;
  d["format"] = spec.format;
  d["scale"] = pb.scale == 0 ? py::object(py::none()) : py::float_(pb.scale);  // (None: 1/sqrt(D))
  return d;
}

py::dict generate(const py::object& problem, const py::object& threads) {
  const pasa::ProblemSpec spec = pasa::problem_from_json(json_argument(problem, "problem"), "problem:");
  const int t = threads_arg(threads);
  if (spec.paged) {
    pasa::check_memory(pasa::inputs_bytes(spec), 0, "problem", "a paged problem's Q (float64) and cache (float32)");
    return generate_paged_py(spec, t);
  }
  // Size first, as pasa-attn --problem: the three tensors, before one element is drawn (core/memory.hpp).
  pasa::check_memory(pasa::inputs_bytes(spec), 0, "problem",
                     fmt::format("Q ({}, {}, {}, {}), K/V ({}, {}, {}, {}) as float64", spec.B, spec.Nq, spec.Sq,
                                 spec.D, spec.B, spec.Nkv, spec.Skv, spec.D));
  pasa::AttentionInputs in = interruptible([&] { return pasa::generate_inputs(spec, t); });
  py::dict d;
  d["q"] = tensor_out(std::move(in.q), 4);
  d["k"] = tensor_out(std::move(in.k), 4);
  d["v"] = tensor_out(std::move(in.v), 4);
  d["format"] = spec.format;
  d["scale"] = in.scale == 0 ? py::object(py::none()) : py::float_(in.scale);  // (None: 1/sqrt(D))
  d["causal"] = in.mask.causal;
  d["kv_len"] = in.mask.kv_len.empty() ? py::object(py::none()) : py::cast(in.mask.kv_len);
  // The decode inputs too (dropping them gave attention(**inputs) another problem than pasa-attn's).
  d["pse"] = in.pse.data.empty() ? py::object(py::none()) : py::object(tensor_out(std::move(in.pse), 4));
  if (in.mask.select.empty()) {
    d["select"] = py::none();
  } else {
    py::array_t<bool> sel({static_cast<py::ssize_t>(spec.B), static_cast<py::ssize_t>(spec.Sq),
                           static_cast<py::ssize_t>(spec.Skv)});
    bool* out = sel.mutable_data();
    for (std::size_t i = 0; i < in.mask.select.size(); ++i) out[i] = in.mask.select[i] != 0;
    d["select"] = sel;
  }
  d["select_value"] = in.mask.select_value;
  d["allow_nonfinite"] = in.allow_nonfinite;
  return d;
}

}  // namespace

void bind_paged(py::module_& m) {
  using py::arg;
  m.def("generate", &generate, arg("problem"), py::kw_only(), arg("threads") = py::none(),
        R"doc(generate(problem, *, threads=None) -> dict

Seeded inputs from a problem description (a dict or its JSON text: {"shape": {"B", "Nq", "Nkv", "Sq", "Skv",
"D"}, "format", "scale", "causal", "kv_len", "seed", "generator": {"kind": "uniform"|"hybrid"|"resonance",
"x0", "am", ...}, "q"/"k"/"v": {...},
"pse": {generator keys} or {"npy": file}, "select": {"p", "value"} or {"npy": file, "value"}, "kv_len": [...] or
{"npy": file}; relative file names from the working directory), the same bits as pasa-attn --problem.
Returns {"q", "k", "v" (float64 (B, N, S, D), values of "format"), "format", "scale", "causal", "kv_len",
"pse" (float64 (B or 1, Nq, Sq, Skv) or None), "select" (bool (B, Sq, Skv) or None), "select_value",
"allow_nonfinite"}: pass it on as pasa.attention(**inputs, algorithm=...), pasa.golden(**inputs).
A paged problem ({"kind": "paged", "block_size", "sequences": [...], ...}, docs/decode.md) returns {"q",
"k_cache", "v_cache" (float64 (num_blocks, Nkv, block_size, D)), "sequences" (dicts with the resolved
"block_table"), "format", "scale"}: the arguments of unified_attention(), unified_golden(), ...)doc");

  m.def("unified_attention", &unified_attention_py, arg("q"), arg("k_cache"), arg("v_cache"), arg("sequences"),
        py::kw_only(), arg("algorithm") = py::none(), arg("alloc") = py::none(), arg("beta") = py::none(),
        arg("s1") = py::none(), arg("s2") = py::none(), arg("seed") = py::none(), arg("spec") = py::none(),
        arg("format") = py::none(), arg("scale") = py::none(), arg("threads") = py::none(),
        R"doc(unified_attention(q, k_cache, v_cache, sequences, *, algorithm="fa2", alloc="fa_fp16_fp32", beta=0.984497,
                  s1=128, s2=128, seed=0, spec=None, format=None, scale=None, threads=None) -> (out, lse)

Unified attention ([UA]) over a paged KV cache, as pasa-attn runs a "kind": "paged" problem (docs/decode.md):
a batch of sequences, each with q_len new tokens at the end of ctx_len tokens held in the cache blocks its
block table names; each new token attends causally to its context in up to three parts (shared prefix,
unique cached blocks, the new tokens) merged in the allocation's merge stage. generate() of a paged problem
returns every argument: pasa.unified_attention(**pasa.generate(problem), spec=...).
q: (1, Nq, Σ q_len, D) (or (Nq, Σ q_len, D)), the sequences' new tokens in order. k_cache, v_cache:
   (num_blocks, Nkv, block_size, D). Dtypes and format= as attention(); the cache's format must fit fp32.
sequences: a list of dicts {"q_len", "ctx_len", "shared_blocks" (optional, default 0), "block_table"}.
algorithm, alloc, beta, s1, s2, seed, spec: as attention(); the algorithm must be fa2 or pasa.
Returns out (float64 (1, Nq, Σ q_len, D), values of the allocation's "out" format) and lse (1, Nq, Σ q_len).)doc");

  m.def("unified_golden", &unified_golden_py, arg("q"), arg("k_cache"), arg("v_cache"), arg("sequences"),
        py::kw_only(), arg("format") = py::none(), arg("scale") = py::none(), arg("precision_bits") = 128,
        arg("fast") = true, arg("threads") = py::none(),
        R"doc(unified_golden(q, k_cache, v_cache, sequences, *, format=None, scale=None, precision_bits=128, fast=True,
               threads=None) -> dict

The MPFR golden of unified_attention()'s batch (arguments as there): every sequence's golden on its gathered
dense inputs, concatenated. Returns the dict golden() returns (guaranteed_bits: the worst sequence's).)doc");

  m.def("unified_baseline", &unified_baseline_py, arg("q"), arg("k_cache"), arg("v_cache"), arg("sequences"),
        py::kw_only(), arg("format") = py::none(), arg("scale") = py::none(), arg("threads") = py::none(),
        R"doc(unified_baseline(q, k_cache, v_cache, sequences, *, format=None, scale=None, threads=None)

uniform_baseline() of unified_attention()'s batch: every new token's row the mean of V over the keys it
sees (float64, q's shape); metrics(out, golden, baseline) then gives pasa-attn's metrics.)doc");

  m.def("unified_score_stats", &unified_score_stats_py, arg("q"), arg("k_cache"), arg("v_cache"), arg("sequences"),
        py::kw_only(), arg("score_format") = "fp16", arg("format") = py::none(), arg("scale") = py::none(),
        arg("threads") = py::none(),
        R"doc(unified_score_stats(q, k_cache, v_cache, sequences, *, score_format="fp16", format=None, scale=None,
                    threads=None) -> dict

score_stats() of unified_attention()'s batch (over every sequence's visible scores), as pasa-attn prints
them for a paged problem.)doc");
}

}  // namespace pasa_py
