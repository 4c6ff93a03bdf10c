#include "pasa/study/sweep_config.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <set>

#include <fmt/format.h>

#include "pasa/core/error.hpp"
#include "pasa/core/memory.hpp"
#include "pasa/numeric/format.hpp"
#include "pasa/io/json_check.hpp"

namespace pasa {

using nlohmann::json;
namespace fs = std::filesystem;

namespace {

// "cfg.json:/grid/x0": the config's JSON pointers are read and reported through the one JSON reader
// (json_check.hpp), as the problem and algorithm parsers do.
std::string where(const std::string& source, const std::string& path) { return source + ":" + path; }

[[noreturn]] void fail(const std::string& source, const std::string& path, const std::string& what) {
  json_fail(where(source, path), what);
}

// " (did you mean "x0"?)" when a known name is close (closest_key, shared with every JSON reader).
std::string did_you_mean(const std::string& key, const std::vector<std::string>& known) {
  const std::string near = closest_key(key, known);
  return near.empty() ? "" : " (did you mean \"" + near + "\"?)";
}

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

const json& require(const json& obj, const char* key, const std::string& source, const std::string& path) {
  if (!obj.contains(key)) fail(source, path, std::string("missing required key \"") + key + "\"");
  return obj.at(key);
}

// Text written into a CSV field or a file name: no control characters (a newline inside a field would
// break the line-by-line reading of the partial table after results were written).
void check_printable(const std::string& s, const std::string& source, const std::string& path) {
  for (unsigned char c : s)
    if (c < 0x20 || c == 0x7f)
      fail(source, path, fmt::format("{} holds a control character (code {}); use printable text", json(s).dump(), int(c)));
}

// A file name inside the output folder: no folders, nothing that escapes it, none of the runner's own files.
std::string get_file_name(const json& j, const std::string& source, const std::string& path) {
  const std::string s = as_string(j, where(source, path));
  if (s.empty() || s.find('/') != std::string::npos || s == "." || s == "..")
    fail(source, path, "\"" + s + "\" must be a plain file name (no folders)");
  check_printable(s, source, path);
  if (s == "config.json" || s == kSweepLockName || s.ends_with(".partial") || s.find(".tmp") != std::string::npos)
    fail(source, path, "\"" + s + "\" is a name the sweep uses for its own files (config.json, " + kSweepLockName +
                           ", *.partial, temporary *.tmp* files); pick another");
  return s;
}

bool valid_identifier(const std::string& s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

// A grid value computed as from + i·step is rounded to 15 significant digits, so that a range of 0.1
// steps yields 0.3 and not 0.30000000000000004 (the value the user meant, exactly as a list would give).
json clean_number(double x) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.15g", x);
  const double y = std::strtod(buf, nullptr);
  if (y == std::floor(y) && std::fabs(y) < 9e15) return json(static_cast<std::int64_t>(y));
  return json(y);
}

// Grid values: a list, {"values": [...]}, {"from", "to", "step"} or a single scalar.
std::vector<json> parse_axis(const json& j, const std::string& source, const std::string& path) {
  std::vector<json> values;
  auto scalar = [&](const json& v, const std::string& p) {
    if (!(v.is_number() || v.is_string() || v.is_boolean()))
      fail(source, p, "grid values must be numbers, strings or booleans, got " + json_type_text(v));
    if (v.is_number_float() && !std::isfinite(v.get<double>())) fail(source, p, "expected a finite number");
    if (v.is_string()) check_printable(v.get<std::string>(), source, p);
    values.push_back(v.is_number_float() ? clean_number(v.get<double>()) : v);
  };
  if (j.is_array() || (j.is_object() && j.contains("values"))) {
    const json& list = j.is_array() ? j : j.at("values");
    const std::string lpath = j.is_array() ? path : path + "/values";
    if (j.is_object()) check_keys(j, {"values"}, where(source, path));
    if (!list.is_array()) fail(source, lpath, "expected a list, got " + json_type_text(list));
    if (list.empty()) fail(source, lpath, "the list of values is empty");
    for (std::size_t i = 0; i < list.size(); ++i) scalar(list[i], lpath + "/" + std::to_string(i));
  } else if (j.is_object()) {
    check_keys(j, {"from", "to", "step"}, where(source, path));
    const double from = as_number(require(j, "from", source, path), where(source, path + "/from"));
    const double to = as_number(require(j, "to", source, path), where(source, path + "/to"));
    const double step = as_number(require(j, "step", source, path), where(source, path + "/step"));
    if (!(step > 0)) fail(source, path + "/step", fmt::format("{} must be > 0", j.at("step").dump()));
    if (to < from) fail(source, path + "/to", fmt::format("{} is below \"from\" ({})", j.at("to").dump(), j.at("from").dump()));
    // Inclusive of `to` up to a relative slack for decimal steps (0 to 1 by 0.1 has 11 values).
    const double count = std::floor((to - from) / step * (1 + 1e-12) + 1e-9) + 1;
    if (!(count <= 1e6)) fail(source, path, fmt::format("{} values is too many for one axis (at most 1000000)", count));
    for (std::size_t i = 0; i < static_cast<std::size_t>(count); ++i) values.push_back(clean_number(from + static_cast<double>(i) * step));
  } else {
    scalar(j, path);
  }
  std::set<std::string> seen;
  for (std::size_t i = 0; i < values.size(); ++i)
    if (!seen.insert(values[i].dump()).second) fail(source, path, "value " + values[i].dump() + " appears twice");
  return values;
}

// Every placeholder ("$name" string values) in `j`, with its JSON path.
void collect_placeholders(const json& j, const std::string& path, std::vector<std::pair<std::string, std::string>>& out) {
  if (j.is_string()) {
    const auto& s = j.get_ref<const std::string&>();
    if (s.size() > 1 && s[0] == '$') out.emplace_back(s.substr(1), path);
  } else if (j.is_object()) {
    for (const auto& [k, v] : j.items()) collect_placeholders(v, path + "/" + k, out);
  } else if (j.is_array()) {
    for (std::size_t i = 0; i < j.size(); ++i) collect_placeholders(j[i], path + "/" + std::to_string(i), out);
  }
}

json substitute(const json& j, const std::vector<std::string>& names, const std::vector<json>& values) {
  if (j.is_string()) {
    const auto& s = j.get_ref<const std::string&>();
    if (s.size() > 1 && s[0] == '$') {
      for (std::size_t i = 0; i < names.size(); ++i)
        if (s.compare(1, std::string::npos, names[i]) == 0) return values[i];
    }
    return j;
  }
  if (j.is_object()) {
    json out = json::object();
    for (const auto& [k, v] : j.items()) out[k] = substitute(v, names, values);
    return out;
  }
  if (j.is_array()) {
    json out = json::array();
    for (const auto& v : j) out.push_back(substitute(v, names, values));
    return out;
  }
  return j;
}

// Columns the CSV writes itself; a grid axis may not take these names.
const std::vector<std::string> kReservedColumns = {"case_id", "problem_id", "grid_point", "seed", "algorithm",
                                                   "problem_json", "algorithm_json", "golden_time_s", "time_s"};

}  // namespace

std::size_t SweepConfig::grid_points() const {
  std::size_t n = 1;
  for (const auto& a : grid) n = sat_mul(n, a.values.size());
  return n;
}

SweepConfig parse_sweep_config(const json& c, const std::string& source) {
  SweepConfig cfg;
  cfg.source = source;
  cfg.raw = c;
  require_object(c, where(source, ""));
  check_keys(c, {"name", "description", "problem", "grid", "seeds", "repeats", "algorithms", "golden", "score_format", "outputs"},
             where(source, ""));

  if (c.contains("name")) {
    cfg.name = as_string(c["name"], where(source, "/name"));
    if (cfg.name.empty() || cfg.name.find_first_of("/\\ \t") != std::string::npos || cfg.name == "." || cfg.name == "..")
      fail(source, "/name", "\"" + cfg.name + "\" must be non-empty, without spaces or slashes (it names the output folder)");
  }
  if (c.contains("description")) as_string(c["description"], where(source, "/description"));

  cfg.problem = require(c, "problem", source, "");
  require_object(cfg.problem, where(source, "/problem"));

  if (c.contains("grid")) {
    require_object(c["grid"], where(source, "/grid"));
    for (const auto& [name, spec] : c["grid"].items()) {
      const std::string path = "/grid/" + name;
      if (!valid_identifier(name)) fail(source, path, "axis names are identifiers (letters, digits, _), like x0 or Am");
      if (name == "seed") fail(source, path, "\"seed\" is not a grid axis: give seeds in /seeds or /repeats");
      if (std::find(kReservedColumns.begin(), kReservedColumns.end(), name) != kReservedColumns.end())
        fail(source, path, "\"" + name + "\" is a reserved CSV column name; pick another axis name");
      cfg.grid.push_back({name, parse_axis(spec, source, path)});
    }
  }

  if (c.contains("seeds") && c.contains("repeats")) fail(source, "/repeats", "give either \"seeds\" or \"repeats\", not both");
  if (c.contains("seeds")) {
    const json& s = c["seeds"];
    if (!s.is_array()) fail(source, "/seeds", "expected a list of seeds, got " + json_type_text(s));
    if (s.empty()) fail(source, "/seeds", "the list of seeds is empty");
    std::set<std::uint64_t> seen;
    for (std::size_t i = 0; i < s.size(); ++i) {
      const std::string p = "/seeds/" + std::to_string(i);
      const std::uint64_t v = as_u64(s[i], where(source, p));  // 0 .. 2^64 - 1
      if (!seen.insert(v).second) fail(source, p, "seed " + s[i].dump() + " appears twice");
      cfg.seeds.push_back(v);
    }
  } else if (c.contains("repeats")) {
    const std::int64_t r = as_integer(c["repeats"], where(source, "/repeats"));
    if (r < 1 || r > 1000000) fail(source, "/repeats", c["repeats"].dump() + " must be between 1 and 1000000");
    for (std::int64_t i = 1; i <= r; ++i) cfg.seeds.push_back(static_cast<std::uint64_t>(i));  // seeds 1..repeats
  } else {
    cfg.seeds = {1};
  }

  const json& algs = require(c, "algorithms", source, "");
  if (!algs.is_array()) fail(source, "/algorithms", "expected a list of algorithms, got " + json_type_text(algs));
  if (algs.empty()) fail(source, "/algorithms", "the list of algorithms is empty");
  std::set<std::string> labels;
  for (std::size_t i = 0; i < algs.size(); ++i) {
    const std::string path = "/algorithms/" + std::to_string(i);
    require_object(algs[i], where(source, path));
    AlgorithmEntry e;
    e.spec = algs[i];
    e.label = fmt::format("a{}", i);  // (not "a" + to_string: GCC 12 warns -Wrestrict falsely)
    if (e.spec.contains("label")) {
      e.label = as_string(e.spec["label"], where(source, path + "/label"));
      if (e.label.empty()) fail(source, path + "/label", "the label is empty");
      check_printable(e.label, source, path + "/label");
      e.spec.erase("label");
    }
    if (!labels.insert(e.label).second) fail(source, path + "/label", "label \"" + e.label + "\" is used twice");
    cfg.algorithms.push_back(std::move(e));
  }

  if (c.contains("golden")) {
    require_object(c["golden"], where(source, "/golden"));
    check_keys(c["golden"], {"precision_bits"}, where(source, "/golden"));
    if (c["golden"].contains("precision_bits")) {
      const std::int64_t b = as_integer(c["golden"]["precision_bits"], where(source, "/golden/precision_bits"));
      // The golden's plain MPFR path needs >= 106 bits (exact products of two doubles; golden.cpp).
      if (b < 106 || b > 4096)
        fail(source, "/golden/precision_bits", c["golden"]["precision_bits"].dump() + " is outside [106, 4096]");
      cfg.golden_precision_bits = static_cast<int>(b);
    }
  }

  if (c.contains("score_format")) {
    cfg.score_format = as_string(c["score_format"], where(source, "/score_format"));
    as_named(c["score_format"], where(source, "/score_format"), format_by_name);
  }

  cfg.out_dir = "sweep-out/" + cfg.name;
  if (c.contains("outputs")) {
    const json& o = c["outputs"];
    require_object(o, where(source, "/outputs"));
    check_keys(o, {"dir", "csv", "summary"}, where(source, "/outputs"));
    if (o.contains("dir")) {
      cfg.out_dir = as_string(o["dir"], where(source, "/outputs/dir"));
      if (cfg.out_dir.empty()) fail(source, "/outputs/dir", "the folder name is empty");
    }
    if (o.contains("csv")) cfg.csv_name = get_file_name(o["csv"], source, "/outputs/csv");
    if (o.contains("summary")) cfg.summary_name = get_file_name(o["summary"], source, "/outputs/summary");
    if (cfg.csv_name == cfg.summary_name) fail(source, "/outputs/summary", "must differ from /outputs/csv");
    // Shard tables are named <stem>.shard-I-of-N<ext>: the summary may not take such a name either.
    const fs::path csv_path(cfg.csv_name);
    if (cfg.summary_name.starts_with(csv_path.stem().string() + ".shard-"))
      fail(source, "/outputs/summary", "\"" + cfg.summary_name + "\" could be the name of a shard table of /outputs/csv");
  }

  // Size first: the number of cases, with overflow-safe arithmetic, before anything expands the grid.
  const std::size_t cases = sat_mul(sat_mul(cfg.grid_points(), cfg.seeds.size()), cfg.algorithms.size());
  if (cases > kMaxSweepCases) {
    std::string axes;
    for (const auto& a : cfg.grid) axes += fmt::format("{}{} ({})", axes.empty() ? "" : " x ", a.name, a.values.size());
    fail(source, "/grid", fmt::format("{} grid points x {} seeds x {} algorithms = {} cases; at most {} cases per "
                                      "sweep (split it, e.g. into configs over parts of an axis){}",
                                      cfg.grid_points() == kTooLarge ? std::string("more than 2^64") : std::to_string(cfg.grid_points()),
                                      cfg.seeds.size(), cfg.algorithms.size(),
                                      cases == kTooLarge ? std::string("more than 2^64") : std::to_string(cases), kMaxSweepCases,
                                      axes.empty() ? "" : "; axes: " + axes));
  }

  // Placeholders: each "$name" must be a grid axis (or $seed); each axis must be used somewhere.
  std::vector<std::string> names = {"seed"};
  for (const auto& a : cfg.grid) names.push_back(a.name);
  std::vector<std::pair<std::string, std::string>> used;
  collect_placeholders(cfg.problem, "/problem", used);
  for (std::size_t i = 0; i < cfg.algorithms.size(); ++i)
    collect_placeholders(cfg.algorithms[i].spec, "/algorithms/" + std::to_string(i), used);
  bool seed_used = false;
  for (const auto& [name, path] : used) {
    if (std::find(names.begin(), names.end(), name) == names.end())
      fail(source, path, "placeholder \"$" + name + "\" has no grid axis" + did_you_mean(name, names) + "; axes: " + join(names));
    if (name == "seed") {
      if (path.rfind("/problem", 0) != 0) fail(source, path, "\"$seed\" belongs in /problem (it seeds the input generator)");
      seed_used = true;
    }
  }
  if (!seed_used) fail(source, "/problem", "no \"$seed\" placeholder: every seed would generate the same inputs");
  for (const auto& a : cfg.grid) {
    const bool found = std::any_of(used.begin(), used.end(), [&](const auto& u) { return u.first == a.name; });
    if (!found) fail(source, "/grid/" + a.name, "axis is not used: no \"$" + a.name + "\" in /problem or /algorithms");
  }
  return cfg;
}

SweepConfig load_sweep_config(const std::filesystem::path& file) {
  nlohmann::json j = read_json_file(file);
  // The user's tensors in the problem ({"npy": name}, io/problem_json.hpp) are named relative to the config's
  // folder, as in a problem file (a "$placeholder" is left to the grid).
  // A capture folder ({"capture": {"dir": folder}}) too.
  if (auto p = j.find("problem"); p != j.end() && p->is_object() && !file.parent_path().empty())
    for (const char* key : {"pse", "select", "kv_len", "capture"})
      if (auto t = p->find(key); t != p->end() && t->is_object())
        if (auto n = t->find(std::string(key) == "capture" ? "dir" : "npy"); n != t->end() && n->is_string()) {
          const std::filesystem::path f = n->get<std::string>();
          if (f.is_relative() && !f.empty() && !n->get<std::string>().starts_with('$'))
            *n = (file.parent_path() / f).lexically_normal().string();
        }
  return parse_sweep_config(j, file.string());
}

// The headline in a minute on 2 cores: at x0 = 30 the fp16 scores of FA-FP16/FP32 overflow (|S| ~ 30·30·128
// > 65504) and its output is all NaN, while PASA-FP16's shifted scores stay small; at x0 = 20 all three
// are finite and the RMSE shows the accuracy ranking. At the paper's shape (1, 16, 1280, 128): about
// 3–8 s per grid point on 2 cores (golden 3–5 s, each algorithm < 1 s).
std::string default_sweep_config_text() {
  return R"json({
  "name": "default",
  "description": "pasa-sweep built-in default: uniform inputs (PASA Eq. 17), Am = 0.5, x0 = 20 and 30, the paper's shape (1, 16, 1280, 128)",
  "problem": {
    "shape": {"B": 1, "Nq": 16, "Sq": 1280, "D": 128},
    "format": "fp16",
    "seed": "$seed",
    "generator": {"kind": "uniform", "x0": "$x0", "am": "$Am"}
  },
  "grid": {"x0": [20, 30], "Am": 0.5},
  "seeds": [1],
  "algorithms": [
    {"label": "FA-FP32", "name": "fa2", "alloc": "fa_fp32"},
    {"label": "FA-FP16/FP32", "name": "fa2", "alloc": "fa_fp16_fp32"},
    {"label": "PASA-FP16", "name": "pasa", "alloc": "pasa_fp16", "pasa": {"beta": 0.984497}}
  ],
  "golden": {"precision_bits": 128},
  "outputs": {"dir": "sweep-out/default"}
}
)json";
}

SweepConfig default_sweep_config() {
  return parse_sweep_config(json::parse(default_sweep_config_text()), "<built-in default>");
}

PlannedProblem plan_problem(const SweepConfig& cfg, std::size_t index) {
  PlannedProblem p;
  p.index = index;
  p.grid_index = index / cfg.seeds.size();
  p.seed_index = index % cfg.seeds.size();
  p.seed = cfg.seeds[p.seed_index];
  // Row-major over the axes: the last axis varies fastest.
  std::vector<std::string> names;
  std::vector<json> values(cfg.grid.size());
  std::size_t rest = p.grid_index;
  for (std::size_t k = cfg.grid.size(); k-- > 0;) {
    const auto& axis = cfg.grid[k].values;
    values[k] = axis[rest % axis.size()];
    rest /= axis.size();
  }
  for (const auto& a : cfg.grid) names.push_back(a.name);
  p.grid_values = values;
  names.push_back("seed");
  values.push_back(json(p.seed));
  p.problem = substitute(cfg.problem, names, values);
  for (const auto& a : cfg.algorithms) p.algorithms.push_back(substitute(a.spec, names, values));
  return p;
}

std::string describe(const SweepConfig& cfg, const PlannedProblem& p) {
  std::string out;
  for (std::size_t k = 0; k < cfg.grid.size(); ++k) out += cfg.grid[k].name + "=" + p.grid_values[k].dump() + ", ";
  return out + "seed=" + std::to_string(p.seed);
}

}  // namespace pasa
