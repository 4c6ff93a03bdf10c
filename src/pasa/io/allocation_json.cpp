#include "pasa/io/allocation_json.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "pasa/core/error.hpp"
#include "pasa/io/json_check.hpp"

namespace pasa {
namespace {

using nlohmann::json;

// A stage is a format name, or {"format": ..., "round": ..., "overflow": ..., "ftz": ..., "daz": ...}
// (fields absent keep the base's values).
void read_stage(const json& j, const std::string& path, StageSpec& s) {
  if (j.is_string()) {
    s.format = as_named(j, path, format_by_name);
    return;
  }
  if (!j.is_object()) json_fail(path, "expected a format name or an object, got " + json_type_text(j));
  check_keys(j, {"format", "round", "overflow", "ftz", "daz"}, path);
  if (j.contains("format")) s.format = as_named(j.at("format"), path + "/format", format_by_name);
  if (j.contains("round")) s.round.mode = as_named(j.at("round"), path + "/round", round_mode_by_name);
  if (j.contains("overflow")) s.round.overflow = as_named(j.at("overflow"), path + "/overflow", overflow_by_name);
  read_bool(j, "ftz", path, s.round.flush_output);
  read_bool(j, "daz", path, s.round.flush_input);
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

Allocation allocation_from_json(const json& j, const std::string& path) {
  if (j.is_string()) return as_named(j, path, allocation_preset);
  if (!j.is_object()) json_fail(path, "expected a preset name or an allocation object, got " + json_type_text(j));
  check_keys(j, {"preset", "name", "gemm", "stages"}, path);
  const bool full = !j.contains("preset");
  Allocation a = full ? Allocation{} : as_named(j.at("preset"), path + "/preset", allocation_preset);
  if (j.contains("name")) a.name = as_string(j.at("name"), path + "/name");
  else if (!full) a.name = a.name + "+overrides";
  else a.name = "custom";
  if (j.contains("gemm")) {
    const json& g = j.at("gemm");
    const std::string gp = path + "/gemm";
    check_keys(g, {"model", "chunk"}, gp);
    if (g.contains("model")) {
      const std::string m = as_string(g.at("model"), gp + "/model");
      if (m == "ordered") a.gemm.kind = GemmKind::ordered;
      else if (m == "chunked") a.gemm.kind = GemmKind::chunked;
      else if (m == "every_op") a.gemm.kind = GemmKind::every_op;
      else json_fail(gp + "/model", fmt::format("unknown GEMM model \"{}\"; known: ordered, chunked, every_op", m));
    }
    if (g.contains("chunk")) a.gemm.chunk = static_cast<int>(as_size(g.at("chunk"), gp + "/chunk", 1));
  }
  std::array<bool, kStageCount> given{};
  if (j.contains("stages")) {
    const json& st = j.at("stages");
    const std::string sp = path + "/stages";
    require_object(st, sp);
    for (const auto& [key, val] : st.items()) {
      const Stage s = at_place(sp + "/" + key, [&] { return stage_by_name(key); });
      read_stage(val, sp + "/" + key, a.spec(s));
      given[static_cast<std::size_t>(s)] = true;
    }
  }
  if (full)
    for (std::size_t i = 0; i < kStageCount; ++i)
      if (!given[i])
        json_fail(path + "/stages", fmt::format("stage \"{}\" missing (give every stage, or a \"preset\" to override)",
                                                stage_name(static_cast<Stage>(i))));
  return a;
}

json to_json(const Allocation& a) {
  json stages = json::object();
  const RoundOptions plain;
  for (std::size_t i = 0; i < kStageCount; ++i) {
    const StageSpec& s = a.stages[i];
    if (s.round.mode == plain.mode && s.round.overflow == plain.overflow && !s.round.flush_input &&
        !s.round.flush_output) {
      stages[stage_name(static_cast<Stage>(i))] = s.format.name;
    } else {
      stages[stage_name(static_cast<Stage>(i))] = {{"format", s.format.name},
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
