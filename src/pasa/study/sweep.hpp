// The sweep runner behind pasa-sweep: expands a SweepConfig into cases (grid point × seed × algorithm),
// computes each (grid point, seed)'s golden once, and writes one CSV row per case as it finishes.
//
// Files in the output folder (README "pasa-sweep"):
//   config.json            the config as given (a resumed or merged sweep must match it)
//   results.csv            final table, sorted by case_id, written atomically (temp + rename)
//   results.csv.partial    rows appended and fsync'ed as cases finish; removed when the table is complete
//   summary.json           aggregates over seeds (mean, sd, min, max), paired RMSE ratios with 95 %
//                          intervals, config, toolkit version, machine
// With --shard I/N the table is results.shard-I-of-N.csv (no summary); merge_sweeps joins the shards.
//
// Determinism: each problem's cases run with some threads inside the library, whose results do not depend
// on the thread count; problems may run side by side (SweepOptions::jobs), the table is sorted by case_id;
// metrics are printed with %.17g. So the CSV is bit-identical for any thread count, job count and shard
// split, except the two timing columns golden_time_s and time_s.
#pragma once

#include <algorithm>
#include <cstddef>
#include <filesystem>
#include <functional>
#include <condition_variable>
#include <memory>
#include <limits>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "pasa/core/parallel.hpp"
#include "pasa/io/csv.hpp"
#include "pasa/study/sweep_config.hpp"

namespace pasa {

// What the sweep needs from the numerical library. library_backend() is the real one (the inputs, golden
// and metrics; the algorithms); tests inject their own to exercise the bookkeeping quickly.
struct SweepBackend {
  std::vector<std::string> problem_columns;    // metrics of the inputs (score range, overflow counts)
  std::vector<std::string> algorithm_columns;  // metrics of one output against the golden
  // Throw InputError("<JSON path>: <what>") for an invalid problem / algorithm JSON; `path` is its path.
  std::function<void(const nlohmann::json& problem, const std::string& path)> check_problem;
  std::function<void(const nlohmann::json& algorithm, const std::string& path)> check_algorithm;
  // Optional: the algorithm (at `path`) against the problem, as the run will check them together
  // (validate_case: a Hadamard transform and D, a tensor-core GEMM and its operands' widths, ...).
  std::function<void(const nlohmann::json& problem, const nlohmann::json& algorithm, const std::string& path)> check_case;
  // Runs the algorithms a with wanted[a] on one problem; calls emit(a, metrics, golden_s, seconds) as each
  // finishes, `metrics` being problem_columns then algorithm_columns.
  using Emit = std::function<void(std::size_t algorithm, const std::vector<double>& metrics, double golden_seconds,
                                  double seconds)>;
  std::function<void(const PlannedProblem&, const SweepConfig&, const std::vector<bool>& wanted, int threads,
                     const Emit& emit)>
      run;
  // Optional: the peak memory (bytes) of running one problem with all its algorithms (run() at `threads`).
  std::function<std::size_t(const PlannedProblem&, const SweepConfig&, int threads)> memory_bytes;
  // Optional: the relative work of one problem (any unit, compared only within a sweep; a seed never
  // changes it): the problems are dealt largest first (schedule_problems). Without it, in problem order.
  std::function<double(const PlannedProblem&, const SweepConfig&)> cost;
};

// The library backend computes each distinct problem once per backend object: when two sweeps run by the
// same backend (pasa-tables' four paper sweeps) hold the same problem (Fig. 9's x0 and Am panels share
// x0 = 20, Am = 0.5) with the same algorithm, golden precision and score format, the second gets the first's
// metrics (same bits by construction: the same deterministic computation; its timing columns are those of
// the first run). The key is the canonical JSON of the parsed problem and algorithm (to_json of
// problem_from_json / algorithm_from_json: every field, the seed included; never a label), so any
// difference in what is computed misses. It holds only metric values (a few hundred bytes per case).
SweepBackend library_backend();

// Checks every expanded problem and algorithm with the backend's parsers, every (problem, algorithm) pair
// with check_case (every grid point: the run would otherwise fail part-way), and that the CSV columns (grid
// axes, the backend's metric columns) are distinct; throws InputError "<source>:<JSON path>: <what> (grid
// point x0=30, Am=0.5)" on the first mistake. Returns the memory the largest problem needs at `threads`
// (backend.memory_bytes; 0 without it).
std::size_t validate_with_backend(const SweepConfig&, const SweepBackend&, int threads = 1);

// The peak memory of one problem of a sweep (inputs, golden, baseline, every algorithm's output, the largest
// algorithm's scratch) or of pasa-attn (`golden_first` false: the algorithm runs before the golden), in
// bytes, saturating.
struct AlgorithmSpec;
struct ProblemSpec;
struct GoldenOptions;
// `reading_bytes`: file data held while the inputs are read (pasa-attn's .npy: the largest file's bytes, decoded
// into the inputs): the peak is then the larger of reading and computing. golden_first: the whole golden and
// baseline before the algorithms (pasa-attribute, the fdpp study); otherwise the algorithms first, then
// compare_with_golden (pasa-attn, sweeps), with the whole golden kept too where `keep_golden`. score_stats:
// the run computes the score statistics too (pasa-attn, the sweeps; pasa-bench-long does not).
std::size_t case_memory_bytes(const ProblemSpec&, const std::vector<AlgorithmSpec>&, const GoldenOptions&,
                              bool golden_first, std::size_t reading_bytes = 0, bool keep_golden = false,
                              bool score_stats = true);

struct SweepProgress {
  std::size_t done = 0, total = 0;  // cases of this shard, finished (resumed ones included) and in all
  std::size_t run_now = 0;          // cases computed in this invocation
  double elapsed_s = 0;             // since this invocation started
};

// Slots for problems running at once, shared by sweeps that run side by side: a sweep's worker holds one
// while it runs a problem; when slots are scarce, the waiting worker of the lowest `priority` gets the
// next free one (so sweeps started together still finish roughly in order, and a later sweep fills the
// slots an earlier one leaves idle at its end). A sweep on its own uses them as threads: a problem holds
// as many as it runs threads, and its place in the dealing order is its priority, so problems start in
// that order. Workers with no problem left help the running problems' loops (helpers(): core/parallel.hpp),
// one slot per helping thread at the lowest priority, so a waiting problem always goes first.
class CaseSlots {
 public:
  explicit CaseSlots(int slots) : free_(slots < 1 ? 1 : slots), size_(free_) {}
  int size() const { return size_; }
  // Waits until `count` (1 <= count <= size()) slots are free and no waiter has a lower priority.
  void acquire(long long priority, int count = 1) {
    count = std::clamp(count, 1, size_);  // more than there are would wait for ever
    std::unique_lock<std::mutex> lock(m_);
    const auto me = waiting_.insert(priority);
    cv_.wait(lock, [&] { return free_ >= count && *waiting_.begin() == priority; });
    waiting_.erase(me);
    free_ -= count;
    cv_.notify_all();  // the next waiter may be of the same priority and there may be another free slot
  }
  void release(int count = 1) {
    count = std::clamp(count, 1, size_);
    std::lock_guard<std::mutex> lock(m_);
    free_ += count;
    cv_.notify_all();
  }
  LoopHelpers& helpers() { return helpers_; }
  static constexpr long long kHelperPriority = std::numeric_limits<long long>::max();

 private:
  std::mutex m_;
  std::condition_variable cv_;
  std::multiset<long long> waiting_;
  int free_, size_;
  LoopHelpers helpers_;
};

// How a sweep on its own (no shared slots) deals its problems still to run over `threads` threads, `jobs`
// problems at a time, each on max(1, threads / jobs) of them, largest `costs` first (ties in the order
// given, so the order does not depend on jobs or threads): the last problems to start are the small ones,
// and no big one starts when the others are finishing. A last round of fewer problems than jobs does not
// leave cores idle: the workers with nothing left help the running problems (CaseSlots::helpers()).
// Threads never change a result (sweep.hpp, "Determinism"): only the timing columns depend on this.
struct SweepSchedule {
  std::vector<std::size_t> order;  // the problems, in dealing order
  int threads = 1;                 // each problem's threads: max(1, threads / jobs)
  int slots = 1;                   // threads in all: jobs · threads
};
SweepSchedule schedule_problems(const std::vector<std::size_t>& problems, const std::vector<double>& costs, int threads,
                                int jobs);

struct SweepOptions {
  std::filesystem::path out_dir;  // empty: the config's outputs.dir
  // Threads in all: `jobs` problems run at once, each with max(1, threads / jobs) threads inside the
  // library; workers with no problem left lend their threads to the others' loops (schedule_problems).
  // Whole problems side by side keep every core busy through the parts of a case that run on one thread
  // (metrics) and through uneven rows; they cost `jobs` times one problem's memory.
  int threads = 1;
  int jobs = 1;
  // Optional: slots shared with other sweeps running at the same time (then the sweep runs slots->size()
  // problems at once at most, each with max(1, threads / slots->size()) threads, instead of `jobs`);
  // `priority` orders the sweeps waiting for a slot (lower first).
  std::shared_ptr<CaseSlots> slots;
  int priority = 0;
  std::size_t shard_index = 0, shard_count = 1;  // runs problems with index % shard_count == shard_index
  bool resume = false;
  // A folder already holding this sweep's table: without resume or overwrite, a complete one (every case in
  // the table, each valid; no partial file; the summary there) is reported as it is, nothing run or
  // written (SweepReport::already_complete), and an incomplete one refused. overwrite removes the table,
  // its partial file and the summary first and runs every case (a folder of another config is still refused).
  bool overwrite = false;
  std::size_t max_memory = 0;  // bytes a run may use (0: MemAvailable; --max-memory)
  std::function<void(const SweepProgress&)> progress;  // after each case
  // Warnings (a row of results.csv(.partial) dropped by --resume, naming file, line and why); empty: stderr.
  std::function<void(const std::string&)> warn;
  // How the caller spells its options in messages: pasa-sweep "--resume", pasa.sweep "resume=True" (the
  // library knows no command line; a message must name what the reader can type).
  std::string resume_option = "--resume", overwrite_option = "--overwrite";
};

// One progress line of a sweep, "\r[who] 12/40 cases, 3.10 cases/s, 9s left   " (a newline after the last
// case), for a terminal: pasa-sweep's and pasa.sweep's.
std::string sweep_progress_line(const SweepProgress&, const std::string& who);

struct SweepReport {
  std::filesystem::path csv, summary;  // summary empty for a shard
  // results_flat.csv: the table with no quoted cell and no JSON in a cell (sweep_flat.cpp), written with the
  // summary (empty for a shard; a folder written before it existed has none)
  std::filesystem::path flat_csv;
  std::size_t cases_run = 0, cases_reused = 0;
  bool already_complete = false;  // the folder held this sweep's complete results: nothing was run or written
};

// Parses "I/N" (0 <= I < N); throws InputError.
void parse_shard(const std::string& text, std::size_t& index, std::size_t& count);

std::vector<std::string> csv_header(const SweepConfig&, const SweepBackend&);
std::string shard_csv_name(const SweepConfig&, std::size_t index, std::size_t count);

// The files a sweep reads (its config and the problem's .npy or capture files), each with where it was
// named: no output of the sweep may be one of them (io/output_file.hpp check_not_an_input).
std::vector<std::pair<std::string, std::filesystem::path>> sweep_input_files(const SweepConfig&);

// Validates everything (validate_with_backend, the memory estimate against opt.max_memory or MemAvailable)
// before creating anything; holds an exclusive flock on <out>/.pasa-sweep.lock while it writes, so a second
// run into the same folder is refused. A run that fails leaves either nothing it created (when no case was
// finished) or a folder that --resume completes.
SweepReport run_sweep(const SweepConfig&, const SweepBackend&, const SweepOptions&);

// Makes every thread allocate from glibc's main arena (see sweep.cpp for why); run_sweep calls it, and so
// must a program that starts threads before calling run_sweep (reproduce_paper). Idempotent.
void one_malloc_arena();

// Joins the shard tables found in `dirs` (all shards of one config) into out_dir/results.csv and writes the
// summary. Throws InputError when configs differ, a shard is missing or twice, or rows disagree.
SweepReport merge_sweeps(const std::vector<std::filesystem::path>& dirs, const std::filesystem::path& out_dir);

// A readable digest of a finished table: per grid point and algorithm, the mean RMSE and NaN % over the
// seeds (first `max_lines` groups), e.g. the headline of the default sweep.
std::string sweep_digest(const SweepConfig&, const std::filesystem::path& csv, std::size_t max_lines = 40);

// Paired comparisons of a complete table (seed_stats.hpp): per grid point and pair of algorithms
// (numerator before denominator in the config), the geometric mean over seeds of rmse_a / rmse_b on the same
// inputs with its 95 % t interval ("ratio_ci95"), "ci95_excludes_1", and the number of seeds where both are
// finite ("pairs"; null ratio and interval below 2). summary.json's "paired" array.
nlohmann::json paired_rmse_ratios(const SweepConfig&, const CsvRow& header, const std::vector<CsvRow>& rows);

// Aggregates the rows of a complete table over seeds (and paired_rmse_ratios); records config, toolkit
// version and machine.
nlohmann::json sweep_summary(const SweepConfig&, const CsvRow& header, const std::vector<CsvRow>& rows);

}  // namespace pasa
