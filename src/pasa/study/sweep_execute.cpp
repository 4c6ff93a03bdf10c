// Executing a sweep's plan (sweep.hpp): the workers, their slots and the rows appended as cases finish;
// the progress line the programs print.
#include "pasa/study/sweep.hpp"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <algorithm>
#include <chrono>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "pasa/core/error.hpp"
#include "pasa/core/memory.hpp"
#include "pasa/io/output_file.hpp"
#include "pasa/study/detail/sweep_parts.hpp"

namespace pasa {

namespace fs = std::filesystem;

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

namespace detail {

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

}  // namespace detail

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

}  // namespace pasa
