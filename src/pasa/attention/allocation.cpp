#include "pasa/attention/allocation.hpp"

#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "pasa/core/error.hpp"

namespace pasa {
namespace {

using nlohmann::json;

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
    Allocation a = name == "fa_fp8" ? fig1("fa_fp8", "fp8_e4m3") : fig3("pasa_fp8", "fp16");
    for (Stage st : {Stage::q, Stage::k, Stage::v, Stage::p, Stage::k_shift}) {
      a.spec(st).format = format_by_name("fp8_e4m3");
      a.spec(st).round.overflow = Overflow::saturate;
    }
    a.spec(Stage::out).format = format_by_name("fp16");
    return a;
  }
  throw InputError(fmt::format("{}unknown allocation preset \"{}\"; known presets: {}", where, name,
                               fmt::join(allocation_preset_names(), ", ")));
}

std::string get_string(const json& j, const std::string& path) {
  if (!j.is_string()) throw InputError(fmt::format("{}: expected a string, got {}", path, j.dump()));
  return j.get<std::string>();
}

bool get_bool(const json& j, const std::string& path) {
  if (!j.is_boolean()) throw InputError(fmt::format("{}: expected true or false, got {}", path, j.dump()));
  return j.get<bool>();
}

Format format_at(const json& j, const std::string& path) {
  const std::string s = get_string(j, path);
  try {
    return format_by_name(s);
  } catch (const std::invalid_argument& e) {
    throw InputError(fmt::format("{}: {}", path, e.what()));
  }
}

// A stage is a format name, or {"format": ..., "round": ..., "overflow": ..., "ftz": ..., "daz": ...}
// (fields absent keep the base's values).
void read_stage(const json& j, const std::string& path, StageSpec& s) {
  if (j.is_string()) {
    s.format = format_at(j, path);
    return;
  }
  if (!j.is_object()) throw InputError(fmt::format("{}: expected a format name or an object, got {}", path, j.dump()));
  for (const auto& [key, val] : j.items()) {
    const std::string p = path + "/" + key;
    try {
      if (key == "format") s.format = format_at(val, p);
      else if (key == "round") s.round.mode = round_mode_by_name(get_string(val, p));
      else if (key == "overflow") s.round.overflow = overflow_by_name(get_string(val, p));
      else if (key == "ftz") s.round.flush_output = get_bool(val, p);
      else if (key == "daz") s.round.flush_input = get_bool(val, p);
      else throw InputError(fmt::format("{}: unknown key; known: format, round, overflow, ftz, daz", p));
    } catch (const std::invalid_argument& e) {
      throw InputError(fmt::format("{}: {}", p, e.what()));
    }
  }
}

const char* kind_name(GemmKind k) {
  switch (k) {
    case GemmKind::ordered: return "ordered";
    case GemmKind::chunked: return "chunked";
    case GemmKind::every_op: return "every_op";
  }
  return "?";
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

Allocation allocation_from_json(const json& j, const std::string& path) {
  if (j.is_string()) return preset_or_throw(j.get<std::string>(), path + ": ");
  if (!j.is_object())
    throw InputError(fmt::format("{}: expected a preset name or an allocation object, got {}", path, j.dump()));
  for (const auto& [key, val] : j.items())
    if (key != "preset" && key != "name" && key != "gemm" && key != "stages")
      throw InputError(fmt::format("{}/{}: unknown key; known: preset, name, gemm, stages", path, key));
  const bool full = !j.contains("preset");
  Allocation a = full ? Allocation{} : preset_or_throw(get_string(j.at("preset"), path + "/preset"), path + "/preset: ");
  if (j.contains("name")) a.name = get_string(j.at("name"), path + "/name");
  else if (!full) a.name = a.name + "+overrides";
  else a.name = "custom";
  if (j.contains("gemm")) {
    const json& g = j.at("gemm");
    const std::string gp = path + "/gemm";
    if (!g.is_object()) throw InputError(fmt::format("{}: expected an object, got {}", gp, g.dump()));
    for (const auto& [key, val] : g.items()) {
      if (key == "model") {
        const std::string m = get_string(val, gp + "/model");
        if (m == "ordered") a.gemm.kind = GemmKind::ordered;
        else if (m == "chunked") a.gemm.kind = GemmKind::chunked;
        else if (m == "every_op") a.gemm.kind = GemmKind::every_op;
        else throw InputError(fmt::format("{}/model: unknown GEMM model \"{}\"; known: ordered, chunked, every_op", gp, m));
      } else if (key == "chunk") {
        if (!val.is_number_integer() || val.get<long long>() < 1)
          throw InputError(fmt::format("{}/chunk: expected an integer >= 1, got {}", gp, val.dump()));
        a.gemm.chunk = static_cast<int>(val.get<long long>());
      } else {
        throw InputError(fmt::format("{}/{}: unknown key; known: model, chunk", gp, key));
      }
    }
  }
  std::array<bool, kStageCount> given{};
  if (j.contains("stages")) {
    const json& st = j.at("stages");
    const std::string sp = path + "/stages";
    if (!st.is_object()) throw InputError(fmt::format("{}: expected an object, got {}", sp, st.dump()));
    for (const auto& [key, val] : st.items()) {
      Stage s;
      try {
        s = stage_by_name(key);
      } catch (const InputError& e) {
        throw InputError(fmt::format("{}/{}: {}", sp, key, e.what()));
      }
      read_stage(val, sp + "/" + key, a.spec(s));
      given[static_cast<std::size_t>(s)] = true;
    }
  }
  if (full)
    for (std::size_t i = 0; i < kStageCount; ++i)
      if (!given[i])
        throw InputError(fmt::format("{}/stages: stage \"{}\" missing (give every stage, or a \"preset\" to override)",
                                     path, names()[i]));
  return a;
}

json to_json(const Allocation& a) {
  json stages = json::object();
  const RoundOptions plain;
  for (std::size_t i = 0; i < kStageCount; ++i) {
    const StageSpec& s = a.stages[i];
    if (s.round.mode == plain.mode && s.round.overflow == plain.overflow && !s.round.flush_input &&
        !s.round.flush_output) {
      stages[names()[i]] = s.format.name;
    } else {
      stages[names()[i]] = {{"format", s.format.name},
                            {"round", round_mode_name(s.round.mode)},
                            {"overflow", overflow_name(s.round.overflow)},
                            {"ftz", s.round.flush_output},
                            {"daz", s.round.flush_input}};
    }
  }
  json gemm = {{"model", kind_name(a.gemm.kind)}};
  if (a.gemm.kind == GemmKind::chunked) gemm["chunk"] = a.gemm.chunk;
  return {{"name", a.name}, {"gemm", gemm}, {"stages", stages}};
}

}  // namespace pasa
