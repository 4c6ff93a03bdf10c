#include "pasa/io/allocation_json.hpp"

#include <array>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "pasa/core/error.hpp"
#include "pasa/io/json_check.hpp"

namespace pasa {
namespace {

using nlohmann::json;

bool reduces(Stage st) { return st == Stage::sum || st == Stage::mean; }

// A stage is a format name (for sum and mean: accumulated in that format, sequentially), or
// {"format": ..., "round": ..., "overflow": ..., "ftz": ..., "daz": ...} with, for sum and mean,
// "acc", "order", "width" (the Reduction), for exp, "via", and for merge, "model", "partial", "lse" (the
// MergeSpec; a format name keeps the base's). Fields absent keep the base's values (an accumulator never
// given stays the stage's own format, whatever format the stage gets).
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
  if (st == Stage::merge) known.insert(known.end(), {"model", "partial", "lse"});
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
    // The lanes exist only in the blocked order; a width with another order would be accepted and ignored.
    if (s.reduce.order != ReduceOrder::blocked)
      json_fail(path + "/width", fmt::format("a width applies to \"order\": \"blocked\" only; this stage's order is "
                                             "\"{}\"", reduce_order_name(s.reduce.order)));
  }
  if (j.contains("via")) s.via = as_named(j.at("via"), path + "/via", exp_via_by_name);
  if (j.contains("model")) s.merge.model = as_named(j.at("model"), path + "/model", merge_model_by_name);
  if (j.contains("partial")) s.merge.partial = as_named(j.at("partial"), path + "/partial", format_by_name);
  if (j.contains("lse")) s.merge.lse = as_named(j.at("lse"), path + "/lse", format_by_name);
}

constexpr std::array<const char*, 14> kTensorCoreKeys = {
    "tensor_core", "block",        "acc_in_block", "align_bits", "align_round", "block_round", "promote",
    "acc_bits",    "operand_bits", "zero_at_emin", "scale",      "scale_block", "group",       "integer"};

// The fields of the newer engines (TensorCore: operand_bits .. integer), each checked where it is read; the
// combinations (a group that divides the block, a scale_block exactly with a scale) after all are read.
void read_engine_fields(const json& g, const std::string& gp, TensorCore& t) {
  if (g.contains("operand_bits")) {
    const std::int64_t b = as_integer(g.at("operand_bits"), gp + "/operand_bits");
    if (b != 0 && (b < 2 || b > 24)) json_fail(gp + "/operand_bits", fmt::format("expected 0 or 2..24, got {}", b));
    t.operand_bits = static_cast<int>(b);
  }
  read_bool(g, "zero_at_emin", gp, t.zero_at_emin);
  if (g.contains("scale")) t.scale = as_named(g.at("scale"), gp + "/scale", block_scale_by_name);
  if (g.contains("scale_block")) {
    const std::int64_t b = as_integer(g.at("scale_block"), gp + "/scale_block");
    if (b < 0 || b > 1024) json_fail(gp + "/scale_block", fmt::format("expected 0..1024 elements, got {}", b));
    t.scale_block = static_cast<int>(b);
  }
  if (g.contains("group")) {
    const std::int64_t b = as_integer(g.at("group"), gp + "/group");
    if (b < 0 || b > 1024) json_fail(gp + "/group", fmt::format("expected 0..1024 products, got {}", b));
    t.group = static_cast<int>(b);
  }
  if (g.contains("integer")) t.integer = as_named(g.at("integer"), gp + "/integer", tc_integer_by_name);
  if (t.group > 0 && t.block % t.group != 0)
    json_fail(gp + "/group", fmt::format("group ({}) must divide block ({})", t.group, t.block));
  if ((t.scale == BlockScale::none) != (t.scale_block == 0))
    json_fail(gp + "/scale_block", fmt::format("scale_block ({}) must be > 0 exactly when scale is not \"none\" (scale: "
                                               "\"{}\")", t.scale_block, block_scale_name(t.scale)));
  if (t.group > 0 && t.scale_block > 0 && t.scale_block % t.group != 0)
    json_fail(gp + "/scale_block", fmt::format("scale_block ({}) must be a multiple of group ({})", t.scale_block, t.group));
  if (t.scale == BlockScale::ue4m3 && t.group == 0)
    json_fail(gp + "/scale", "ue4m3 block scales need \"group\" > 0 (kind::mxf4nvf4 sums 16 products per term)");
  if (t.integer != TcInteger::off && (t.scale != BlockScale::none || t.group != 0 || t.operand_bits != 0))
    json_fail(gp + "/integer", "an integer tensor core takes no scale, group or operand_bits");
}

// The tensor-core fields of "gemm": "tensor_core" (a named model: tensor_core_preset) first, then the fields
// given one by one override it. Only with "model": "tensor_core" (or a base allocation that has it).
void read_tensor_core(const json& g, const std::string& gp, GemmModel& m) {
  bool any = false;
  for (const char* key : kTensorCoreKeys) any = any || g.contains(key);
  if (!any) return;
  if (m.kind != GemmKind::tensor_core)
    json_fail(gp, fmt::format("tensor-core fields ({}) need \"model\": \"tensor_core\"", fmt::join(kTensorCoreKeys, ", ")));
  TensorCore& t = m.tc;
  if (g.contains("tensor_core")) t = as_named(g.at("tensor_core"), gp + "/tensor_core", tensor_core_preset);
  if (g.contains("block")) {
    const std::int64_t b = as_integer(g.at("block"), gp + "/block");
    if (b < 1 || b > 1024) json_fail(gp + "/block", fmt::format("expected 1..1024 products, got {}", b));
    t.block = static_cast<int>(b);
  }
  read_bool(g, "acc_in_block", gp, t.acc_in_block);
  if (g.contains("align_bits")) {
    const json& v = g.at("align_bits");
    if (v.is_string() && v.get<std::string>() == "unlimited") t.align_bits = kUnlimitedAlign;
    else {
      const std::int64_t b = as_integer(v, gp + "/align_bits");
      if (b < 0 || b > 60) json_fail(gp + "/align_bits", fmt::format("expected 0..60 or \"unlimited\", got {}", b));
      t.align_bits = static_cast<int>(b);
    }
  }
  if (g.contains("align_round")) t.align_round = as_named(g.at("align_round"), gp + "/align_round", align_round_by_name);
  if (g.contains("block_round")) {
    const RoundMode r = as_named(g.at("block_round"), gp + "/block_round", round_mode_by_name);
    if (r == RoundMode::stochastic || r == RoundMode::odd)
      json_fail(gp + "/block_round", fmt::format("expected rne, rna, rz, ru or rd (a tensor core's normalisation), got "
                                                 "\"{}\"",
                                                 round_mode_name(r)));
    t.block_round = r;
  }
  if (g.contains("acc_bits")) {
    const std::int64_t b = as_integer(g.at("acc_bits"), gp + "/acc_bits");
    if (b != 0 && (b < 2 || b > 53)) json_fail(gp + "/acc_bits", fmt::format("expected 0 or 2..53, got {}", b));
    t.acc_bits = static_cast<int>(b);
  }
  read_engine_fields(g, gp, t);
  if (g.contains("promote")) t.promote = static_cast<int>(as_size(g.at("promote"), gp + "/promote", 0));
  if (t.promote > 0 && t.promote % t.block != 0)
    json_fail(gp + "/promote", fmt::format("promote ({}) must be 0 or a multiple of block ({})", t.promote, t.block));
}

}  // namespace

GemmModel gemm_model_from_json(const json& g, const std::string& gp, GemmModel m) {
  require_object(g, gp);
  std::vector<std::string> known = {"model", "chunk"};
  known.insert(known.end(), kTensorCoreKeys.begin(), kTensorCoreKeys.end());
  check_keys(g, known, gp);
  if (g.contains("model")) m.kind = as_named(g.at("model"), gp + "/model", gemm_kind_by_name);
  if (g.contains("chunk")) {
    // Bounded: the chunked model keeps 2·chunk + 2 doubles per thread (an int chunk of 2^40 wrapped around).
    const std::size_t c = as_size(g.at("chunk"), gp + "/chunk", 1);
    if (c > 65536) json_fail(gp + "/chunk", fmt::format("expected an integer in [1, 65536], got {}", c));
    m.chunk = static_cast<int>(c);
  }
  read_tensor_core(g, gp, m);
  return m;
}

Allocation allocation_from_json(const json& j, const std::string& path) {
  if (j.is_string()) return as_named(j, path, allocation_preset);
  if (!j.is_object()) json_fail(path, "expected a preset name or an allocation object, got " + json_type_text(j));
  check_keys(j, {"preset", "name", "gemm", "stages"}, path);
  const bool full = !j.contains("preset");
  Allocation a = full ? Allocation{} : as_named(j.at("preset"), path + "/preset", allocation_preset);
  if (j.contains("name")) a.name = as_string(j.at("name"), path + "/name");
  else if (!full) a.name = a.name + "+overrides";
  else a.name = "custom";
  if (j.contains("gemm")) a.gemm = gemm_model_from_json(j.at("gemm"), path + "/gemm", a.gemm);
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
  // The merge stage (split-KV) came after allocations were first written: not given, its arithmetic is the
  // o stage's (format and rounding); its MergeSpec (what the parts store) stays the base's.
  if (!given[static_cast<std::size_t>(Stage::merge)]) {
    if (full || given[static_cast<std::size_t>(Stage::o)]) {
      const MergeSpec keep = a.spec(Stage::merge).merge;
      a.spec(Stage::merge) = a.spec(Stage::o);
      a.spec(Stage::merge).merge = keep;
    }
    given[static_cast<std::size_t>(Stage::merge)] = true;
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
    if (st == Stage::merge && s == a.spec(Stage::o)) continue;  // the default (see allocation_from_json)
    const bool plain_round = s.round.mode == plain.mode && s.round.overflow == plain.overflow &&
                             !s.round.flush_input && !s.round.flush_output;
    const bool plain_reduce = !reduces(st) || s.reduce == Reduction{};
    const bool plain_via = st != Stage::exp || s.via == ExpVia::exact;
    const bool plain_merge = st != Stage::merge || s.merge == MergeSpec{};
    if (plain_round && plain_reduce && plain_via && plain_merge) {
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
      if (s.reduce.order == ReduceOrder::blocked) o["width"] = s.reduce.width;  // (read back only with blocked)
    }
    if (!plain_via) o["via"] = exp_via_name(s.via);
    if (!plain_merge) {
      o["model"] = merge_model_name(s.merge.model);
      if (s.merge.partial) o["partial"] = s.merge.partial->name;
      if (s.merge.lse) o["lse"] = s.merge.lse->name;
    }
    stages[stage_name(st)] = o;
  }
  json gemm = {{"model", gemm_kind_name(a.gemm.kind)}};
  if (a.gemm.kind == GemmKind::chunked) gemm["chunk"] = a.gemm.chunk;
  if (a.gemm.kind == GemmKind::tensor_core) {
    const TensorCore& t = a.gemm.tc;
    gemm["block"] = t.block;
    gemm["acc_in_block"] = t.acc_in_block;
    gemm["align_bits"] = t.align_bits == kUnlimitedAlign ? json("unlimited") : json(t.align_bits);
    gemm["align_round"] = align_round_name(t.align_round);
    gemm["block_round"] = round_mode_name(t.block_round);
    gemm["promote"] = t.promote;
    gemm["acc_bits"] = t.acc_bits;
    // (the newer engines' fields only where set: every committed allocation JSON stays as it was)
    const TensorCore d;
    if (t.operand_bits != d.operand_bits) gemm["operand_bits"] = t.operand_bits;
    if (t.zero_at_emin != d.zero_at_emin) gemm["zero_at_emin"] = t.zero_at_emin;
    if (t.scale != d.scale) gemm["scale"] = block_scale_name(t.scale);
    if (t.scale_block != d.scale_block) gemm["scale_block"] = t.scale_block;
    if (t.group != d.group) gemm["group"] = t.group;
    if (t.integer != d.integer) gemm["integer"] = tc_integer_name(t.integer);
  }
  return {{"name", a.name}, {"gemm", gemm}, {"stages", stages}};
}

}  // namespace pasa
