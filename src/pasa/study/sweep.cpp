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
#include <regex>
#include <set>
#include <thread>
#include <exception>
#include <mutex>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include <fmt/format.h>

#include "pasa/attention/algorithm.hpp"
#include "pasa/attention/unified.hpp"
#include "pasa/core/error.hpp"
#include "pasa/core/memory.hpp"
#include "pasa/numeric/format.hpp"
#include "pasa/inputs/generators.hpp"
#include "pasa/io/problem_json.hpp"
#include "pasa/exact/baseline.hpp"
#include "pasa/exact/golden.hpp"
#include "pasa/exact/metrics.hpp"
#include "pasa/io/algorithm_json.hpp"
#include "pasa/io/json_check.hpp"
#include "pasa/io/metrics_json.hpp"
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

// The CSV text of one case.
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

// What is wrong with line `row_text` of a results file read back for --resume (empty: nothing); `id` is
// set when the row is valid. Checks the field count, the case id (a case of this shard), the identity
// columns against the plan and that every metric and timing parses as a number.
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

std::string hostname() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

// Numeric (and boolean) leaves of a metrics JSON object as column names, "<prefix><key>"; text fields (like
// ScoreStats::format) are not metrics and stay out of the table.
void numeric_keys(const json& j, const std::string& prefix, std::vector<std::pair<std::string, json::json_pointer>>& out,
                  const json::json_pointer& ptr = json::json_pointer()) {
  for (const auto& [k, v] : j.items()) {
    if (v.is_object()) numeric_keys(v, prefix + k + ".", out, ptr / k);
    else if (v.is_number() || v.is_boolean()) out.emplace_back(prefix + k, ptr / k);
  }
}

// metrics' to_json writes non-finite numbers as the strings "nan", "inf", "-inf" (JSON has none).
double leaf_value(const json& j, const json::json_pointer& ptr) {
  const json& v = j.at(ptr);
  if (v.is_boolean()) return v.get<bool>() ? 1.0 : 0.0;
  if (v.is_number()) return v.get<double>();
  if (v == "inf") return INFINITY;
  if (v == "-inf") return -INFINITY;
  if (v == "nan") return NAN;
  throw std::logic_error("metric " + ptr.to_string() + " is not a number: " + v.dump());
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// The output folder, created if needed; an InputError naming it when that is impossible.
bool make_folder(const fs::path& dir) {
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
    throw InputError(dir.string() + ": exists and is not a folder; choose another output folder");
  const bool created = fs::create_directories(dir, ec);
  if (ec) throw InputError(dir.string() + ": cannot create the output folder: " + ec.message());
  return created;
}

// One writer per output folder: an exclusive flock on <dir>/.pasa-sweep.lock for the object's lifetime
// (released by the kernel if the process dies, so a killed run never leaves a stale lock).
class FolderLock {
 public:
  explicit FolderLock(const fs::path& dir) : file_(dir / kSweepLockName) {
    fd_ = ::open(file_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) throw InputError(file_.string() + ": cannot create the lock file: " + std::strerror(errno));
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      ::close(fd_);
      throw InputError(dir.string() + " is in use by another pasa-sweep run (it holds " + file_.string() +
                       "); wait for it to finish, or choose another output folder");
    }
  }
  ~FolderLock() { ::close(fd_); }
  FolderLock(const FolderLock&) = delete;
  FolderLock& operator=(const FolderLock&) = delete;
  const fs::path& file() const { return file_; }

 private:
  fs::path file_;
  int fd_ = -1;
};

}  // namespace

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

std::size_t case_memory_bytes(const ProblemSpec& p, const std::vector<AlgorithmSpec>& algs, const GoldenOptions& go,
                              bool golden_first, std::size_t reading_bytes) {
  if (p.paged) return unified_memory_bytes(p, algs, go, golden_first);
  // Shared libraries, the heap's own overhead and thread stacks: measured as the peak of a tiny problem.
  constexpr std::size_t kProcessBase = std::size_t{12} << 20;
  const Shape q{p.B, p.Nq, p.Sq, p.D}, kv{p.B, p.Nkv, p.Skv, p.D};
  const Format f = format_by_name(p.format);
  const std::size_t out = sat_mul(sizeof(double), sat_add(sat_product(q.B, q.N, q.S, q.D), sat_product(q.B, q.N, q.S)));
  const std::size_t tensor = sat_mul(sizeof(double), sat_product(q.B, q.N, q.S, q.D));  // baseline
  std::size_t algo = 0;
  for (const auto& a : algs) algo = std::max(algo, attention_bytes(q, kv, f, a, go.threads));
  const std::size_t golden = golden_bytes(q, kv, go);
  std::size_t peak;
  if (golden_first) {  // sweep: golden, baseline, then the algorithms, their outputs kept for one metrics pass
    peak = std::max(golden, sat_add(sat_add(sat_mul(out, std::max<std::size_t>(1, algs.size())), tensor), algo));
  } else {             // pasa-attn: the algorithm, then the golden and baseline with its output alive
    peak = std::max(algo, sat_add(out, std::max(golden, sat_add(out, tensor))));
  }
  return sat_add(kProcessBase, sat_add(inputs_bytes(p), std::max(peak, reading_bytes)));
}

// The real backend: the generators, golden and metrics, and the algorithms. Metric columns are the numeric
// fields of to_json(ScoreStats) (prefixed "score_") and of to_json(Metrics), so new metrics appear in the
// table without changes here.
SweepBackend library_backend() {
  using Leaves = std::vector<std::pair<std::string, json::json_pointer>>;
  auto score_leaves = std::make_shared<Leaves>(), metric_leaves = std::make_shared<Leaves>();
  numeric_keys(to_json(ScoreStats{}), "score_", *score_leaves);
  numeric_keys(to_json(Metrics{}), "", *metric_leaves);
  SweepBackend b;
  for (const auto& l : *score_leaves) b.problem_columns.push_back(l.first);
  for (const auto& l : *metric_leaves) b.algorithm_columns.push_back(l.first);
  b.check_problem = [](const json& j, const std::string& path) { problem_from_json(j, path); };
  b.check_algorithm = [](const json& j, const std::string& path) { algorithm_from_json(j, path); };
  b.check_case = [](const json& problem, const json& algorithm, const std::string& path) {
    validate_case(problem_from_json(problem, "/problem"), algorithm_from_json(algorithm, path));
  };
  b.memory_bytes = [](const PlannedProblem& p, const SweepConfig& cfg, int threads) {
    std::vector<AlgorithmSpec> algs;
    for (std::size_t a = 0; a < p.algorithms.size(); ++a)
      algs.push_back(algorithm_from_json(p.algorithms[a], "/algorithms/" + std::to_string(a)));
    GoldenOptions go;
    go.precision_bits = cfg.golden_precision_bits;
    go.threads = threads;
    return case_memory_bytes(problem_from_json(p.problem, "/problem"), algs, go, true);
  };
  // The attention's work: query-key pairs of one head times heads and D (the golden and every algorithm
  // are proportional to it); once per grid point (plan_problem of its first seed), like validation.
  b.cost = [](const PlannedProblem& p, const SweepConfig&) {
    const ProblemSpec ps = problem_from_json(p.problem, "/problem");
    double pairs = 0;
    if (ps.paged) {
      for (const auto& q : ps.paged->seqs) pairs += static_cast<double>(q.q_len) * static_cast<double>(q.ctx_len);
    } else {
      for (std::size_t i = 0; i < ps.B; ++i)
        pairs += static_cast<double>(ps.Sq) * static_cast<double>(ps.kv_len.empty() ? ps.Skv : ps.kv_len[i]) * (ps.causal ? 0.5 : 1.0);
    }
    return pairs * static_cast<double>(ps.Nq) * static_cast<double>(ps.D);
  };
  // Results of the problems computed so far, by problem key (see library_backend in sweep.hpp).
  struct Computed {
    std::vector<double> values;  // algorithm metrics (the problem's score statistics are kept apart)
    double golden_s = 0, seconds = 0;
  };
  struct ProblemResults {
    std::mutex m;  // held while the problem is computed: a second request for it waits, then reuses it
    bool scored = false;
    std::vector<double> problem_values;        // the score statistics, problem_columns
    std::map<std::string, Computed> algorithms;  // by the algorithm's JSON
  };
  struct Cache {
    std::mutex m;
    std::map<std::string, std::shared_ptr<ProblemResults>> problems;
  };
  auto cache = std::make_shared<Cache>();
  b.run = [score_leaves, metric_leaves, cache](const PlannedProblem& p, const SweepConfig& cfg, const std::vector<bool>& wanted,
                                               int threads, const SweepBackend::Emit& emit) {
    // The key: everything the results depend on. The expanded problem and algorithm JSON (objects dump
    // with sorted keys) determine the inputs and the algorithm; the config adds the golden's precision and
    // the score format. A problem spelled differently (20 vs 20.0) misses and is computed again.
    const std::string key = fmt::format("{}\n{}\n{}", p.problem.dump(), cfg.golden_precision_bits, cfg.score_format);
    std::shared_ptr<ProblemResults> entry;
    {
      std::lock_guard<std::mutex> lock(cache->m);
      auto& e = cache->problems[key];
      if (!e) e = std::make_shared<ProblemResults>();
      entry = e;
    }
    std::lock_guard<std::mutex> lock(entry->m);
    auto emit_cached = [&](std::size_t a, const Computed& c) {
      std::vector<double> values = entry->problem_values;
      values.insert(values.end(), c.values.begin(), c.values.end());
      emit(a, values, c.golden_s, c.seconds);
    };
    std::vector<std::size_t> missing;
    for (std::size_t a = 0; a < wanted.size(); ++a) {
      if (!wanted[a]) continue;
      const auto it = entry->algorithms.find(p.algorithms[a].dump());
      if (it != entry->algorithms.end()) emit_cached(a, it->second);
      else missing.push_back(a);
    }
    if (missing.empty()) return;
    // A paged problem runs unified attention over its cache (attention/unified.hpp), the rest as for dense inputs.
    const ProblemSpec ps = problem_from_json(p.problem, "/problem");
    const PagedBatch pb = ps.paged ? generate_paged(ps, threads) : PagedBatch{};
    const AttentionInputs in = ps.paged ? AttentionInputs{} : generate_inputs(ps);
    const auto t0 = std::chrono::steady_clock::now();
    GoldenOptions go;
    go.precision_bits = cfg.golden_precision_bits;
    go.threads = threads;
    // once per (grid point, seed), shared by the algorithms
    const Golden golden = ps.paged ? unified_golden(pb, go) : golden_attention(in, go);
    const double golden_s = seconds_since(t0);
    // the output that ignores the scores
    const Tensor baseline = ps.paged ? unified_baseline(pb, threads) : uniform_baseline(in, threads);
    if (!entry->scored) {
      const Format sf = format_by_name(cfg.score_format);
      const json scores = to_json(ps.paged ? unified_score_stats(pb, sf, threads) : score_stats(in, sf, threads));
      for (const auto& l : *score_leaves) entry->problem_values.push_back(leaf_value(scores, l.second));
      entry->scored = true;
    }
    // The algorithms, then their metrics in one pass over the golden (compare_outputs of several outputs:
    // the same bits as one at a time); time_s is an algorithm's own time plus its share of that pass.
    std::vector<AttentionOutput> outs;
    std::vector<double> seconds;
    for (std::size_t a : missing) {
      const AlgorithmSpec spec = algorithm_from_json(p.algorithms[a], "/algorithms/" + std::to_string(a));
      const auto t1 = std::chrono::steady_clock::now();
      outs.push_back(ps.paged ? unified_attention(pb, spec, threads) : run_attention(in, spec, threads));
      seconds.push_back(seconds_since(t1));
    }
    const auto t2 = std::chrono::steady_clock::now();
    std::vector<const Tensor*> os;
    for (const auto& o : outs) os.push_back(&o.o);
    const std::vector<Metrics> metrics = compare_outputs(os, golden.o, baseline, threads);
    const double compare_s = seconds_since(t2) / static_cast<double>(missing.size());
    for (std::size_t i = 0; i < missing.size(); ++i) {
      const json m = to_json(metrics[i]);
      Computed c;
      c.seconds = seconds[i] + compare_s;
      c.golden_s = golden_s;
      for (const auto& l : *metric_leaves) c.values.push_back(leaf_value(m, l.second));
      const Computed& kept = entry->algorithms.emplace(p.algorithms[missing[i]].dump(), std::move(c)).first->second;
      emit_cached(missing[i], kept);
    }
  };
  return b;
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
  if (!report.summary.empty()) files.emplace_back(report.summary, sweep_summary(cfg, header, rows).dump(2) + "\n");
  write_files_atomic(files);
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

SweepReport run_sweep(const SweepConfig& cfg, const SweepBackend& backend, const SweepOptions& opt) {
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
  if (opt.shard_count == 1) report.summary = dir / cfg.summary_name;
  const fs::path partial = report.csv.string() + ".partial";
  const CsvRow header = csv_header(cfg, backend);

  if (!opt.resume && (fs::exists(report.csv) || fs::exists(partial)))
    throw InputError(dir.string() + " already holds results of this sweep (" +
                     (fs::exists(report.csv) ? report.csv : partial).string() +
                     "); resume the sweep (pasa-sweep --resume, pasa.sweep(resume=True)) to complete them, or choose another output folder");
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
  write_files_atomic({{report.csv, table_text(header, list)}, {report.summary, sweep_summary(cfg, header, list).dump(2) + "\n"}});
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
// t interval. Seeds where either output is non-finite are left out (counted in "pairs"); null when fewer
// than 2 pairs remain.
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
        c["pairs"] = r ? r->n : 0;
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
        s["sd"] = xs.size() > 1 ? std::sqrt(ss / static_cast<double>(xs.size() - 1)) : 0.0;  // sample sd
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
  return summary;
}

}  // namespace pasa
