#include "pasa/attention/allocation.hpp"

#include <fmt/format.h>

#include "pasa/core/error.hpp"

namespace pasa {
namespace {

const std::array<std::string, kStageCount>& names() {
  static const std::array<std::string, kStageCount> n = {"q",   "k",   "v",  "qk_acc", "s",  "scale",
                                                         "max", "exp", "sum", "p",     "pv_acc", "pv",
                                                         "o",   "div", "out", "shift", "k_shift", "mean"};
  return n;
}

std::string joined_names() {
  std::string s;
  for (const auto& n : names()) s += (s.empty() ? "" : ", ") + n;
  return s;
}

// Builds an allocation from a compact table: every stage `rest`, then the listed exceptions.
Allocation make(std::string name, const char* rest, std::initializer_list<std::pair<Stage, const char*>> except) {
  Allocation a;
  a.name = std::move(name);
  for (auto& s : a.stages) s.format = format_by_name(rest);
  for (const auto& [st, f] : except) a.spec(st).format = format_by_name(f);
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

Allocation preset_or_throw(std::string_view name, const std::string& where) {
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

}  // namespace

bool StageSpec::operator==(const StageSpec& o) const {
  return format == o.format && round.mode == o.round.mode && round.overflow == o.round.overflow &&
         round.flush_input == o.round.flush_input && round.flush_output == o.round.flush_output;
}

std::array<StageSpec, kStageCount> uniform_stages(const Format& f) {
  std::array<StageSpec, kStageCount> s;
  for (auto& x : s) x.format = f;
  return s;
}

std::vector<std::string> stage_names() { return {names().begin(), names().end()}; }
const std::string& stage_name(Stage s) { return names()[static_cast<std::size_t>(s)]; }

Stage stage_by_name(std::string_view name) {
  for (std::size_t i = 0; i < kStageCount; ++i)
    if (names()[i] == name) return static_cast<Stage>(i);
  throw InputError(fmt::format("unknown allocation stage \"{}\"; known stages: {}", name, joined_names()));
}

Format& Allocation::stage(std::string_view n) { return spec(stage_by_name(n)).format; }
const Format& Allocation::stage(std::string_view n) const { return spec(stage_by_name(n)).format; }
StageSpec& Allocation::spec(std::string_view n) { return spec(stage_by_name(n)); }
const StageSpec& Allocation::spec(std::string_view n) const { return spec(stage_by_name(n)); }

std::vector<std::string> allocation_preset_names() {
  return {"fp64",         "fa_fp32",      "fa_fp16_fp32", "fa_fp16", "pasa_fp16", "fa_fp32_bf16",
          "fa_bf16_fp32", "fa_bf16",      "pasa_bf16",    "fa_fp8",  "pasa_fp8"};
}

Allocation allocation_preset(std::string_view name) { return preset_or_throw(name, ""); }

}  // namespace pasa
