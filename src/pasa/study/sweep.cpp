// Running a sweep (sweep.hpp): the output folder and its lock, then the four steps, validate and plan
// (sweep_plan.cpp), execute (sweep_execute.cpp) and summarise (here); the table's rows are sweep_table.cpp's,
// the library backend sweep_backend.cpp's.
#include "pasa/study/sweep.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "pasa/core/error.hpp"
#include "pasa/io/json_check.hpp"
#include "pasa/io/output_file.hpp"
#include "pasa/study/detail/sweep_parts.hpp"

namespace pasa {

namespace fs = std::filesystem;
using detail::FolderLock;
using detail::make_folder;

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

// run_sweep's four steps: validate (everything, before anything is created), plan (this shard's cases and
// those an earlier run finished), execute (the cases still to run, rows appended to the partial file as they
// finish), summarise (the table and its summary, together).

namespace {

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

}  // namespace

}  // namespace detail

SweepReport run_sweep(const SweepConfig& cfg, const SweepBackend& backend, const SweepOptions& opt) {
  if (opt.resume && opt.overwrite)
    throw InputError(opt.resume_option + " and " + opt.overwrite_option +
                     ": give one (complete the results, or replace them)");
  detail::validate_sweep(cfg, backend, opt);  // nothing is created before this

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
        complete = detail::folder_is_complete(cfg, opt, header, report, partial);
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
    detail::SweepPlan plan = detail::plan_sweep(cfg, opt, header, report.csv, partial);
    report.cases_reused = plan.done.size();
    rows_exist = !plan.done.empty();
    detail::execute_sweep(cfg, backend, opt, header, partial, plan, report, rows_exist);
    detail::summarise_sweep(cfg, header, plan, report);
    fs::remove(partial);  // only after the table and summary are written
    return report;
  } catch (...) {
    clean_up();
    throw;
  }
}

}  // namespace pasa
