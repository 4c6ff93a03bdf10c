#include "pasa/io/allocation_json.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "pasa/core/error.hpp"
#include "pasa/io/json_check.hpp"

namespace pasa {
namespace {

using nlohmann::json;

bool reduces(Stage st) { return st == Stage::sum || st == Stage::mean; }

// A stage is a format name (for sum and mean: accumulated in that format, sequentially), or
// {"format": ..., "round": ..., "overflow": ..., "ftz": ..., "daz": ...} with, for sum and mean,
// "acc", "order", "width" (the Reduction), and for exp, "via". Fields absent keep the base's values (an
// accumulator never given stays the stage's own format, whatever format the stage gets).
void read_stage(const json& j, const std::string& path, Stage st, StageSpec& s) {
  if (j.is_string()) {
    s.format = as_named(j, path, format_by_name);
    s.reduce = Reduction{};
    return;
  }
  if (!j.is_object()) json_fail(path, "expected a format name or an object, got " + json_type_text(j));
  std::vector<std::string> known{"format", "round", "overflow", "ftz", "daz"};
  if (reduces(st)) known.insert(known.end(), {"acc", "order", "width"});
  if (st == Stage::exp) known.push_back("via");
  check_keys(j, known, path);
  if (j.contains("format")) s.format = as_named(j.at("format"), path + "/format", format_by_name);
  if (j.contains("round")) s.round.mode = as_named(j.at("round"), path + "/round", round_mode_by_name);
  if (j.contains("overflow")) s.round.overflow = as_named(j.at("overflow"), path + "/overflow", overflow_by_name);
  read_bool(j, "ftz", path, s.round.flush_output);
  read_bool(j, "daz", path, s.round.flush_input);
  if (j.contains("acc")) s.reduce.acc = as_named(j.at("acc"), path + "/acc", format_by_name);
  if (j.contains("order")) s.reduce.order = as_named(j.at("order"), path + "/order", reduce_order_by_name);
  if (j.contains("width")) {
    const std::int64_t w = as_integer(j.at("width"), path + "/width");
    if (w < 1 || w > 1024 || (w & (w - 1)) != 0)
      json_fail(path + "/width", fmt::format("expected a power of two in [1, 1024], got {}", w));
    s.reduce.width = static_cast<int>(w);
  }
  if (j.contains("via")) s.via = as_named(j.at("via"), path + "/via", exp_via_by_name);
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
    if (g.contains("chunk")) {
      // Bounded: the chunked model keeps 2·chunk + 2 doubles per thread (an int chunk of 2^40 wrapped around).
      const std::size_t c = as_size(g.at("chunk"), gp + "/chunk", 1);
      if (c > 65536) json_fail(gp + "/chunk", fmt::format("expected an integer in [1, 65536], got {}", c));
      a.gemm.chunk = static_cast<int>(c);
    }
  }
  std::array<bool, kStageCount> given{};
  if (j.contains("stages")) {
    const json& st = j.at("stages");
    const std::string sp = path + "/stages";
    require_object(st, sp);
    for (const auto& item : st.items()) {
      const std::string& key = item.key();  // (not a structured binding: clang 14 cannot capture one)
      const json& val = item.value();
      const Stage s = at_place(sp + "/" + key, [&] { return stage_by_name(key); });
      read_stage(val, sp + "/" + key, s, a.spec(s));
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
