// What the sweep's source files share, private to them: the results table's rows as run_sweep writes them
// and reads them back for --resume (sweep_table.cpp, which merges and summarises tables too), and the
// output folder that run_sweep and merge_sweeps write (sweep.cpp).
#pragma once

#include <cstddef>
#include <filesystem>
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
