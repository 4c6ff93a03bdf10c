#include "pasa/attention/allocation.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "pasa/core/error.hpp"

namespace pasa {
namespace {

// The stage names as strings (stage_name returns a reference), from the one table kStages.
const std::array<std::string, kStageCount>& names() {
  static const std::array<std::string, kStageCount> n = [] {
    std::array<std::string, kStageCount> a;
    for (std::size_t i = 0; i < kStageCount; ++i) a[i] = std::string(kStages[i].name);
    return a;
  }();
  return n;
}

// Builds an allocation from a compact table: every stage `rest`, then the listed exceptions.
Allocation make(std::string name, const char* rest, std::initializer_list<std::pair<Stage, const char*>> except) {
  Allocation a;
  a.name = std::move(name);
  for (auto& s : a.stages) s.format = format_by_name(rest);
  for (const auto& [st, f] : except) a.spec(st).format = format_by_name(f);
  return a;
}

// Hardware practice for reductions: a GPU or NPU reduces fp16/bf16 rows in fp32 registers and rounds the
// result once (PyTorch's sum and mean of half tensors accumulate in float). The order is the warp pattern:
// 32 lanes, each summing a strided slice, combined by a shuffle-down tree (CUDA's __shfl_down_sync
// reduction; the fp16 result rarely depends on the order once the accumulator is fp32).
Allocation with_fp32_reductions(Allocation a) {
  for (Stage st : {Stage::sum, Stage::mean}) {
    StageSpec& s = a.spec(st);
    if (s.format.p < 24) s.reduce = Reduction{format_by_name("fp32"), ReduceOrder::blocked, 32};
  }
  return a;
}

// The paper's allocations with the low-precision type `lp` (fp16 or bf16) for the inputs.
// Fig. 1: inputs and P in lp, GEMMs accumulate fp32, everything else fp32, output cast to lp.
Allocation fig1(std::string name, const char* lp) {
  return make(std::move(name), "fp32",
              {{Stage::q, lp}, {Stage::k, lp}, {Stage::v, lp}, {Stage::p, lp}, {Stage::k_shift, lp}, {Stage::out, lp}});
}
// Fig. 2: as Fig. 1, but S leaves the QKᵀ GEMM in lp.
Allocation fig2(std::string name, const char* lp) {
  Allocation a = fig1(std::move(name), lp);
  a.spec(Stage::s).format = format_by_name(lp);
  return a;
}
// Fig. 3 and Alg. 1: every variable in lp; the matrix engine accumulates in fp32 and writes lp.
Allocation fig3(std::string name, const char* lp) {
  return make(std::move(name), lp, {{Stage::qk_acc, "fp32"}, {Stage::pv_acc, "fp32"}});
}

// The paper's allocations as named, every reduction in its stage's format (the strict model).
Allocation strict_preset(std::string_view name, const std::string& where) {
  if (name == "fp64") return make("fp64", "fp64", {});
  if (name == "fa_fp32") return fig1("fa_fp32", "fp16");
  if (name == "fa_fp16_fp32") return fig2("fa_fp16_fp32", "fp16");
  if (name == "fa_fp16") return fig3("fa_fp16", "fp16");
  if (name == "pasa_fp16") return fig3("pasa_fp16", "fp16");
  if (name == "fa_fp32_bf16") return fig1("fa_fp32_bf16", "bf16");
  if (name == "fa_bf16_fp32") return fig2("fa_bf16_fp32", "bf16");
  if (name == "fa_bf16") return fig3("fa_bf16", "bf16");
  if (name == "pasa_bf16") return fig3("pasa_bf16", "bf16");
  // FP8 counterparts (FA3 style): Q, K, V and P in E4M3 with saturation, the rest as Fig. 1 (fa_fp8) or
  // fp16 (pasa_fp8); the output in fp16.
  if (name == "fa_fp8" || name == "pasa_fp8") {
    Allocation a = name == "fa_fp8" ? fig1("fa_fp8", "fp8_e4m3fn") : fig3("pasa_fp8", "fp16");
    for (Stage st : {Stage::q, Stage::k, Stage::v, Stage::p, Stage::k_shift}) {
      a.spec(st).format = format_by_name("fp8_e4m3fn");
      a.spec(st).round.overflow = Overflow::saturate;
    }
    a.spec(Stage::out).format = format_by_name("fp16");
    return a;
  }
  throw InputError(fmt::format("{}unknown allocation preset \"{}\"; known presets: {}", where, name,
                               fmt::join(allocation_preset_names(), ", ")));
}

// The presets whose reductions change with fp32 accumulation (a sum or mean stage narrower than fp32) also
// exist as "<name>_strict".
constexpr std::string_view kStrict = "_strict";
const std::vector<std::string>& strict_bases() {
  static const std::vector<std::string> b = {"fa_fp16", "pasa_fp16", "fa_bf16", "pasa_bf16", "pasa_fp8"};
  return b;
}

// Every preset with narrow GEMM inputs also exists as "<name>_h100": the same stages with the GEMMs under the
// tensor-core model the H100 applies to its Q stage's format (tensor_core_preset "h100_<format>").
constexpr std::string_view kH100 = "_h100";
const std::vector<std::string>& h100_bases() {
  static const std::vector<std::string> b = {"fa_fp32",      "fa_fp16_fp32", "fa_fp16", "pasa_fp16", "fa_fp32_bf16",
                                             "fa_bf16_fp32", "fa_bf16",      "pasa_bf16", "fa_fp8", "pasa_fp8"};
  return b;
}

Allocation preset_or_throw(std::string_view name, const std::string& where);

Allocation h100_preset(std::string_view name, std::string_view base, const std::string& where) {
  Allocation a = preset_or_throw(base, where);
  a.name = std::string(name);
  const std::string& q = a.spec(Stage::q).format.name;
  a.gemm.kind = GemmKind::tensor_core;
  a.gemm.tc = tensor_core_preset(q == "fp8_e4m3fn" ? "h100_e4m3" : "h100_" + q);
  return a;
}

Allocation preset_or_throw(std::string_view name, const std::string& where) {
  if (name.size() > kH100.size() && name.ends_with(kH100)) {
    const std::string_view base = name.substr(0, name.size() - kH100.size());
    if (std::find(h100_bases().begin(), h100_bases().end(), base) != h100_bases().end())
      return h100_preset(name, base, where);
  }
  if (name.size() > kStrict.size() && name.ends_with(kStrict)) {
    const std::string_view base = name.substr(0, name.size() - kStrict.size());
    if (std::find(strict_bases().begin(), strict_bases().end(), base) != strict_bases().end()) {
      Allocation a = strict_preset(base, where);
      a.name = std::string(name);
      return a;
    }
  }
  return with_fp32_reductions(strict_preset(name, where));
}

// Split-KV as the kernels store it (MergeSpec): each part's normalised output in the output format, its lse
// in fp32, the combine in fp32 registers (FA2's combine kernel, vLLM's reduce kernel and FlashInfer's
// merge_state all compute in float, whatever the output type: an lse of ~1e4 in fp16 would lose the
// weights entirely). The fp64 preset is the exact reference, not a kernel: it merges the unnormalised
// parts (m_t, l_t, O_t), since an lse of a row whose scores are all ~-1e12 (a select value) holds log l_t
// only to 1e-4 even in fp64, and the fp64 run must equal the golden (docs/contract.md).
Allocation with_kernel_merge(Allocation a) {
  StageSpec& m = a.spec(Stage::merge);
  const bool exact = a.spec(Stage::o).format.p >= 53;
  const Format f = format_by_name(exact ? "fp64" : "fp32");
  m.format = f;
  m.merge.model = exact ? MergeModel::unnormalised : MergeModel::normalised_lse;
  m.merge.partial = a.spec(Stage::out).format;
  m.merge.lse = f;
  return a;
}

}  // namespace

bool StageSpec::operator==(const StageSpec& o) const {
  return format == o.format && round.mode == o.round.mode && round.overflow == o.round.overflow &&
         round.flush_input == o.round.flush_input && round.flush_output == o.round.flush_output &&
         reduce == o.reduce && via == o.via && merge == o.merge;
}

// The names of the registries' tables are string literals: their data() is NUL-terminated.
const char* merge_model_name(MergeModel m) { return enum_name(kMergeModels, m).data(); }

MergeModel merge_model_by_name(std::string_view name) {
  if (const auto m = enum_by_name(kMergeModels, name)) return *m;
  throw InputError(fmt::format("unknown merge model \"{}\"; known: {}", name, enum_names_joined(kMergeModels)));
}

const char* gemm_kind_name(GemmKind k) { return enum_name(kGemmKinds, k).data(); }

GemmKind gemm_kind_by_name(std::string_view name) {
  if (const auto k = enum_by_name(kGemmKinds, name)) return *k;
  throw InputError(fmt::format("unknown GEMM model \"{}\"; known: {}", name, enum_names_joined(kGemmKinds)));
}

std::array<StageSpec, kStageCount> uniform_stages(const Format& f) {
  std::array<StageSpec, kStageCount> s;
  for (auto& x : s) x.format = f;
  return s;
}

const char* reduce_order_name(ReduceOrder o) { return enum_name(kReduceOrders, o).data(); }

ReduceOrder reduce_order_by_name(std::string_view name) {
  if (const auto o = enum_by_name(kReduceOrders, name)) return *o;
  throw InputError(fmt::format("unknown reduction order \"{}\"; known: {}", name, enum_names_joined(kReduceOrders)));
}

const char* exp_via_name(ExpVia v) { return enum_name(kExpVias, v).data(); }

ExpVia exp_via_by_name(std::string_view name) {
  if (const auto v = enum_by_name(kExpVias, name)) return *v;
  throw InputError(fmt::format("unknown exp evaluation \"{}\"; known: {}", name, enum_names_joined(kExpVias)));
}

std::vector<std::string> stage_names() { return {names().begin(), names().end()}; }
const std::string& stage_name(Stage s) { return names()[static_cast<std::size_t>(s)]; }

Stage stage_by_name(std::string_view name) {
  if (const auto s = enum_by_name(kStages, name)) return *s;
  throw InputError(fmt::format("unknown allocation stage \"{}\"; known stages: {}", name, enum_names_joined(kStages)));
}

Format& Allocation::stage(std::string_view n) { return spec(stage_by_name(n)).format; }
const Format& Allocation::stage(std::string_view n) const { return spec(stage_by_name(n)).format; }
StageSpec& Allocation::spec(std::string_view n) { return spec(stage_by_name(n)); }
const StageSpec& Allocation::spec(std::string_view n) const { return spec(stage_by_name(n)); }

std::vector<std::string> allocation_preset_names() {
  std::vector<std::string> n = {"fp64",         "fa_fp32", "fa_fp16_fp32", "fa_fp16", "pasa_fp16", "fa_fp32_bf16",
                                "fa_bf16_fp32", "fa_bf16", "pasa_bf16",    "fa_fp8",  "pasa_fp8"};
  for (const auto& b : strict_bases()) n.push_back(b + std::string(kStrict));
  for (const auto& b : h100_bases()) n.push_back(b + std::string(kH100));
  return n;
}

const char* align_round_name(AlignRound r) { return enum_name(kAlignRounds, r).data(); }

AlignRound align_round_by_name(std::string_view name) {
  if (const auto r = enum_by_name(kAlignRounds, name)) return *r;
  throw InputError(fmt::format("unknown alignment rounding \"{}\"; known: {}", name, enum_names_joined(kAlignRounds)));
}

Allocation allocation_preset(std::string_view name) { return with_kernel_merge(preset_or_throw(name, "")); }

bool attention_format(const Format& f) {
  return f.ieee_like_grid() && (f.specials == Specials::ieee || f.specials == Specials::fn);
}

void check_stage_formats(const Allocation& a, const std::string& where) {
  for (std::size_t i = 0; i < kStageCount; ++i) {
    const StageSpec& s = a.stages[i];
    const std::string& st = stage_name(static_cast<Stage>(i));
    for (const auto& [what, f] : {std::pair<const char*, const Format*>{"format", &s.format}, {"acc", &s.acc()},
                                  {"partial", &s.partial()}, {"lse", &s.lse()}})
      if (!attention_format(*f))
        throw InputError(fmt::format("{}allocation \"{}\": stage {}: {} {} is an element format of block-scaled "
                                     "quantisation, not an attention stage format; stages take fp64, fp32, tf32, bf16, "
                                     "fp16, fp8_e4m3fn, fp8_e5m2 or a custom \"p=<bits>,emax=<e>\"",
                                     where, a.name, st, what, f->name));
    if (s.round.mode == RoundMode::hybrid)
      throw InputError(fmt::format("{}allocation \"{}\": stage {}: rounding hr (hybrid) is HiFloat8's conversion "
                                   "rounding, not a stage rounding; stages take rne, rna, rz, ru, rd, ro or sr",
                                   where, a.name, st));
  }
}

}  // namespace pasa
