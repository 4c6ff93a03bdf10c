// What the sweep's source files share, private to them: the results table's rows as run_sweep writes them
// and reads them back for --resume (sweep_table.cpp, which merges and summarises tables too), run_sweep's
// steps (validate and plan: sweep_plan.cpp; execute: sweep_execute.cpp), and the output folder that
// run_sweep and merge_sweeps write (sweep.cpp).
#pragma once

#include <cstddef>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "pasa/io/csv.hpp"
#include "pasa/study/sweep.hpp"
#include "pasa/study/sweep_config.hpp"

namespace pasa::detail {

// The CSV text of one case.
CsvRow make_row(const SweepConfig& cfg, const PlannedProblem& p, std::size_t a, const std::vector<double>& metrics,
                double golden_s, double seconds);

// What is wrong with line `row_text` of a results file read back for --resume (empty: nothing); `id` is
// set when the row is valid. Checks the field count, the case id (a case of this shard), the identity
// columns against the plan and that every metric and timing parses as a number.
std::string resume_row_problem(const SweepConfig& cfg, const CsvRow& header, const std::string& row_text,
                               const SweepOptions& opt, std::size_t& id, CsvRow& row);

// The table's text: the header, then the rows sorted by case_id.
std::string table_text(const CsvRow& header, std::vector<CsvRow> rows);

// results_flat.csv's text (sweep_flat.cpp): the table with no quoted cell, for awk -F, and gnuplot: the
// problem_json and algorithm_json columns replaced by a column per JSON leaf ("problem.shape.Sq",
// "algorithm.pasa.beta"; empty where a row has no such leaf), a ',' in a text cell written as ';' and a '"'
// as '\''. Rows sorted by case_id, as table_text.
std::string flat_table_text(const CsvRow& header, std::vector<CsvRow> rows);
// Its file name: the table's with "_flat" before the extension (results.csv -> results_flat.csv).
std::string flat_csv_name(const std::string& csv_name);

// The cases of one run: this shard's problems, the rows already done (read back from the table and the
// partial file), and the problems with a case still to run, in order.
struct SweepPlan {
  std::vector<std::size_t> problems;
  std::size_t total = 0;  // cases of this shard
  std::map<std::size_t, CsvRow> done;
  std::vector<std::size_t> todo;
};


// Throws InputError for bad options, a grid point the backend refuses, or more memory than the run may use
// (validate_with_backend, plus the rows the runner keeps); nothing exists yet when it is called.
void validate_sweep(const SweepConfig& cfg, const SweepBackend& backend, const SweepOptions& opt);
// A warning through opt.warn, else on stderr ("pasa-sweep: warning: ...").
void warn_of(const SweepOptions& opt, const std::string& msg);
// This shard's cases and the rows an earlier run left in `csv` and `partial` (each validated; a bad row is
// dropped with a warning, its case runs again).
SweepPlan plan_sweep(const SweepConfig& cfg, const SweepOptions& opt, const CsvRow& header, const std::filesystem::path& csv,
                     const std::filesystem::path& partial);
// Whether the folder holds every case of a finished run (the README's main job run twice); nothing written.
bool folder_is_complete(const SweepConfig& cfg, const SweepOptions& opt, const CsvRow& header, SweepReport& report,
                        const std::filesystem::path& partial);
// Runs plan.todo, each finished case appended to `partial` and entered in plan.done (rows_exist set once a
// row is on disk); the first error stops the workers after their problem and is rethrown.
void execute_sweep(const SweepConfig& cfg, const SweepBackend& backend, const SweepOptions& opt, const CsvRow& header,
                   const std::filesystem::path& partial, SweepPlan& plan, SweepReport& report, bool& rows_exist);

// The output folder, created if needed; an InputError naming it when that is impossible.
bool make_folder(const std::filesystem::path& dir);

// One writer per output folder: an exclusive flock on <dir>/.pasa-sweep.lock for the object's lifetime
// (released by the kernel if the process dies, so a killed run never leaves a stale lock).
class FolderLock {
 public:
  explicit FolderLock(const std::filesystem::path& dir);
  ~FolderLock();
  FolderLock(const FolderLock&) = delete;
  FolderLock& operator=(const FolderLock&) = delete;
  const std::filesystem::path& file() const { return file_; }

 private:
  std::filesystem::path file_;
  int fd_ = -1;
};

}  // namespace pasa::detail
