// The results table of sweeps: its columns and rows, the checks of rows read back (--resume, merge), and what
// is made of complete tables: merge_sweeps, sweep_digest, paired_rmse_ratios and sweep_summary.
#include "pasa/study/sweep.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <regex>
#include <thread>

#include <fmt/format.h>

#include "pasa/core/error.hpp"
#include "pasa/io/json_check.hpp"
#include "pasa/io/output_file.hpp"
#include "pasa/study/detail/sweep_parts.hpp"
#include "pasa/study/seed_stats.hpp"

namespace pasa {

using nlohmann::json;
namespace fs = std::filesystem;

namespace {

// Fixed columns around the grid axes and metrics (see csv_header).
constexpr std::size_t kCaseIdCol = 0;
constexpr std::size_t kFixedLeading = 5;   // case_id, problem_id, grid_point, seed, algorithm
constexpr std::size_t kFixedTrailing = 4;  // problem_json, algorithm_json, golden_time_s, time_s

std::size_t parse_index(const std::string& s, const std::string& what) {
  if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos || s.size() > 18)
    throw InputError(what + ": \"" + s + "\" is not a non-negative integer");
  return std::stoull(s);
}

std::string csv_name_with(const std::string& name, const std::string& infix) {
  const fs::path p(name);
  return p.stem().string() + infix + p.extension().string();
}

std::size_t row_case_id(const CsvRow& row, const std::string& where) {
  return parse_index(row.at(kCaseIdCol), where + ": case_id");
}

// Why a row read back from disk does not belong to this config's case `id`: the first identity column
// (problem_id, grid_point, seed, algorithm, grid values, problem_json, algorithm_json) that differs from the
// plan, named with both values; empty when the row is that case's.
std::string plan_mismatch(const SweepConfig& cfg, const CsvRow& header, const CsvRow& row, std::size_t id) {
  const PlannedProblem p = plan_problem(cfg, id / cfg.algorithms.size());
  const std::size_t a = id % cfg.algorithms.size();
  std::vector<std::pair<std::size_t, std::string>> want = {
      {1, std::to_string(p.index)}, {2, std::to_string(p.grid_index)}, {3, std::to_string(p.seed)},
      {4, cfg.algorithms[a].label}, {row.size() - 4, p.problem.dump()}, {row.size() - 3, p.algorithms[a].dump()}};
  for (std::size_t k = 0; k < p.grid_values.size(); ++k) {
    const json& v = p.grid_values[k];
    want.emplace_back(kFixedLeading + k, v.is_string() ? v.get<std::string>() : v.dump());
  }
  for (const auto& [c, text] : want)
    if (row[c] != text)
      return fmt::format("column {} is \"{}\", case {} of the config has \"{}\"", header[c], row[c].substr(0, 80), id,
                         text.substr(0, 80));
  return "";
}

// The first metric or timing field of a row read back (--resume, merge) that does not parse as a number,
// named with its column; empty when all do.
std::string number_problem(const SweepConfig& cfg, const CsvRow& header, const CsvRow& row) {
  for (std::size_t c = kFixedLeading + cfg.grid.size(); c < row.size(); ++c) {
    if (c == row.size() - 4 || c == row.size() - 3) continue;  // the JSON columns (plan_mismatch checks them)
    try {
      parse_csv_number(row[c]);
    } catch (const InputError&) {
      return fmt::format("column {}: \"{}\" is not a number", header[c], row[c].substr(0, 40));
    }
  }
  return "";
}

std::string hostname() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

}  // namespace

namespace detail {

CsvRow make_row(const SweepConfig& cfg, const PlannedProblem& p, std::size_t a, const std::vector<double>& metrics,
                double golden_s, double seconds) {
  CsvRow row;
  row.push_back(std::to_string(p.index * cfg.algorithms.size() + a));
  row.push_back(std::to_string(p.index));
  row.push_back(std::to_string(p.grid_index));
  row.push_back(std::to_string(p.seed));
  row.push_back(cfg.algorithms[a].label);
  for (const auto& v : p.grid_values) row.push_back(v.is_string() ? v.get<std::string>() : v.dump());
  for (double m : metrics) row.push_back(csv_number(m));
  row.push_back(p.problem.dump());
  row.push_back(p.algorithms[a].dump());
  row.push_back(fmt::format("{:.6f}", golden_s));
  row.push_back(fmt::format("{:.6f}", seconds));
  return row;
}

std::string resume_row_problem(const SweepConfig& cfg, const CsvRow& header, const std::string& row_text,
                               const SweepOptions& opt, std::size_t& id, CsvRow& row) {
  try {
    row = parse_csv_line(row_text);
  } catch (const InputError&) {
    return "a quoted field is not terminated";
  }
  if (row.size() != header.size()) return fmt::format("{} fields, the header has {}", row.size(), header.size());
  try {
    id = row_case_id(row, "case_id");
  } catch (const InputError&) {
    return fmt::format("case_id \"{}\" is not a case number", row[kCaseIdCol].substr(0, 40));
  }
  if (id >= cfg.case_count()) return fmt::format("case_id {} is not a case of this sweep (it has {})", id, cfg.case_count());
  if ((id / cfg.algorithms.size()) % opt.shard_count != opt.shard_index)
    return fmt::format("case_id {} belongs to another shard than {}/{}", id, opt.shard_index, opt.shard_count);
  if (std::string why = plan_mismatch(cfg, header, row, id); !why.empty()) return why;
  return number_problem(cfg, header, row);
}

std::string table_text(const CsvRow& header, std::vector<CsvRow> rows) {
  std::sort(rows.begin(), rows.end(), [](const CsvRow& x, const CsvRow& y) {
    return std::stoull(x[kCaseIdCol]) < std::stoull(y[kCaseIdCol]);
  });
  std::string text = csv_line(header);
  for (const auto& r : rows) text += csv_line(r);
  return text;
}

}  // namespace detail

using detail::FolderLock;
using detail::make_folder;
using detail::flat_csv_name;
using detail::flat_table_text;
using detail::table_text;

void parse_shard(const std::string& text, std::size_t& index, std::size_t& count) {
  const auto slash = text.find('/');
  if (slash == std::string::npos) throw InputError("shard \"" + text + "\": must be I/N, e.g. 0/4");
  index = parse_index(text.substr(0, slash), "shard " + text);
  count = parse_index(text.substr(slash + 1), "shard " + text);
  if (count == 0 || index >= count)
    throw InputError("shard " + text + ": needs 0 <= I < N (shards are numbered from 0)");
}

std::vector<std::string> csv_header(const SweepConfig& cfg, const SweepBackend& backend) {
  std::vector<std::string> h = {"case_id", "problem_id", "grid_point", "seed", "algorithm"};
  for (const auto& a : cfg.grid) h.push_back(a.name);
  for (const auto& c : backend.problem_columns) h.push_back(c);
  for (const auto& c : backend.algorithm_columns) h.push_back(c);
  for (const char* c : {"problem_json", "algorithm_json", "golden_time_s", "time_s"}) h.push_back(c);
  return h;
}

std::string shard_csv_name(const SweepConfig& cfg, std::size_t index, std::size_t count) {
  if (count == 1) return cfg.csv_name;
  return csv_name_with(cfg.csv_name, fmt::format(".shard-{}-of-{}", index, count));
}

SweepReport merge_sweeps(const std::vector<fs::path>& dirs, const fs::path& out_dir) {
  if (dirs.empty()) throw InputError("merge: no folders given");
  json raw;
  fs::path raw_from;
  for (const auto& d : dirs) {
    const fs::path f = d / "config.json";
    if (!fs::exists(f)) throw InputError("merge: " + f.string() + " not found (is " + d.string() + " a sweep folder?)");
    json j = read_json_file(f);
    if (raw_from.empty()) {
      raw = std::move(j);
      raw_from = f;
    } else if (j != raw) {
      throw InputError("merge: " + f.string() + " differs from " + raw_from.string() + ": shards of different sweeps");
    }
  }
  const SweepConfig cfg = parse_sweep_config(raw, raw_from.string());

  // Shard tables: <stem>.shard-I-of-N<ext>, one of each I for a single N.
  const fs::path csv(cfg.csv_name);
  const std::regex pattern(std::regex_replace(csv.stem().string(), std::regex(R"([.^$|()\[\]{}*+?\\])"), R"(\$&)") +
                           R"(\.shard-(\d+)-of-(\d+))" +
                           std::regex_replace(csv.extension().string(), std::regex(R"([.^$|()\[\]{}*+?\\])"), R"(\$&)"));
  std::map<std::size_t, fs::path> shards;
  std::size_t count = 0;
  for (const auto& d : dirs)
    for (const auto& entry : fs::directory_iterator(d)) {
      std::smatch m;
      const std::string name = entry.path().filename().string();
      if (!std::regex_match(name, m, pattern)) continue;
      const std::size_t i = parse_index(m[1], "merge: " + entry.path().string()),
                        n = parse_index(m[2], "merge: " + entry.path().string());
      if (count == 0) count = n;
      if (n != count) throw InputError(fmt::format("merge: {} belongs to a split into {} shards, others to {}", entry.path().string(), n, count));
      if (shards.count(i) && fs::canonical(shards[i]) != fs::canonical(entry.path()))
        throw InputError(fmt::format("merge: shard {}/{} found twice: {} and {}", i, n, shards[i].string(), entry.path().string()));
      shards[i] = entry.path();
    }
  if (count == 0) throw InputError("merge: no shard tables (" + csv.stem().string() + ".shard-I-of-N" + csv.extension().string() + ") in the given folders");
  for (std::size_t i = 0; i < count; ++i)
    if (!shards.count(i))
      throw InputError(fmt::format("merge: shard {}/{} is missing (not run, or still running: its table is written when it completes)", i, count));

  CsvRow header;
  std::map<std::size_t, CsvRow> rows;
  for (const auto& [i, file] : shards) {
    const CsvFileLines lines = read_complete_lines(file);
    if (lines.torn || lines.lines.empty()) throw InputError("merge: " + file.string() + " is incomplete");
    const CsvRow h = parse_csv_line(lines.lines[0]);
    if (header.empty()) header = h;
    if (h != header) throw InputError("merge: " + file.string() + " has different columns from the other shards");
    for (std::size_t k = 1; k < lines.lines.size(); ++k) {
      CsvRow row = parse_csv_line(lines.lines[k]);
      if (row.size() != header.size()) throw InputError(fmt::format("merge: {} line {}: wrong number of fields", file.string(), k + 1));
      const std::size_t id = row_case_id(row, file.string());
      if (id >= cfg.case_count() || !plan_mismatch(cfg, header, row, id).empty())
        throw InputError(fmt::format("merge: {} line {}: case {} does not belong to this config", file.string(), k + 1, id));
      if (const std::string why = number_problem(cfg, header, row); !why.empty())
        throw InputError(fmt::format("merge: {} line {}: {}", file.string(), k + 1, why));
      if (!rows.emplace(id, std::move(row)).second) throw InputError(fmt::format("merge: case {} appears twice", id));
    }
  }
  if (rows.size() != cfg.case_count())
    throw InputError(fmt::format("merge: {} of {} cases found", rows.size(), cfg.case_count()));
  if (header.size() < kFixedLeading + kFixedTrailing + cfg.grid.size()) throw InputError("merge: unexpected columns");

  make_folder(out_dir);
  const FolderLock lock(out_dir);
  SweepReport report;
  report.csv = out_dir / cfg.csv_name;
  report.summary = out_dir / cfg.summary_name;
  report.cases_reused = rows.size();
  const fs::path config_file = out_dir / "config.json";
  if (fs::exists(config_file) && read_json_file(config_file) != cfg.raw)
    throw InputError("merge: " + out_dir.string() + " holds a sweep of a different config");
  write_file_atomic(config_file, cfg.raw.dump(2) + "\n");
  std::vector<CsvRow> list;
  for (auto& [id, row] : rows) list.push_back(std::move(row));
  report.flat_csv = out_dir / flat_csv_name(cfg.csv_name);
  write_files_atomic({{report.csv, table_text(header, list)},
                      {report.summary, sweep_summary(cfg, header, list).dump(2) + "\n"},
                      {report.flat_csv, flat_table_text(header, list)}});
  return report;
}

std::string sweep_digest(const SweepConfig& cfg, const fs::path& csv, std::size_t max_lines) {
  const CsvFileLines lines = read_complete_lines(csv);
  if (lines.lines.empty()) return "";
  const CsvRow header = parse_csv_line(lines.lines[0]);
  auto col = [&](const char* name) -> std::ptrdiff_t {
    const auto it = std::find(header.begin(), header.end(), name);
    return it == header.end() ? -1 : it - header.begin();
  };
  const std::ptrdiff_t rmse = col("rmse"), nan = col("nan_pct");
  // (grid point, algorithm) -> sums over seeds; NaN RMSEs (outputs holding NaN) are counted apart.
  struct Acc { double rmse = 0, nan = 0; std::size_t n = 0, finite = 0; };
  std::map<std::pair<std::size_t, std::size_t>, Acc> acc;
  for (std::size_t i = 1; i < lines.lines.size(); ++i) {
    const CsvRow r = parse_csv_line(lines.lines[i]);
    const std::size_t id = std::stoull(r[kCaseIdCol]);
    Acc& a = acc[{id / cfg.algorithms.size() / cfg.seeds.size(), id % cfg.algorithms.size()}];
    ++a.n;
    if (rmse >= 0 && std::isfinite(parse_csv_number(r[rmse]))) a.rmse += parse_csv_number(r[rmse]), ++a.finite;
    if (nan >= 0) a.nan += parse_csv_number(r[nan]);
  }
  std::size_t width = 16;
  for (const auto& a : cfg.algorithms) width = std::max(width, a.label.size());
  std::string out = fmt::format("{:<36} {:<{}} {:>12} {:>9}\n", "grid point", "algorithm", width, "RMSE (mean)", "NaN %");
  std::size_t shown = 0;
  for (const auto& [key, a] : acc) {
    if (shown++ == max_lines) {
      out += fmt::format("... ({} more; see {})\n", acc.size() - max_lines, csv.string());
      break;
    }
    std::string point;
    const PlannedProblem p = plan_problem(cfg, key.first * cfg.seeds.size());
    for (std::size_t k = 0; k < cfg.grid.size(); ++k) point += (k ? ", " : "") + cfg.grid[k].name + "=" + p.grid_values[k].dump();
    const std::string r = a.finite == 0 ? "NaN" : fmt::format("{:.3e}", a.rmse / static_cast<double>(a.finite));
    out += fmt::format("{:<36} {:<{}} {:>12} {:>9.4g}\n", point, cfg.algorithms[key.second].label, width, r, a.nan / static_cast<double>(a.n));
  }
  return out;
}

// Paired comparisons (seed_stats.hpp): at each grid point, for every pair of algorithms (a before b
// in the config), the per-seed ratio rmse_a / rmse_b on the same inputs, as a geometric mean with its 95 %
// t interval. "pairs" counts the seeds where both RMSEs are finite and positive (the others are left out);
// with fewer than 2 the ratio and its interval are null and "note" says why (one seed is no spread: a ratio
// without an interval would read as a claim).
json paired_rmse_ratios(const SweepConfig& cfg, const CsvRow& header, const std::vector<CsvRow>& rows) {
  json out = json::array();
  const auto it = std::find(header.begin(), header.end(), "rmse");
  if (it == header.end() || cfg.algorithms.size() < 2) return out;
  const std::size_t rmse = static_cast<std::size_t>(it - header.begin());
  const std::size_t A = cfg.algorithms.size(), S = cfg.seeds.size();
  // values[grid point][algorithm][seed index]
  std::map<std::size_t, std::vector<std::vector<double>>> values;
  for (const auto& r : rows) {
    const std::size_t id = std::stoull(r[kCaseIdCol]), pi = id / A;
    auto& v = values[pi / S];
    if (v.empty()) v.assign(A, std::vector<double>(S, NAN));
    v[id % A][pi % S] = parse_csv_number(r[rmse]);
  }
  for (const auto& [g, v] : values) {
    json params = json::object();
    const PlannedProblem p = plan_problem(cfg, g * S);
    for (std::size_t k = 0; k < cfg.grid.size(); ++k) params[cfg.grid[k].name] = p.grid_values[k];
    for (std::size_t a = 0; a < A; ++a)
      for (std::size_t b = a + 1; b < A; ++b) {
        json c;
        c["grid_point"] = g;
        c["params"] = params;
        c["metric"] = "rmse";
        c["numerator"] = cfg.algorithms[a].label;
        c["denominator"] = cfg.algorithms[b].label;
        const auto r = paired_ratio(v[a], v[b]);
        std::size_t pairs = 0;  // (as paired_ratio counts them: seed_stats.hpp)
        for (std::size_t i = 0; i < S; ++i)
          pairs += std::isfinite(v[a][i]) && std::isfinite(v[b][i]) && v[a][i] > 0 && v[b][i] > 0;
        c["pairs"] = pairs;
        if (!r)
          c["note"] = fmt::format("{} seed{} with both RMSEs finite and positive: a paired ratio needs 2 or more",
                                  pairs, pairs == 1 ? "" : "s");
        c["ratio_geo_mean"] = r ? json(r->geo_mean) : json(nullptr);
        c["ratio_ci95"] = r ? json::array({r->lo, r->hi}) : json(nullptr);
        c["ci95_excludes_1"] = r ? json(r->excludes_one()) : json(nullptr);
        out.push_back(std::move(c));
      }
  }
  return out;
}

json sweep_summary(const SweepConfig& cfg, const CsvRow& header, const std::vector<CsvRow>& rows) {
  // Metric columns: everything between the grid axes and the JSON columns, plus the two timings.
  const std::size_t first_metric = kFixedLeading + cfg.grid.size();
  std::vector<std::size_t> metric_cols;
  for (std::size_t c = first_metric; c + kFixedTrailing < header.size(); ++c) metric_cols.push_back(c);
  metric_cols.push_back(header.size() - 2);
  metric_cols.push_back(header.size() - 1);

  // Group by (grid point, algorithm), in table order.
  std::map<std::pair<std::size_t, std::size_t>, std::vector<const CsvRow*>> groups;
  for (const auto& r : rows) {
    const std::size_t id = std::stoull(r[kCaseIdCol]);
    groups[{id / cfg.algorithms.size() / cfg.seeds.size(), id % cfg.algorithms.size()}].push_back(&r);
  }
  json out_groups = json::array();
  bool sd_null = false;
  for (const auto& [key, members] : groups) {
    json g;
    g["grid_point"] = key.first;
    g["algorithm"] = cfg.algorithms[key.second].label;
    json params = json::object();
    for (std::size_t k = 0; k < cfg.grid.size(); ++k) params[cfg.grid[k].name] = plan_problem(cfg, key.first * cfg.seeds.size()).grid_values[k];
    g["params"] = params;
    g["seeds"] = members.size();
    json metrics = json::object();
    for (std::size_t c : metric_cols) {
      // Non-finite values (e.g. the RMSE of an output holding NaN) are counted, not averaged.
      std::vector<double> xs;
      std::size_t non_finite = 0;
      for (const CsvRow* r : members) {
        const double x = parse_csv_number((*r)[c]);
        if (std::isfinite(x)) xs.push_back(x); else ++non_finite;
      }
      json s;
      s["non_finite"] = non_finite;
      if (xs.empty()) {
        s["mean"] = s["sd"] = s["min"] = s["max"] = nullptr;
      } else {
        double sum = 0;
        for (double x : xs) sum += x;
        const double mean = sum / static_cast<double>(xs.size());
        double ss = 0;
        for (double x : xs) ss += (x - mean) * (x - mean);
        s["mean"] = mean;
        // The sample sd; null from one value (no spread is known; 0 would claim none). Noted in "notes".
        s["sd"] = xs.size() > 1 ? json(std::sqrt(ss / static_cast<double>(xs.size() - 1))) : json(nullptr);
        sd_null = sd_null || xs.size() < 2;
        s["min"] = *std::min_element(xs.begin(), xs.end());
        s["max"] = *std::max_element(xs.begin(), xs.end());
      }
      metrics[header[c]] = s;
    }
    g["metrics"] = metrics;
    out_groups.push_back(std::move(g));
  }
  json summary;
  summary["name"] = cfg.name;
  summary["paired"] = paired_rmse_ratios(cfg, header, rows);
  summary["config"] = cfg.raw;
  summary["toolkit"] = {{"name", "pasa"}, {"version", PASA_VERSION}};
  summary["machine"] = {{"hostname", hostname()}, {"cores", std::thread::hardware_concurrency()}};
  summary["cases"] = rows.size();
  summary["seeds"] = cfg.seeds;
  summary["groups"] = std::move(out_groups);
  // What a reader of a one-seed summary would otherwise misread (docs/sweeps.md "summary.json").
  json notes = json::array();
  if (cfg.seeds.size() < 2)
    notes.push_back("one seed: no spread over seeds is known; every sd, paired ratio and interval is null");
  else if (sd_null)
    notes.push_back("an sd is null where fewer than 2 seeds gave a finite value");
  if (!notes.empty()) summary["notes"] = std::move(notes);
  return summary;
}

}  // namespace pasa
