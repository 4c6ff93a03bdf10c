// How a sweep deals its problems over threads and jobs (schedule_problems, SweepOptions::jobs): largest
// first in an order that does not depend on jobs or threads, workers with no problem left helping the loops
// of the problems still running, never more threads at once than the run was given, and the same table
// whatever the jobs.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <atomic>
#include <cmath>
#include <mutex>
#include <thread>

#include "pasa/core/parallel.hpp"
#include "pasa/io/csv.hpp"
#include "pasa/study/sweep.hpp"
#include "pasa/study/sweep_config.hpp"
#include "support/sweep_tables.hpp"
#include "support/temp_dirs.hpp"

using namespace pasa;
using nlohmann::json;
namespace fs = std::filesystem;

using pasa::test::without_times;

namespace {

// Problems 0..17 (x0 3 values, Am 3 values, seeds 2): the cost is "size" (a grid axis), so that the
// problems of the larger sizes are dealt first.
json config() {
  return json::parse(R"({
    "name": "schedule",
    "problem": {"size": "$size", "am": "$Am", "seed": "$seed"},
    "grid": {"size": [1, 3, 2], "Am": [1, 2, 3]},
    "seeds": [7, 8],
    "algorithms": [{"label": "A", "k": 1}, {"label": "B", "k": 2}]
  })");
}

// A backend whose metrics depend only on the case, which records the threads each problem got, the order
// problems started in, and the most threads in use at once (each problem sleeps so that they overlap).
struct RecordingBackend {
  std::mutex m;
  std::vector<std::pair<std::size_t, int>> started;  // (problem index, threads)
  int in_use = 0, most_in_use = 0;
  SweepBackend backend() {
    SweepBackend b;
    b.problem_columns = {"work"};
    b.algorithm_columns = {"value"};
    b.check_problem = [](const json&, const std::string&) {};
    b.check_algorithm = [](const json&, const std::string&) {};
    b.cost = [](const PlannedProblem& p, const SweepConfig&) { return p.problem.at("size").get<double>(); };
    b.run = [this](const PlannedProblem& p, const SweepConfig&, const std::vector<bool>& wanted, int threads,
                   const SweepBackend::Emit& emit) {
      {
        std::lock_guard<std::mutex> lock(m);
        started.emplace_back(p.index, threads);
        in_use += threads;
        most_in_use = std::max(most_in_use, in_use);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(3));
      const double size = p.problem.at("size").get<double>(), am = p.problem.at("am").get<double>();
      const double seed = static_cast<double>(p.problem.at("seed").get<std::uint64_t>());
      for (std::size_t a = 0; a < wanted.size(); ++a)
        if (wanted[a]) emit(a, {size, std::sin(size * 3 + am * seed + static_cast<double>(a))}, 0.001, 0.002);
      std::lock_guard<std::mutex> lock(m);
      in_use -= threads;
    };
    return b;
  }
};

}  // namespace

TEST_CASE("sweep schedule: largest first, ties in problem order, the same order for any jobs and threads", "[sweep]") {
  const std::vector<std::size_t> problems = {10, 11, 12, 13, 14, 15, 16};
  const std::vector<double> costs = {2, 5, 2, 9, 5, 1, NAN};  // NaN counts as 0: last
  const std::vector<std::size_t> want = {13, 11, 14, 10, 12, 15, 16};
  for (int jobs : {1, 2, 3, 5, 16})
    for (int threads : {1, 2, 7, 16}) {
      INFO("jobs " << jobs << ", threads " << threads);
      const SweepSchedule s = schedule_problems(problems, costs, threads, jobs);
      CHECK(s.order == want);
      CHECK(s.threads == std::max(1, threads / jobs));
      CHECK(s.slots == jobs * s.threads);
    }
  CHECK_THROWS(schedule_problems(problems, {1, 2}, 2, 2));
}

namespace {

// A backend whose problems run a loop of 30 items of 2 ms (parallel_for on the problem's threads), which
// records the most items running at once and the most threads one problem's items ran on. With
// `wait_for_help`, each problem's first item waits (up to 20 s) until another thread has run one of its
// items, which only a helper can when the problem runs on one thread.
struct LoopBackend {
  bool wait_for_help = false;
  std::mutex m;
  int in_items = 0, most_items = 0, timeouts = 0, threads_seen = 0;
  SweepBackend backend() {
    SweepBackend b = RecordingBackend().backend();
    b.run = [this](const PlannedProblem& p, const SweepConfig&, const std::vector<bool>& wanted, int threads,
                   const SweepBackend::Emit& emit) {
      std::vector<std::thread::id> who(30);
      std::vector<std::atomic<bool>> ran(who.size());
      parallel_for(who.size(), threads, [&](std::size_t i) {
        {
          std::lock_guard<std::mutex> lock(m);
          most_items = std::max(most_items, ++in_items);
        }
        who[i] = std::this_thread::get_id();
        ran[i] = true;
        auto other_ran = [&] {
          for (std::size_t j = 0; j < who.size(); ++j)
            if (j != i && ran[j].load() && who[j] != std::this_thread::get_id()) return true;
          return false;
        };
        const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(20);
        if (i == 0 && wait_for_help)
          while (!other_ran() && std::chrono::steady_clock::now() < end) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        else
          std::this_thread::sleep_for(std::chrono::milliseconds(2));
        std::lock_guard<std::mutex> lock(m);
        if (i == 0 && wait_for_help && !other_ran()) ++timeouts;
        --in_items;
      });
      {
        std::lock_guard<std::mutex> lock(m);
        std::vector<std::thread::id> ids(who);
        std::sort(ids.begin(), ids.end());
        threads_seen = std::max(threads_seen, static_cast<int>(std::unique(ids.begin(), ids.end()) - ids.begin()));
      }
      for (std::size_t a = 0; a < wanted.size(); ++a)
        if (wanted[a]) emit(a, {1.0, static_cast<double>(p.index * 10 + a)}, 0.001, 0.002);
    };
    return b;
  }
};

SweepConfig config_of(std::size_t sizes, std::size_t seeds) {
  json c = config();
  c["grid"] = {{"size", json::array()}, {"Am", 1}};
  for (std::size_t i = 0; i < sizes; ++i) c["grid"]["size"].push_back(i + 1);
  c["seeds"] = json::array();
  for (std::size_t i = 0; i < seeds; ++i) c["seeds"].push_back(7 + i);
  return parse_sweep_config(c, "help.json");
}

}  // namespace

TEST_CASE("sweep: workers with no problem left help the running problems' loops", "[sweep]") {
  // Fewer problems than jobs (2 problems, 4 jobs on 4 threads: one thread each): the two idle workers help.
  LoopBackend rec;
  rec.wait_for_help = true;
  SweepOptions opt;
  opt.out_dir = test::fresh_dir("sweep-help");
  opt.threads = 4;
  opt.jobs = 4;
  const SweepReport r = run_sweep(config_of(1, 2), rec.backend(), opt);
  CHECK(r.cases_run == 4);
  CHECK(rec.timeouts == 0);
  CHECK(rec.threads_seen >= 2);
  CHECK(rec.most_items <= 4);
}

TEST_CASE("sweep: helpers of sweeps sharing slots take a slot each", "[sweep]") {
  // Two sweeps on 2 shared slots: sweep A has 1 problem (its second worker helps at once), sweep B 3
  // problems. Never more than 2 items at once, however the helpers join; the tables as on their own.
  const auto slots = std::make_shared<CaseSlots>(2);
  LoopBackend rec;
  const SweepBackend b = rec.backend();
  std::vector<SweepReport> reports(2);
  std::vector<std::thread> runs;
  for (int s = 0; s < 2; ++s)
    runs.emplace_back([&, s] {
      SweepOptions opt;
      opt.out_dir = test::fresh_dir("sweep-help-shared-" + std::to_string(s));
      opt.threads = 2;
      opt.slots = slots;
      opt.priority = s;
      reports[s] = run_sweep(config_of(s == 0 ? 1 : 3, 1), b, opt);
    });
  for (auto& t : runs) t.join();
  CHECK(reports[0].cases_run == 2);
  CHECK(reports[1].cases_run == 6);
  CHECK(rec.most_items <= 2);
  LoopBackend alone;
  SweepOptions opt;
  opt.out_dir = test::fresh_dir("sweep-help-alone");
  run_sweep(config_of(3, 1), alone.backend(), opt);
  CHECK(without_times(reports[1].csv) == without_times(opt.out_dir / "results.csv"));
}

TEST_CASE("sweep: jobs deal the largest problems first and give the same table", "[sweep]") {
  const SweepConfig cfg = parse_sweep_config(config(), "schedule.json");
  std::string first;
  for (int jobs : {1, 2, 5}) {
    INFO("jobs " << jobs);
    RecordingBackend rec;
    SweepOptions opt;
    opt.out_dir = test::fresh_dir("sweep-schedule-" + std::to_string(jobs));
    opt.threads = jobs;
    opt.jobs = jobs;
    run_sweep(cfg, rec.backend(), opt);
    const std::string table = without_times(opt.out_dir / "results.csv");
    if (first.empty()) first = table;
    CHECK(table == first);
    // Never more threads at once than given.
    CHECK(rec.most_in_use <= jobs);
    REQUIRE(rec.started.size() == 18);
    // The size of a problem, from the plan.
    auto size_of = [&](std::size_t pi) { return plan_problem(cfg, pi).problem.at("size").get<double>(); };
    if (jobs == 1) {
      // One at a time: exactly the dealing order, size 3 first, then 2, then 1, problem order within a size.
      for (std::size_t i = 1; i < rec.started.size(); ++i) {
        const double a = size_of(rec.started[i - 1].first), b = size_of(rec.started[i].first);
        CHECK(a >= b);
        if (a == b) CHECK(rec.started[i - 1].first < rec.started[i].first);
      }
    }
    for (const auto& [pi, threads] : rec.started) CHECK(threads == 1);
  }
}

TEST_CASE("sweep: the library backend's cost is the attention's work", "[sweep]") {
  const SweepBackend b = library_backend();
  REQUIRE(b.cost);
  json c = json::parse(R"({
    "name": "cost",
    "problem": {"shape": {"B": 2, "Nq": 4, "Sq": "$S", "D": 32}, "format": "fp16", "seed": "$seed",
                "generator": {"kind": "uniform", "x0": 1, "am": 0.5}},
    "grid": {"S": [64, 128]},
    "algorithms": [{"label": "FA-FP32", "name": "fa2", "alloc": "fa_fp32", "s1": 16, "s2": 16}]
  })");
  const SweepConfig cfg = parse_sweep_config(c, "cost.json");
  // (B, Nq, S, D) = (2, 4, S, 32): 2 · S · S · 4 · 32 query-key pair products.
  CHECK(b.cost(plan_problem(cfg, 0), cfg) == 2.0 * 64 * 64 * 4 * 32);
  CHECK(b.cost(plan_problem(cfg, 1), cfg) == 2.0 * 128 * 128 * 4 * 32);
  c["problem"]["causal"] = true;
  const SweepConfig causal = parse_sweep_config(c, "cost.json");
  CHECK(b.cost(plan_problem(causal, 1), causal) == 0.5 * 2.0 * 128 * 128 * 4 * 32);
}
