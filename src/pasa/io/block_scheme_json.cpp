#include "pasa/io/block_scheme_json.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "pasa/io/json_check.hpp"

namespace pasa {
namespace {

using nlohmann::json;

void layout_from_json(const json& j, const std::string& path, GroupLayout& g) {
  if (j.contains("group")) g.group = as_named(j.at("group"), path + "/group", [&](const std::string& n) { return grouping_by_name(n); });
  read_size(j, "rows", path, g.rows);
  read_size(j, "cols", path, g.cols);
  if (j.contains("threads")) g.threads = static_cast<int>(as_size(j.at("threads"), path + "/threads"));
}

json to_json(const GroupLayout& g) {
  return {{"group", enum_name(kGroupings, g.group)}, {"rows", g.rows}, {"cols", g.cols}, {"threads", g.threads}};
}

}  // namespace

BlockScheme block_scheme_from_json(const json& j, const std::string& path) {
  if (j.is_string()) {
    BlockScheme s = as_named(j, path, [](const std::string& n) { return block_scheme_by_name(n); });
    return s;
  }
  if (!j.is_object()) json_fail(path, "expected a block-scale scheme: a name (" + known_block_scheme_names() +
                                          ") or an object {\"scheme\": name, ...overrides}, got " + json_type_text(j));
  check_keys(j, {"scheme", "element", "frac_bits", "scale_format", "scale_rule", "tensor_scale", "round", "saturate",
                 "quotient", "target", "divide", "group", "rows", "cols", "threads", "a", "b"},
             path);
  if (!j.contains("scheme")) json_fail(path, "a scheme object needs \"scheme\" (one of " + known_block_scheme_names() + ")");
  BlockScheme s = as_named(j.at("scheme"), path + "/scheme", [](const std::string& n) { return block_scheme_by_name(n); });
  read_string(j, "element", path, s.element);
  if (j.contains("frac_bits")) s.frac_bits = static_cast<int>(as_size(j.at("frac_bits"), path + "/frac_bits"));
  read_string(j, "scale_format", path, s.scale_format);
  if (j.contains("scale_rule"))
    s.rule = as_named(j.at("scale_rule"), path + "/scale_rule", [](const std::string& n) { return scale_rule_by_name(n); });
  read_bool(j, "tensor_scale", path, s.tensor_scale);
  if (j.contains("round")) s.round = as_named(j.at("round"), path + "/round", round_mode_by_name);
  read_bool(j, "saturate", path, s.saturate);
  if (j.contains("quotient"))
    s.quotient = as_named(j.at("quotient"), path + "/quotient", [](const std::string& n) { return quotient_by_name(n); });
  if (j.contains("target")) s.target = as_number(j.at("target"), path + "/target");
  if (j.contains("divide")) {
    const std::string place = path + "/divide";
    const std::string n = as_string(j.at("divide"), place);
    const auto d = enum_by_name(kDivides, n);
    if (!d) json_fail(place, fmt::format("\"{}\": known: {}", n, enum_names_joined(kDivides)));
    s.divide = *d;
  }
  layout_from_json(j, path, s.a);
  layout_from_json(j, path, s.b);
  for (const char* side : {"a", "b"})
    if (j.contains(side)) {
      require_object(j.at(side), path + "/" + side);
      check_keys(j.at(side), {"group", "rows", "cols", "threads"}, path + "/" + side);
      layout_from_json(j.at(side), path + "/" + side, side[0] == 'a' ? s.a : s.b);
    }
  // (the field named: validate_block_scheme's messages start with the field)
  validate_block_scheme(s, json_where(path) + "/");
  return s;
}

json to_json(const BlockScheme& s) {
  return {{"scheme", s.name},
          {"element", s.element},
          {"frac_bits", s.frac_bits},
          {"scale_format", s.scale_format},
          {"scale_rule", scale_rule_name(s.rule)},
          {"tensor_scale", s.tensor_scale},
          {"round", round_mode_name(s.round)},
          {"saturate", s.saturate},
          {"quotient", enum_name(kQuotients, s.quotient)},
          {"target", s.target},
          {"divide", enum_name(kDivides, s.divide)},
          {"a", to_json(s.a)},
          {"b", to_json(s.b)}};
}

}  // namespace pasa
