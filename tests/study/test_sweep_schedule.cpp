// How a sweep deals its problems over threads and jobs (schedule_problems, SweepOptions::jobs): largest
// first in an order that does not depend on jobs or threads, a last round of fewer problems than jobs split
// over every thread, never more threads at once than the run was given, and the same table whatever the
// split.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <mutex>
#include <thread>

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

std::vector<std::size_t> iota(std::size_t n) {
  std::vector<std::size_t> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = i;
  return v;
}

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
      CHECK(s.slots == jobs * std::max(1, threads / jobs));
    }
  CHECK_THROWS(schedule_problems(problems, {1, 2}, 2, 2));
}

TEST_CASE("sweep schedule: a last round of fewer problems than jobs splits the threads", "[sweep]") {
  auto threads_of = [&](std::size_t n, int threads, int jobs) {
    return schedule_problems(iota(n), std::vector<double>(n, 1.0), threads, jobs).threads;
  };
  // A paper sweep (21 problems) at 16 jobs: 16 on one thread each, then the last 5 on 3 threads each (15
  // of the 16: one round, rather than 5 problems one at a time on 16).
  std::vector<int> t = threads_of(21, 16, 16);
  CHECK(std::count(t.begin(), t.begin() + 16, 1) == 16);
  CHECK(std::count(t.begin() + 16, t.end(), 3) == 5);
  // At 2 jobs the 21st problem gets both threads; at 4, all four.
  t = threads_of(21, 2, 2);
  CHECK(std::count(t.begin(), t.end(), 1) == 20);
  CHECK(t.back() == 2);
  CHECK(threads_of(21, 4, 4).back() == 4);
  // Fewer problems than jobs: every problem shares the threads (7 on 16: 2 each, 14 of 16 busy).
  t = threads_of(7, 16, 16);
  CHECK(std::count(t.begin(), t.end(), 2) == 7);
  // A multiple of the jobs: no split; each on threads / jobs.
  t = threads_of(32, 16, 16);
  CHECK(std::count(t.begin(), t.end(), 1) == 32);
  t = threads_of(8, 16, 4);
  CHECK(std::count(t.begin(), t.end(), 4) == 8);
  // More jobs than threads: one thread each (as many at once as jobs), a tail on the jobs' slots.
  t = threads_of(3, 2, 4);
  CHECK(*std::min_element(t.begin(), t.end()) >= 1);
  // Never fewer threads than threads / jobs, never more than the slots.
  for (std::size_t n : {1, 2, 5, 13, 21, 40})
    for (int jobs : {1, 2, 3, 8, 16})
      for (int threads : {1, 4, 16}) {
        const SweepSchedule s = schedule_problems(iota(n), std::vector<double>(n, 1.0), threads, jobs);
        for (int x : s.threads) {
          CHECK(x >= std::max(1, threads / jobs));
          CHECK(x <= s.slots);
        }
      }
}

TEST_CASE("sweep: jobs deal the largest problems first, split the last round, and give the same table", "[sweep]") {
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
    // 18 problems on 5 jobs: 15 on one thread, the last 3 (size 1) on all 5 threads each.
    std::size_t split = 0;
    for (const auto& [pi, threads] : rec.started)
      if (threads > 1) {
        ++split;
        CHECK(size_of(pi) == 1);
        CHECK(threads == jobs);
      }
    CHECK(split == (jobs == 5 ? 3u : 0u));
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
