// Running a sweep (sweep.hpp): validation, the schedule, the workers, the output folder and its lock; the
// table's rows are sweep_table.cpp's, the library backend sweep_backend.cpp's.
#include "pasa/study/sweep.hpp"

#include <fcntl.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <memory>
#include <set>
#include <thread>
#include <exception>
#include <mutex>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include <fmt/format.h>

#include "pasa/core/error.hpp"
#include "pasa/core/memory.hpp"
#include "pasa/io/json_check.hpp"
#include "pasa/io/output_file.hpp"
#include "pasa/study/detail/sweep_parts.hpp"

namespace pasa {

using nlohmann::json;
namespace fs = std::filesystem;
using detail::FolderLock;
using detail::make_folder;
using detail::make_row;
using detail::resume_row_problem;
using detail::table_text;

namespace detail {

bool make_folder(const fs::path& dir) {
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
    throw InputError(dir.string() + ": exists and is not a folder; choose another output folder");
  const bool created = fs::create_directories(dir, ec);
  if (ec) throw InputError(dir.string() + ": cannot create the output folder: " + ec.message());
  return created;
}

FolderLock::FolderLock(const fs::path& dir) : file_(dir / kSweepLockName) {
  fd_ = ::open(file_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) throw InputError(file_.string() + ": cannot create the lock file: " + std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    ::close(fd_);
    throw InputError(dir.string() + " is in use by another pasa-sweep run (it holds " + file_.string() +
                     "); wait for it to finish, or choose another output folder");
  }
}
FolderLock::~FolderLock() { ::close(fd_); }

}  // namespace detail

void one_malloc_arena() {
#if defined(__GLIBC__)
  // Problems side by side run on worker threads, and glibc gives threads their own arenas, made of 64 MiB
  // heaps that are unmapped as soon as they are empty: every case would fault its tensors' pages in afresh
  // (measured: 5-18 s of system time for the paper's sweeps instead of under 1 s). One arena for the whole
  // process keeps keep_freed_memory's pages in use (a few large blocks per case: the shared lock costs
  // nothing measurable). It must be set before a second thread allocates (an arena, once made, stays).
  static const bool done = [] { return mallopt(M_ARENA_MAX, 1) == 1; }();
  (void)done;
#endif
}

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

namespace {

// run_sweep's four steps: validate (everything, before anything is created), plan (this shard's cases and
// those an earlier run finished), execute (the cases still to run, rows appended to the partial file as they
// finish), summarise (the table and its summary, together).

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

// The cases of one run: this shard's problems, the rows already done (read back from the table and the
// partial file), and the problems with a case still to run, in order.
struct SweepPlan {
  std::vector<std::size_t> problems;
  std::size_t total = 0;  // cases of this shard
  std::map<std::size_t, CsvRow> done;
  std::vector<std::size_t> todo;
};

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

// Runs the plan's problems still to do (`jobs` or the shared slots' count at once; workers take the next
// problem as they become free), each finished case appended to the partial file and entered in plan.done.
// rows_exist: set once a row is on disk. The first error stops the workers after their problem and is
// rethrown.
void execute_sweep(const SweepConfig& cfg, const SweepBackend& backend, const SweepOptions& opt, const CsvRow& header,
                   const fs::path& partial, SweepPlan& plan, SweepReport& report, bool& rows_exist) {
  std::map<std::size_t, CsvRow>& done = plan.done;
  {  // The partial file restarts from its valid rows (atomically), so new rows follow a complete line.
    std::string text = csv_line(header);
    for (const auto& [id, row] : done) text += csv_line(row);
    write_file_atomic(partial, text);
  }
  keep_freed_memory();  // every case allocates the same tensors again: reuse the pages (core/memory.hpp)
  const KeepBigBlocks keep_big_blocks;  // the same for blocks of 32 MiB and more
  one_malloc_arena();
  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  // The dealing order and each problem's threads (schedule_problems); the costs once per grid point (a
  // seed never changes them). Sweeps sharing slots (reproduce_paper) run every problem on their share.
  const std::size_t seeds = cfg.seeds.size();
  std::map<std::size_t, double> point_cost;
  std::vector<double> costs;
  for (std::size_t pi : plan.todo) {
    auto it = point_cost.find(pi / seeds);
    if (it == point_cost.end())
      it = point_cost.emplace(pi / seeds, backend.cost ? backend.cost(plan_problem(cfg, pi / seeds * seeds), cfg) : 0.0).first;
    costs.push_back(it->second);
  }
  const int at_once = opt.slots ? opt.slots->size() : opt.jobs;
  const SweepSchedule schedule = schedule_problems(plan.todo, costs, opt.threads, at_once);
  const std::shared_ptr<CaseSlots> slots = opt.slots ? opt.slots : std::make_shared<CaseSlots>(schedule.slots);
  AppendFile out(partial);
  std::mutex m;  // guards out, done, report, rows_exist, next, error and the progress callback
  std::size_t next = 0;
  std::exception_ptr error;
  // A worker runs problems until none is left, each holding its threads' slots (shared slots: one, at the
  // sweep's priority; our own: its place in the dealing order); then it helps the loops of the problems
  // still running with as many threads, one slot each while inside a loop (core/parallel.hpp).
  const int held = opt.slots ? 1 : schedule.threads;
  auto run_problems = [&] {
    const LoopHelpers::Member member(slots->helpers());
    for (;;) {
      std::size_t k;
      {
        std::lock_guard<std::mutex> lock(m);
        if (error || next == schedule.order.size()) return;
        k = next++;
      }
      slots->acquire(opt.slots ? opt.priority : static_cast<long long>(k), held);
      {
        std::lock_guard<std::mutex> lock(m);
        if (error) {
          slots->release(held);
          return;
        }
      }
      const std::size_t pi = schedule.order[k];
      try {
        std::vector<bool> wanted(cfg.algorithms.size());
        {
          std::lock_guard<std::mutex> lock(m);
          for (std::size_t a = 0; a < wanted.size(); ++a) wanted[a] = !done.count(pi * cfg.algorithms.size() + a);
        }
        const PlannedProblem p = plan_problem(cfg, pi);
        backend.run(p, cfg, wanted, schedule.threads, [&](std::size_t a, const std::vector<double>& metrics, double golden_s, double s) {
          if (a >= wanted.size() || !wanted[a]) throw std::logic_error("sweep backend emitted an unrequested algorithm");
          if (metrics.size() != backend.problem_columns.size() + backend.algorithm_columns.size())
            throw std::logic_error("sweep backend emitted the wrong number of metrics");
          CsvRow row = make_row(cfg, p, a, metrics, golden_s, s);
          wanted[a] = false;
          std::lock_guard<std::mutex> lock(m);
          out.append(csv_line(row));
          rows_exist = true;
          done.emplace(pi * cfg.algorithms.size() + a, std::move(row));
          ++report.cases_run;
          if (opt.progress) opt.progress({done.size(), plan.total, report.cases_run, elapsed()});
        });
        if (std::find(wanted.begin(), wanted.end(), true) != wanted.end())
          throw std::logic_error("sweep backend did not run every requested algorithm");
      } catch (...) {
        std::lock_guard<std::mutex> lock(m);
        if (!error) error = std::current_exception();  // the other workers stop after their problem
      }
      slots->release(held);
    }
  };
  auto help = [&] {
    slots->helpers().help([&] { slots->acquire(CaseSlots::kHelperPriority, 1); }, [&] { slots->release(1); });
  };
  auto work = [&] {
    run_problems();
    std::vector<std::thread> more;
    for (int t = 1; t < held; ++t) more.emplace_back(help);
    help();
    for (auto& t : more) t.join();
  };
  // Every worker starts at once, though there be fewer problems than workers: the others help at once.
  const int workers = plan.todo.empty() ? 0 : at_once;
  if (workers <= 1) {
    if (workers == 1) run_problems();
  } else {
    std::vector<std::thread> pool;
    for (int w = 0; w < workers; ++w) pool.emplace_back(work);
    for (auto& t : pool) t.join();
  }
  if (error) std::rethrow_exception(error);
}

// The table (every case, sorted by case id) and, for an unsharded run, its summary: together or not at all.
void summarise_sweep(const SweepConfig& cfg, const CsvRow& header, SweepPlan& plan, const SweepReport& report) {
  std::vector<CsvRow> rows;
  for (auto& [id, row] : plan.done) rows.push_back(std::move(row));
  if (rows.size() != plan.total) throw std::logic_error("sweep finished with missing cases");
  std::vector<std::pair<fs::path, std::string>> files = {{report.csv, table_text(header, rows)}};
  if (!report.summary.empty()) {
    files.emplace_back(report.summary, sweep_summary(cfg, header, rows).dump(2) + "\n");
    files.emplace_back(report.flat_csv, detail::flat_table_text(header, rows));
  }
  write_files_atomic(files);
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

}  // namespace

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

std::string sweep_progress_line(const SweepProgress& p, const std::string& who) {
  auto duration = [](double s) {
    if (!(s >= 0) || s > 1e7) return std::string("?");
    const long t = static_cast<long>(s + 0.5);
    return t >= 3600 ? fmt::format("{}h{:02}m", t / 3600, t / 60 % 60)
                     : t >= 60 ? fmt::format("{}m{:02}s", t / 60, t % 60) : fmt::format("{}s", t);
  };
  const double rate = p.elapsed_s > 0 ? static_cast<double>(p.run_now) / p.elapsed_s : 0;
  const double eta = rate > 0 ? static_cast<double>(p.total - p.done) / rate : -1;
  return fmt::format("\r[{}] {}/{} cases, {:.2f} cases/s, {} left   {}", who, p.done, p.total, rate, duration(eta),
                     p.done == p.total ? "\n" : "");
}

SweepReport run_sweep(const SweepConfig& cfg, const SweepBackend& backend, const SweepOptions& opt) {
  if (opt.resume && opt.overwrite)
    throw InputError(opt.resume_option + " and " + opt.overwrite_option +
                     ": give one (complete the results, or replace them)");
  validate_sweep(cfg, backend, opt);  // nothing is created before this

  const fs::path dir = opt.out_dir.empty() ? fs::path(cfg.out_dir) : opt.out_dir;
  {  // no output replaces an input (an equal config.json is read back, never rewritten)
    const auto inputs = sweep_input_files(cfg);
    const fs::path csv = dir / shard_csv_name(cfg, opt.shard_index, opt.shard_count);
    for (const fs::path& f : {csv, fs::path(csv.string() + ".partial"), dir / cfg.summary_name})
      check_not_an_input("the sweep's output", f, inputs);
    for (const auto& in : inputs)
      if (in.first != "the config") check_not_an_input("the sweep's config copy", dir / "config.json", {in});
  }
  const bool dir_created = make_folder(dir);
  const FolderLock folder_lock(dir);
  const fs::path config_file = dir / "config.json";
  bool config_created = false;
  if (fs::exists(config_file)) {
    if (read_json_file(config_file) != cfg.raw)
      throw InputError(dir.string() + " holds a sweep of a different config (" + config_file.string() +
                       "); choose another output folder");
  } else {
    write_file_atomic(config_file, cfg.raw.dump(2) + "\n");
    config_created = true;
  }

  SweepReport report;
  report.csv = dir / shard_csv_name(cfg, opt.shard_index, opt.shard_count);
  if (opt.shard_count == 1) {
    report.summary = dir / cfg.summary_name;
    report.flat_csv = dir / detail::flat_csv_name(cfg.csv_name);
  }
  const fs::path partial = report.csv.string() + ".partial";
  const CsvRow header = csv_header(cfg, backend);

  if (!opt.resume && (fs::exists(report.csv) || fs::exists(partial))) {
    if (opt.overwrite) {
      for (const fs::path& f : {report.csv, partial, report.summary, report.flat_csv})
        if (!f.empty()) fs::remove(f);
    } else {
      bool complete = false;
      try {
        complete = folder_is_complete(cfg, opt, header, report, partial);
      } catch (...) {
        if (config_created) fs::remove(config_file);
        throw;
      }
      if (complete) return report;
      if (config_created) fs::remove(config_file);
      throw InputError(dir.string() + " already holds unfinished results of this sweep (" +
                       (fs::exists(partial) ? partial : report.csv).string() + "); give " + opt.resume_option +
                       " to complete them, " + opt.overwrite_option +
                       " to run the sweep again from scratch, or choose another output folder");
    }
  }
  const bool partial_created = !fs::exists(partial);
  // A failure from here on removes what this run created when it finished no case (so the folder is as it
  // was, or gone); once rows exist, the folder is left for --resume (its config.json matches this config).
  bool rows_exist = false;
  auto clean_up = [&] {
    if (rows_exist) return;
    std::error_code ec;
    if (partial_created) fs::remove(partial, ec);
    if (config_created) fs::remove(config_file, ec);
    if (dir_created) {
      fs::remove(folder_lock.file(), ec);
      fs::remove(dir, ec);  // only if empty
    }
  };
  try {
    SweepPlan plan = plan_sweep(cfg, opt, header, report.csv, partial);
    report.cases_reused = plan.done.size();
    rows_exist = !plan.done.empty();
    execute_sweep(cfg, backend, opt, header, partial, plan, report, rows_exist);
    summarise_sweep(cfg, header, plan, report);
    fs::remove(partial);  // only after the table and summary are written
    return report;
  } catch (...) {
    clean_up();
    throw;
  }
}

}  // namespace pasa
