// Planning a sweep (sweep.hpp): everything checked before anything is created (validate_with_backend,
// validate_sweep), the dealing order (schedule_problems), and what an earlier run left: the rows read back
// for --resume (plan_sweep) and a finished folder (folder_is_complete).
#include "pasa/study/sweep.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include <fmt/format.h>

#include "pasa/core/error.hpp"
#include "pasa/core/memory.hpp"
#include "pasa/io/json_check.hpp"
#include "pasa/io/output_file.hpp"
#include "pasa/study/detail/sweep_parts.hpp"

namespace pasa {

using nlohmann::json;
namespace fs = std::filesystem;

SweepSchedule schedule_problems(const std::vector<std::size_t>& problems, const std::vector<double>& costs, int threads,
                                int jobs) {
  if (costs.size() != problems.size()) throw std::logic_error("schedule_problems: one cost per problem");
  jobs = std::max(1, jobs);
  SweepSchedule s;
  s.threads = std::max(1, threads / jobs);
  s.slots = jobs * s.threads;
  std::vector<std::size_t> by_cost(problems.size());
  for (std::size_t i = 0; i < by_cost.size(); ++i) by_cost[i] = i;
  // NaN costs (a backend's mistake) count as 0: the comparison must stay a strict weak order.
  auto cost = [&](std::size_t i) { return std::isnan(costs[i]) ? 0.0 : costs[i]; };
  std::stable_sort(by_cost.begin(), by_cost.end(), [&](std::size_t a, std::size_t b) { return cost(a) > cost(b); });
  for (std::size_t i : by_cost) s.order.push_back(problems[i]);
  return s;
}

std::size_t validate_with_backend(const SweepConfig& cfg, const SweepBackend& backend, int threads) {
  // Every CSV column once: a grid axis named like a metric ("rmse") would make two columns of one name.
  const std::vector<std::string> header = csv_header(cfg, backend);
  for (std::size_t c = 0; c < header.size(); ++c)
    if (std::find(header.begin(), header.begin() + static_cast<std::ptrdiff_t>(c), header[c]) != header.begin() + static_cast<std::ptrdiff_t>(c))
      throw InputError(fmt::format("{}:/grid/{}: \"{}\" is also the name of a column the sweep writes (a metric); "
                                   "pick another axis name", cfg.source, header[c], header[c]));
  if (cfg.case_count() > kMaxSweepCases)  // parse_sweep_config refuses these; a config built in code may not
    throw InputError(fmt::format("{}: {} cases is more than the {} a sweep may have", cfg.source, cfg.case_count(), kMaxSweepCases));
  // Identical expansions are checked once (algorithms without placeholders, problems differing by seed only
  // are checked at the first seed: a seed never makes a problem invalid).
  std::set<std::string> checked;
  std::size_t peak = 0;
  for (std::size_t g = 0; g < cfg.grid_points(); ++g) {
    const PlannedProblem p = plan_problem(cfg, g * cfg.seeds.size());
    auto check = [&](const auto& fn, const json& j, const std::string& path) {
      if (!checked.insert(path + "\n" + j.dump()).second) return;
      try {
        fn(j, path);
      } catch (const InputError& e) {
        std::string where;
        for (std::size_t k = 0; k < cfg.grid.size(); ++k) where += (k ? ", " : " (grid point ") + cfg.grid[k].name + "=" + p.grid_values[k].dump();
        if (!where.empty()) where += ")";
        // Messages from the parsers start with the JSON path; those that do not get it in front.
        const std::string msg = e.what();
        throw InputError(cfg.source + ":" + (msg.rfind(path, 0) == 0 ? msg : path + ": " + msg) + where);
      }
    };
    const std::size_t before = checked.size();
    check(backend.check_problem, p.problem, "/problem");
    for (std::size_t a = 0; a < cfg.algorithms.size(); ++a)
      check(backend.check_algorithm, p.algorithms[a], "/algorithms/" + std::to_string(a));
    if (backend.check_case)
      for (std::size_t a = 0; a < cfg.algorithms.size(); ++a) {
        // validate_case's messages start with a pointer inside the algorithm ("/quant/hadamard: ...").
        const std::string path = "/algorithms/" + std::to_string(a);
        check([&](const json& j, const std::string&) {
          try {
            backend.check_case(j[0], j[1], path);
          } catch (const InputError& e) {
            const std::string msg = e.what();
            throw InputError(msg.starts_with('/') && !msg.starts_with(path) && !msg.starts_with("/problem") ? path + msg : msg);
          }
        }, json::array({p.problem, p.algorithms[a]}), path);
      }
    if (backend.memory_bytes && checked.size() != before) peak = std::max(peak, backend.memory_bytes(p, cfg, threads));
  }
  return peak;
}

namespace detail {

// Everything checked before anything is created: the options, every grid point (validate_with_backend) and
// the memory the run needs (the largest problem `at_once` times, plus the rows the runner keeps: every row of
// the table, for the final sort and summary).
void validate_sweep(const SweepConfig& cfg, const SweepBackend& backend, const SweepOptions& opt) {
  if (opt.shard_count == 0 || opt.shard_index >= opt.shard_count) throw InputError("shard index out of range");
  if (opt.jobs < 1) throw InputError(fmt::format("jobs = {}: a sweep runs at least one problem at a time", opt.jobs));
  const int at_once = opt.slots ? opt.slots->size() : opt.jobs;  // problems in memory at the same time
  const std::size_t problem_peak =
      sat_mul(static_cast<std::size_t>(at_once), validate_with_backend(cfg, backend, std::max(1, opt.threads / at_once)));
  if (!backend.memory_bytes) return;
  const PlannedProblem first = plan_problem(cfg, 0);
  std::size_t row_bytes = 64 * (csv_header(cfg, backend).size() + 8) + first.problem.dump().size();
  for (const auto& a : first.algorithms) row_bytes += a.dump().size() / first.algorithms.size();
  const std::size_t need = sat_add(problem_peak, sat_mul(row_bytes, cfg.case_count()));
  check_memory(need, opt.max_memory, "this sweep",
               fmt::format("largest problem {} ({} at once), {} table rows kept {}",
                           bytes_text(problem_peak / static_cast<std::size_t>(at_once)), at_once, cfg.case_count(),
                           bytes_text(sat_mul(row_bytes, cfg.case_count()))));
}

void warn_of(const SweepOptions& opt, const std::string& msg) {
  if (opt.warn) opt.warn(msg);
  else std::fprintf(stderr, "pasa-sweep: warning: %s\n", msg.c_str());
}

// Rows read back are validated one by one: a bad row (torn, wrong field count, unknown case, fields that do
// not match the plan, a metric that is not a number) is dropped with a warning naming file and line, so its
// case runs again. A case found on several lines is kept once when every copy is the same text, and
// otherwise dropped (all copies) and run again: which copy is right cannot be known.
SweepPlan plan_sweep(const SweepConfig& cfg, const SweepOptions& opt, const CsvRow& header, const fs::path& csv,
                     const fs::path& partial) {
  SweepPlan plan;
  for (std::size_t i = opt.shard_index; i < cfg.problem_count(); i += opt.shard_count) plan.problems.push_back(i);
  plan.total = plan.problems.size() * cfg.algorithms.size();
  struct Found { CsvRow row; std::string text, where; fs::path file; };
  std::map<std::size_t, std::vector<Found>> found;
  auto load = [&](const fs::path& file) {
    if (!fs::exists(file)) return;
    const CsvFileLines lines = read_complete_lines(file);
    if (lines.torn)
      warn_of(opt, fmt::format("{}: line {}: torn (the run was interrupted mid-row); dropped, its case runs again",
                               file.string(), lines.lines.size() + 1));
    if (lines.lines.empty()) return;
    if (parse_csv_line(lines.lines[0]) != header)
      throw InputError(file.string() + ": its columns differ from this sweep's; choose another output folder");
    for (std::size_t i = 1; i < lines.lines.size(); ++i) {
      std::size_t id = 0;
      CsvRow row;
      const std::string where = fmt::format("{}: line {}", file.string(), i + 1);
      const std::string why = resume_row_problem(cfg, header, lines.lines[i], opt, id, row);
      if (!why.empty()) {
        warn_of(opt, where + ": " + why + "; dropped, its case runs again");
        continue;
      }
      found[id].push_back({std::move(row), lines.lines[i], where, file});
    }
  };
  load(csv);
  load(partial);
  for (auto& [id, copies] : found) {
    bool same = true;
    for (const Found& f : copies) same = same && f.text == copies[0].text;
    if (!same) {
      for (const Found& f : copies)
        warn_of(opt, fmt::format("{}: case {} is on {} lines that differ; dropped, the case runs again", f.where, id,
                                 copies.size()));
      continue;
    }
    for (std::size_t k = 1; k < copies.size(); ++k)  // (results.csv and its partial file both: a crash between
      if (copies[k].file == copies[0].file)          // writing the table and removing the partial file)
        warn_of(opt, fmt::format("{}: case {} again (as on {}); the copy is dropped", copies[k].where, id, copies[0].where));
    plan.done.emplace(id, std::move(copies[0].row));
  }
  for (std::size_t pi : plan.problems)
    for (std::size_t a = 0; a < cfg.algorithms.size(); ++a)
      if (!plan.done.count(pi * cfg.algorithms.size() + a)) {
        plan.todo.push_back(pi);
        break;
      }
  return plan;
}

// A second run into a finished folder (the README's main job run twice): complete when there is no partial
// file, the summary is there (an unsharded run), and the table holds every case, each valid (plan_sweep,
// its warnings kept, not printed). Then `report` says so; nothing is written.
bool folder_is_complete(const SweepConfig& cfg, const SweepOptions& opt, const CsvRow& header, SweepReport& report,
                        const fs::path& partial) {
  if (fs::exists(partial) || (!report.summary.empty() && !fs::exists(report.summary))) return false;
  std::size_t warnings = 0;
  SweepOptions counted = opt;
  counted.warn = [&warnings](const std::string&) { ++warnings; };
  const SweepPlan plan = plan_sweep(cfg, counted, header, report.csv, partial);
  if (warnings > 0 || !plan.todo.empty() || plan.done.size() != plan.total) return false;
  report.cases_reused = plan.done.size();
  report.already_complete = true;
  return true;
}

}  // namespace detail

std::vector<std::pair<std::string, fs::path>> sweep_input_files(const SweepConfig& cfg) {
  std::vector<std::pair<std::string, fs::path>> out;
  std::error_code ec;
  if (fs::is_regular_file(cfg.source, ec)) out.emplace_back("the config", cfg.source);
  for (const char* key : {"pse", "select", "kv_len"})  // (load_sweep_config resolved them)
    if (auto t = cfg.problem.find(key); t != cfg.problem.end() && t->is_object())
      if (auto n = t->find("npy"); n != t->end() && n->is_string())
        out.emplace_back(fmt::format("{}:/problem/{}/npy", cfg.source, key), n->get<std::string>());
  if (auto c = cfg.problem.find("capture"); c != cfg.problem.end() && c->is_object())
    if (auto d = c->find("dir"); d != c->end() && d->is_string())
      for (const fs::path& f : files_in(d->get<std::string>(), 1))
        out.emplace_back(cfg.source + ":/problem/capture/dir", f);
  return out;
}

}  // namespace pasa
