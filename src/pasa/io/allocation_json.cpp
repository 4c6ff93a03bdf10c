#include "pasa/io/allocation_json.hpp"

#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "pasa/core/error.hpp"

namespace pasa {
namespace {

using nlohmann::json;

// A preset by name; an unknown name is an InputError prefixed with where the name was found.
Allocation preset_at(std::string_view name, const std::string& where) {
  try {
    return allocation_preset(name);
  } catch (const InputError& e) {
    throw InputError(where + e.what());
  }
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

bool reduces(Stage st) { return st == Stage::sum || st == Stage::mean; }

// A stage is a format name (for sum and mean: accumulated in that format, sequentially), or
// {"format": ..., "round": ..., "overflow": ..., "ftz": ..., "daz": ...} with, for sum and mean,
// "acc", "order", "width" (the Reduction), and for exp, "via". Fields absent keep the base's values (an
// accumulator never given stays the stage's own format, whatever format the stage gets).
void read_stage(const json& j, const std::string& path, Stage st, StageSpec& s) {
  if (j.is_string()) {
    s.format = format_at(j, path);
    s.reduce = Reduction{};
    return;
  }
  if (!j.is_object()) throw InputError(fmt::format("{}: expected a format name or an object, got {}", path, j.dump()));
  const char* known = reduces(st) ? "format, round, overflow, ftz, daz, acc, order, width"
                      : st == Stage::exp ? "format, round, overflow, ftz, daz, via"
                                         : "format, round, overflow, ftz, daz";
  for (const auto& [key, val] : j.items()) {
    const std::string p = path + "/" + key;
    try {
      if (key == "format") s.format = format_at(val, p);
      else if (key == "round") s.round.mode = round_mode_by_name(get_string(val, p));
      else if (key == "overflow") s.round.overflow = overflow_by_name(get_string(val, p));
      else if (key == "ftz") s.round.flush_output = get_bool(val, p);
      else if (key == "daz") s.round.flush_input = get_bool(val, p);
      else if (key == "acc" && reduces(st)) s.reduce.acc = format_at(val, p);
      else if (key == "order" && reduces(st)) s.reduce.order = reduce_order_by_name(get_string(val, p));
      else if (key == "width" && reduces(st)) {
        const long long w = val.is_number_integer() ? val.get<long long>() : 0;
        if (w < 1 || w > 1024 || (w & (w - 1)) != 0)
          throw InputError(fmt::format("{}: expected a power of two in [1, 1024], got {}", p, val.dump()));
        s.reduce.width = static_cast<int>(w);
      } else if (key == "via" && st == Stage::exp) s.via = exp_via_by_name(get_string(val, p));
      else throw InputError(fmt::format("{}: unknown key; known for stage \"{}\": {}", p, stage_name(st), known));
    } catch (const std::invalid_argument& e) {
      throw InputError(fmt::format("{}: {}", p, e.what()));
    } catch (const InputError& e) {
      const std::string what = e.what();
      if (what.rfind(p, 0) == 0) throw;
      throw InputError(fmt::format("{}: {}", p, what));
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

Allocation allocation_from_json(const json& j, const std::string& path) {
  if (j.is_string()) return preset_at(j.get<std::string>(), path + ": ");
  if (!j.is_object())
    throw InputError(fmt::format("{}: expected a preset name or an allocation object, got {}", path, j.dump()));
  for (const auto& [key, val] : j.items())
    if (key != "preset" && key != "name" && key != "gemm" && key != "stages")
      throw InputError(fmt::format("{}/{}: unknown key; known: preset, name, gemm, stages", path, key));
  const bool full = !j.contains("preset");
  Allocation a = full ? Allocation{} : preset_at(get_string(j.at("preset"), path + "/preset"), path + "/preset: ");
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
      read_stage(val, sp + "/" + key, s, a.spec(s));
      given[static_cast<std::size_t>(s)] = true;
    }
  }
  if (full)
    for (std::size_t i = 0; i < kStageCount; ++i)
      if (!given[i])
        throw InputError(fmt::format("{}/stages: stage \"{}\" missing (give every stage, or a \"preset\" to override)",
                                     path, stage_name(static_cast<Stage>(i))));
  return a;
}

json to_json(const Allocation& a) {
  json stages = json::object();
  const RoundOptions plain;
  for (std::size_t i = 0; i < kStageCount; ++i) {
    const Stage st = static_cast<Stage>(i);
    const StageSpec& s = a.stages[i];
    const bool plain_round = s.round.mode == plain.mode && s.round.overflow == plain.overflow &&
                             !s.round.flush_input && !s.round.flush_output;
    const bool plain_reduce = !reduces(st) || s.reduce == Reduction{};
    const bool plain_via = st != Stage::exp || s.via == ExpVia::exact;
    if (plain_round && plain_reduce && plain_via) {
      stages[stage_name(st)] = s.format.name;
      continue;
    }
    json o = {{"format", s.format.name}};
    if (!plain_round) {
      o["round"] = round_mode_name(s.round.mode);
      o["overflow"] = overflow_name(s.round.overflow);
      o["ftz"] = s.round.flush_output;
      o["daz"] = s.round.flush_input;
    }
    if (!plain_reduce) {
      if (s.reduce.acc) o["acc"] = s.reduce.acc->name;
      o["order"] = reduce_order_name(s.reduce.order);
      if (s.reduce.order == ReduceOrder::blocked || s.reduce.width != Reduction{}.width) o["width"] = s.reduce.width;
    }
    if (!plain_via) o["via"] = exp_via_name(s.via);
    stages[stage_name(st)] = o;
  }
  json gemm = {{"model", kind_name(a.gemm.kind)}};
  if (a.gemm.kind == GemmKind::chunked) gemm["chunk"] = a.gemm.chunk;
  return {{"name", a.name}, {"gemm", gemm}, {"stages", stages}};
}

}  // namespace pasa
