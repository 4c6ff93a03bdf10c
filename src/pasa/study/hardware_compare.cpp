#include "pasa/study/hardware_compare.hpp"
#include "pasa/io/input_file.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <fstream>
#include <iostream>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "pasa/attention/algorithm.hpp"
#include "pasa/attention/gemm.hpp"
#include "pasa/io/npy.hpp"
#include "pasa/core/error.hpp"
#include "pasa/core/memory.hpp"
#include "pasa/exact/golden.hpp"
#include "pasa/exact/metrics.hpp"
#include "pasa/inputs/attention_inputs.hpp"
#include "pasa/io/algorithm_json.hpp"
#include "pasa/io/allocation_json.hpp"
#include "pasa/io/csv.hpp"
#include "pasa/io/json_check.hpp"
#include "pasa/io/tensor_io.hpp"

namespace pasa {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Position of a value on the ordered line of the format's values: the storage bits as sign-magnitude
// integer, so that adjacent values differ by 1 and ±0 both map to 0 (inf is max_finite + 1).
std::int64_t ordinal(double x, const Format& f) {
  const std::uint64_t bits = encode(x, f);
  const int w = f.storage_bits();
  const std::uint64_t mag = bits & ((std::uint64_t{1} << (w - 1)) - 1);
  return (bits >> (w - 1)) ? -static_cast<std::int64_t>(mag) : static_cast<std::int64_t>(mag);
}

struct HwConfig {
  std::string label, input;  // input: "fp16" or "bf16"
  AlgorithmSpec spec;
};

std::vector<HwConfig> read_configs(const fs::path& dir) {
  if (!fs::is_directory(dir)) throw InputError(fmt::format("{}: not a folder of hardware configs", dir.string()));
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".json") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  if (files.empty()) throw InputError(fmt::format("{}: no <label>.json hardware configs", dir.string()));
  std::vector<HwConfig> out;
  for (const auto& f : files) {
    const std::string where = f.string() + ":";
    const json j = read_json_file(f);
    require_object(j, where);
    check_keys(j, {"description", "input", "algorithm"}, where);
    HwConfig c;
    c.label = f.stem().string();
    if (!j.contains("input") || !j.contains("algorithm"))
      throw InputError(fmt::format("{}: needs \"input\" (fp16 or bf16) and \"algorithm\"", where + "/"));
    read_string(j, "input", where, c.input);
    if (c.input != "fp16" && c.input != "bf16")
      throw InputError(fmt::format("{}/input: expected \"fp16\" or \"bf16\", got \"{}\"", where, c.input));
    c.spec = algorithm_from_json(j["algorithm"], where + "/algorithm");
    out.push_back(std::move(c));
  }
  return out;
}

struct CaseInfo {
  std::string name, generator;
  double x0 = 0, am = 0;
  std::uint64_t seed = 0;
  std::map<std::string, std::vector<std::string>> files;  // input kind → q, k, v file names
};

std::vector<CaseInfo> read_manifest(const fs::path& file) {
  const std::string where = file.string() + ":";
  const json j = read_json_file(file);
  if (!j.is_object() || !j.contains("cases") || !j["cases"].is_array())
    throw InputError(fmt::format("{}/cases: missing or not an array", where));
  std::vector<CaseInfo> out;
  for (std::size_t i = 0; i < j["cases"].size(); ++i) {
    const json& c = j["cases"][i];
    const std::string p = fmt::format("{}/cases/{}", where, i);
    require_object(c, p);
    CaseInfo ci;
    read_string(c, "name", p, ci.name);
    read_string(c, "generator", p, ci.generator);
    read_number(c, "x0", p, ci.x0);
    read_number(c, "Am", p, ci.am);
    read_u64(c, "seed", p, ci.seed);
    if (ci.name.empty()) throw InputError(fmt::format("{}/name: missing", p));
    if (!c.contains("files") || !c["files"].is_object())
      throw InputError(fmt::format("{}/files: missing or not an object", p));
    for (const auto& [kind, names] : c["files"].items()) {
      if (!names.is_array() || names.size() != 3)
        throw InputError(fmt::format("{}/files/{}: expected [q, k, v] file names", p, kind));
      for (const auto& n : names) ci.files[kind].push_back(n.get<std::string>());
    }
    out.push_back(std::move(ci));
  }
  return out;
}

AttentionInputs load_case_inputs(const fs::path& dir, const CaseInfo& c, const std::string& kind,
                                 const HwAttentionOptions& opt) {
  const auto it = c.files.find(kind);
  if (it == c.files.end())
    throw InputError(fmt::format("case {}: manifest lists no \"{}\" input files", c.name, kind));
  {
    // Size first, from the headers (core/memory.hpp): each tensor's file bytes and doubles, the golden's
    // memory, and three outputs of Q's size (the golden's, the emulator's, the GPU's) with the emulator's
    // working copies counted as one more.
    std::size_t need = 0, q_elements = 0;
    for (int t = 0; t < 3; ++t) {
      const NpyArray h = read_npy_header(dir / it->second[t]);
      const std::size_t n = npy_element_count(h);
      if (t == 0) q_elements = n;
      need = sat_add(need, sat_add(sat_mul(n, npy_itemsize(h.dtype)), sat_mul(n, sizeof(double))));
    }
    need = sat_add(need, sat_product(4 * sizeof(double), q_elements));
    check_memory(need, opt.max_memory, "case " + c.name, (dir / it->second[0]).string() + " and its K, V");
  }
  const Format f = format_by_name(kind);
  AttentionInputs in;
  Tensor* dst[3] = {&in.q, &in.k, &in.v};
  for (int t = 0; t < 3; ++t) {
    const fs::path p = dir / it->second[t];
    LoadedTensor lt = load_tensor(p, &f);
    if (lt.rounded) throw InputError(fmt::format("{}: {} elements are not {} values", p.string(), lt.rounded, kind));
    *dst[t] = std::move(lt.tensor);
  }
  validate(in);
  return in;
}

}  // namespace

UlpHistogram ulp_histogram(const Tensor& a, const Tensor& b) {
  if (!(a.shape == b.shape) || a.data.size() != b.data.size())
    throw InputError("ulp_histogram: the two outputs differ in shape");
  if (!(a.format == b.format)) throw InputError("ulp_histogram: the two outputs differ in format");
  UlpHistogram h;
  h.elements = a.data.size();
  for (std::size_t i = 0; i < a.data.size(); ++i) {
    const double x = a.data[i], y = b.data[i];
    if (std::isnan(x) || std::isnan(y)) {
      (std::isnan(x) && std::isnan(y) ? h.identical : h.nan_mismatch) += 1;
      continue;
    }
    const std::int64_t dx = ordinal(x, a.format), dy = ordinal(y, a.format);
    const std::uint64_t d = static_cast<std::uint64_t>(dx > dy ? dx - dy : dy - dx);
    h.max_ulp = std::max(h.max_ulp, d);
    if (d == 0) ++h.identical;
    else if (d == 1) ++h.ulp1;
    else if (d <= 4) ++h.ulp2_4;
    else ++h.ulp_over4;
  }
  return h;
}

std::vector<HwAttentionRow> compare_attention(const HwAttentionOptions& opt) {
  const std::vector<HwConfig> configs = read_configs(opt.configs_dir);
  const std::vector<CaseInfo> cases = read_manifest(opt.gpu_dir / "manifest.json");
  std::vector<HwAttentionRow> rows;
  const double nan = std::nan("");
  for (const CaseInfo& c : cases) {
    const fs::path dir = opt.gpu_dir / c.name;
    std::map<std::string, std::pair<AttentionInputs, Golden>> by_input;  // golden once per case and input kind
    for (const HwConfig& cfg : configs) {
      HwAttentionRow r;
      r.case_name = c.name;
      r.generator = c.generator;
      r.x0 = c.x0;
      r.am = c.am;
      r.seed = c.seed;
      r.label = cfg.label;
      r.input = cfg.input;
      const fs::path out_file = dir / ("out_" + cfg.label + ".npy");
      if (!fs::exists(out_file)) {
        r.status = "missing " + out_file.string();
        r.rmse_gpu = r.rmse_emu = r.ratio = r.nan_pct_gpu = r.nan_pct_emu = nan;
        rows.push_back(std::move(r));
        continue;
      }
      auto it = by_input.find(cfg.input);
      if (it == by_input.end()) {
        AttentionInputs in = load_case_inputs(dir, c, cfg.input, opt);
        GoldenOptions go;
        go.threads = opt.threads;
        Golden g = golden_attention(in, go);
        it = by_input.emplace(cfg.input, std::make_pair(std::move(in), std::move(g))).first;
      }
      const AttentionInputs& in = it->second.first;
      const Golden& golden = it->second.second;
      const AttentionOutput emu = run_attention(in, cfg.spec, opt.threads);
      LoadedTensor gpu = load_tensor(out_file, &emu.o.format);
      if (gpu.rounded)
        throw InputError(fmt::format("{}: {} elements are not values of the emulated output format {}",
                                     out_file.string(), gpu.rounded, emu.o.format.name));
      if (!(gpu.tensor.shape == emu.o.shape))
        throw InputError(fmt::format("{}: shape differs from the inputs' (B, Nq, Sq, D)", out_file.string()));
      const Metrics mg = compare_outputs(gpu.tensor, golden.o), me = compare_outputs(emu.o, golden.o);
      r.out_format = emu.o.format.name;
      r.rmse_gpu = mg.rmse;
      r.rmse_emu = me.rmse;
      r.ratio = me.rmse / mg.rmse;
      r.nan_pct_gpu = mg.nan_pct;
      r.nan_pct_emu = me.nan_pct;
      r.ulps = ulp_histogram(emu.o, gpu.tensor);
      r.status = "ok";
      rows.push_back(std::move(r));
    }
  }
  return rows;
}

HwGemmResult compare_gemm(const HwGemmOptions& o) {
  {
    // Size first, from the headers (core/memory.hpp): each file's bytes and its doubles, the emulated C and
    // the GPU's C as tensors, and one transposed B.
    std::size_t need = 0;
    for (const fs::path* p : {&o.a, &o.b, &o.c}) {
      const NpyArray h = read_npy_header(*p);
      const std::size_t n = npy_element_count(h);
      need = sat_add(need, sat_add(sat_mul(n, npy_itemsize(h.dtype)), sat_mul(n, sizeof(double) * (p == &o.c ? 3 : 1))));
    }
    check_memory(need, o.max_memory, "this comparison", o.a.string() + ", " + o.b.string() + ", " + o.c.string());
  }
  const NpyArray na = read_npy(o.a), nb = read_npy(o.b), nc = read_npy(o.c);
  auto dims = [](const NpyArray& x, const fs::path& p) {
    if (x.shape.size() == 2) return std::vector<std::size_t>{1, x.shape[0], x.shape[1]};  // one product
    if (x.shape.size() != 3)
      throw InputError(fmt::format("{}: expected a (rows, columns) or (batch, rows, columns) array, got {} dimensions",
                                   p.string(), x.shape.size()));
    return x.shape;
  };
  const auto sa = dims(na, o.a), sb = dims(nb, o.b), sc = dims(nc, o.c);
  const std::size_t Q = sa[0], M = sa[1], K = sa[2], N = sb[1];
  if (sb[0] != Q || sb[2] != K || sc[0] != Q || sc[1] != M || sc[2] != N)
    throw InputError(fmt::format("{}, {}, {}: shapes ({}, {}, {}), ({}, {}, {}), ({}, {}, {}) are not A (q, m, k), "
                                 "Bt (q, n, k), C (q, m, n)",
                                 o.a.string(), o.b.string(), o.c.string(), sa[0], sa[1], sa[2], sb[0], sb[1], sb[2],
                                 sc[0], sc[1], sc[2]));
  std::vector<double> A = npy_values(na, &o.a_format), Bt = npy_values(nb, &o.b_format),
                      Cg = npy_values(nc, &o.out_format);
  Format fa = o.a_format, fb = o.b_format;
  if (o.convert) {
    for (double& x : A) x = round(x, o.convert->first, o.convert->second);
    for (double& x : Bt) x = round(x, o.convert->first, o.convert->second);
    fa = fb = o.convert->first;
  }
  const GemmSpec g{fa, fb, StageSpec{format_by_name("fp32")}, StageSpec{o.out_format}, o.model};
  Tensor gpu(Shape{1, Q, M, N}, o.out_format), emu(Shape{1, Q, M, N}, o.out_format);
  gpu.data.assign(Cg.begin(), Cg.end());
  std::vector<double> B(K * N);
  for (std::size_t q = 0; q < Q; ++q) {
    for (std::size_t t = 0; t < K; ++t)
      for (std::size_t j = 0; j < N; ++j) B[t * N + j] = Bt[(q * N + j) * K + t];
    gemm(g, M, N, K, A.data() + q * M * K, K, B.data(), N, emu.data.data() + q * M * N, N);
  }
  HwGemmResult r;
  r.ulps = ulp_histogram(emu, gpu);
  for (std::size_t x = 0; x < Cg.size() && r.mismatches.size() < o.max_mismatches; ++x)
    if (!(emu.data[x] == Cg[x] || (std::isnan(emu.data[x]) && std::isnan(Cg[x]))))
      r.mismatches.push_back({x / (M * N), x / N % M, x % N, Cg[x], emu.data[x]});
  return r;
}

void check_batched_gemm(const GemmSpec& spec, std::size_t batch, std::size_t m, std::size_t n, std::size_t k,
                        std::size_t buffer_bytes, std::size_t max_memory, const std::string& model_where) {
  if (spec.model.kind == GemmKind::tensor_core) {
    for (const auto& [what, f] : {std::pair<const char*, const Format*>{"A", &spec.a_format}, {"B", &spec.b_format}})
      if (f->p > kTensorCoreMaxOperandBits)
        throw InputError(fmt::format("{}: a tensor-core model takes operands of at most {} bits (the matrix engines' "
                                     "widest is tf32's 11); {} is {} ({} bits): use ordered, chunked or every_op",
                                     model_where, kTensorCoreMaxOperandBits, what, f->name, f->p));
    const TensorCore& tc = spec.model.tc;
    for (RoundMode r : {spec.acc.round.mode, tc.block_round})
      if (r == RoundMode::stochastic || r == RoundMode::odd)
        throw InputError(fmt::format("{}: a tensor-core model rounds with rne, rna, rz, ru or rd, not {}", model_where,
                                     round_mode_name(r)));
  }
  const std::size_t doubles = sat_add(sat_mul(batch, sat_add(sat_mul(m, k), sat_mul(k, n))), sat_mul(2, sat_mul(batch, sat_mul(m, n))));
  check_memory(sat_add(sat_mul(doubles, sizeof(double)), buffer_bytes), max_memory, "this GEMM",
               fmt::format("A ({} x {} x {}), B ({} x {} x {}) and C ({} x {} x {}) as doubles", batch, m, k, batch, k,
                           n, batch, m, n));
}

std::vector<double> batched_gemm(const GemmSpec& spec, std::size_t batch, std::size_t m, std::size_t n, std::size_t k,
                                 std::span<const double> A, std::span<const double> B) {
  if (A.size() != batch * m * k || B.size() != batch * k * n)
    throw std::invalid_argument("batched_gemm: operand sizes do not match the shape");
  std::vector<double> C(batch * m * n);
  RandomBits rng(0);  // stochastic rounding of the accumulator or output: one stream, in product order
  for (std::size_t q = 0; q < batch; ++q)
    gemm(spec, m, n, k, A.data() + q * m * k, k, B.data() + q * k * n, n, C.data() + q * m * n, n, &rng);
  return C;
}

GemmModel h100_gemm_model(const Format& input) {
  const std::string& f = input.name;
  std::string preset;
  if (f == "fp16" || f == "bf16" || f == "tf32") preset = "h100_" + f;
  else if (f == "fp8_e4m3fn") preset = "h100_e4m3";
  else if (f == "fp8_e5m2") preset = "h100_e5m2";
  else
    throw InputError(fmt::format("no H100 tensor-core model for {} inputs (known: fp16, bf16, tf32, fp8_e4m3fn, "
                                 "fp8_e5m2); name the model", f));
  return GemmModel{GemmKind::tensor_core, 16, tensor_core_preset(preset)};
}

GemmModel gemm_model_by_name(const std::string& name, const Format& input, const std::string& where) {
  const auto first = name.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && name[first] == '{') return gemm_model_from_json(parse_json_text(name, where), where);
  // A model by its registry name (kGemmKinds) with its default parameters; tensor_core needs a named model.
  if (const auto k = enum_by_name(kGemmKinds, name); k && *k != GemmKind::tensor_core) return GemmModel{*k};
  if (name == "h100") return at_place(where, [&] { return h100_gemm_model(input); });
  const auto names = tensor_core_preset_names();
  if (std::find(names.begin(), names.end(), name) != names.end())
    return GemmModel{GemmKind::tensor_core, 16, tensor_core_preset(name)};
  std::string plain;
  for (const auto& e : kGemmKinds)
    if (e.value != GemmKind::tensor_core) plain += std::string(e.name) + ", ";
  throw InputError(fmt::format("{}: unknown GEMM model \"{}\"; known: {}h100 (by the input format), {}, or a \"gemm\" "
                               "JSON object", where, name, plain, fmt::join(names, ", ")));
}

std::string hw_attention_csv(const std::vector<HwAttentionRow>& rows) {
  std::string s = csv_line({"case", "generator", "x0", "Am", "seed", "label", "input", "out_format", "rmse_gpu",
                            "rmse_emu", "ratio_emu_gpu", "nan_pct_gpu", "nan_pct_emu", "elements", "identical",
                            "ulp_1", "ulp_2_4", "ulp_over_4", "nan_mismatch", "identical_pct", "within_1ulp_pct",
                            "max_ulp", "status"});
  for (const auto& r : rows) {
    const auto& h = r.ulps;
    const double e = static_cast<double>(h.elements);
    s += csv_line({r.case_name, r.generator, csv_number(r.x0), csv_number(r.am), std::to_string(r.seed), r.label,
                   r.input, r.out_format, csv_number(r.rmse_gpu), csv_number(r.rmse_emu), csv_number(r.ratio),
                   csv_number(r.nan_pct_gpu), csv_number(r.nan_pct_emu), std::to_string(h.elements),
                   std::to_string(h.identical), std::to_string(h.ulp1), std::to_string(h.ulp2_4),
                   std::to_string(h.ulp_over4), std::to_string(h.nan_mismatch),
                   csv_number(e ? 100.0 * static_cast<double>(h.identical) / e : std::nan("")),
                   csv_number(e ? 100.0 * static_cast<double>(h.identical + h.ulp1) / e : std::nan("")),
                   std::to_string(h.max_ulp), r.status});
  }
  return s;
}

Overflow torch_overflow(const Format&) {
  // fp16/bf16: IEEE round to nearest even, overflow to inf. float8_e5m2 (c10/util/Float8_e5m2.h): beyond the
  // range → inf. float8_e4m3fn (c10/util/Float8_e4m3fn.h): |x| >= 480 (and inf, NaN) → 0x7F|sign, a NaN; with
  // RNE that is every |x| > 464 (the midpoint of 448 and 480), pasa's Overflow::ieee for fp8_e4m3.
  return Overflow::ieee;
}

std::vector<HwConversionRow> compare_conversions(const HwConversionOptions& opt) {
  std::uint64_t first = 0, count = std::uint64_t{1} << 32;
  const fs::path range_file = opt.gpu_dir / "conv_range.json";
  if (fs::exists(range_file)) {
    const json j = read_json_file(range_file);
    const std::string where = range_file.string() + ":";
    require_object(j, where);
    read_u64(j, "first", where, first);
    read_u64(j, "count", where, count);
    if (count == 0 || first + count > (std::uint64_t{1} << 32))
      throw InputError(fmt::format("{}: first {} + count {} is outside 0 .. 2^32", where, first, count));
  }
  std::vector<HwConversionRow> rows;
  for (const char* name : {"fp16", "bf16", "fp8_e4m3", "fp8_e5m2"}) {
    const fs::path file = opt.gpu_dir / fmt::format("conv_{}.bin", name);
    if (!fs::exists(file)) continue;
    std::ifstream in = open_input_file(file);  // (first: a FIFO or device is refused before its size is asked)
    const Format f = format_by_name(name);
    const std::size_t width = static_cast<std::size_t>(f.storage_bits()) / 8;
    if (fs::file_size(file) != count * width)
      throw InputError(fmt::format("{}: {} bytes, expected {} ({} results of {} bytes)", file.string(),
                                   fs::file_size(file), count * width, count, width));
    HwConversionRow row;
    row.format = name;
    row.first = first;
    row.count = count;
    RoundOptions main_opt, other_opt;
    main_opt.overflow = torch_overflow(f);
    other_opt.overflow = main_opt.overflow == Overflow::ieee ? Overflow::saturate : Overflow::ieee;
    row.overflow = overflow_name(main_opt.overflow);
    row.other_overflow = overflow_name(other_opt.overflow);
    constexpr std::size_t kChunk = std::size_t{1} << 24, kPiece = std::size_t{1} << 16;
    std::vector<unsigned char> raw(kChunk * width);
    const std::size_t pieces_max = kChunk / kPiece;
    std::vector<std::uint64_t> mis(pieces_max), other(pieces_max);
    std::vector<std::vector<HwConversionMismatch>> found(pieces_max);
    for (std::uint64_t c0 = 0; c0 < count; c0 += kChunk) {
      const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(kChunk, count - c0));
      in.read(reinterpret_cast<char*>(raw.data()), static_cast<std::streamsize>(n * width));
      if (static_cast<std::size_t>(in.gcount()) != n * width)
        throw InputError(fmt::format("{}: read failed at byte {}", file.string(), c0 * width));
      const std::size_t pieces = (n + kPiece - 1) / kPiece;
      parallel_for(pieces, opt.threads, [&](std::size_t p) {
        const std::size_t i0 = p * kPiece, m = std::min(kPiece, n - i0);
        std::vector<float> x(m), y(m);
        for (std::size_t i = 0; i < m; ++i) x[i] = std::bit_cast<float>(static_cast<std::uint32_t>(first + c0 + i0 + i));
        round_span(std::span<const float>(x), std::span<float>(y), f, main_opt);
        mis[p] = other[p] = 0;
        found[p].clear();
        for (std::size_t i = 0; i < m; ++i) {
          const unsigned char* b = &raw[(i0 + i) * width];
          const std::uint64_t g = width == 2 ? static_cast<std::uint64_t>(b[0] | (b[1] << 8)) : b[0];
          const bool gnan = std::isnan(decode(g, f));
          auto differs = [&](double v) { return std::isnan(v) ? !gnan : (gnan || encode(v, f) != g); };
          const double v = y[i];
          if (differs(v)) {
            ++mis[p];
            if (found[p].size() < 20) found[p].push_back({std::bit_cast<std::uint32_t>(x[i]), encode(v, f), g});
          }
          // The policies differ only where the result overflows (an inf, or e4m3's NaN, from a non-NaN input).
          double w = v;
          if (!std::isfinite(v) && !std::isnan(x[i])) w = round(static_cast<double>(x[i]), f, other_opt);
          other[p] += differs(w);
        }
      });
      for (std::size_t p = 0; p < pieces; ++p) {
        row.mismatches += mis[p];
        row.other_mismatches += other[p];
        for (const auto& fm : found[p])
          if (row.first_mismatches.size() < 20) row.first_mismatches.push_back(fm);
      }
    }
    rows.push_back(std::move(row));
  }
  if (rows.empty())
    throw InputError(fmt::format("{}: no conv_<fmt>.bin (fmt: fp16, bf16, fp8_e4m3, fp8_e5m2)", opt.gpu_dir.string()));
  return rows;
}

std::string hw_conversions_csv(const std::vector<HwConversionRow>& rows) {
  std::string s = csv_line({"row", "format", "first", "count", "overflow", "mismatches", "other_overflow",
                            "other_mismatches", "input_bits", "pasa_bits", "gpu_bits"});
  for (const auto& r : rows) {
    s += csv_line({"summary", r.format, std::to_string(r.first), std::to_string(r.count), r.overflow,
                   std::to_string(r.mismatches), r.other_overflow, std::to_string(r.other_mismatches), "", "", ""});
    const int hex = r.format == "fp16" || r.format == "bf16" ? 4 : 2;
    for (const auto& m : r.first_mismatches)
      s += csv_line({"mismatch", r.format, "", "", r.overflow, "", "", "", fmt::format("0x{:08x}", m.input),
                     fmt::format("0x{:0{}x}", m.pasa_bits, hex), fmt::format("0x{:0{}x}", m.gpu_bits, hex)});
  }
  return s;
}

}  // namespace pasa
