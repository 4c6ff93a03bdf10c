// Hardening of the sweep runner: sizes refused before anything is expanded or created, names
// that would collide with the runner's own files, one writer per output folder, and what a failed run
// leaves behind (nothing it created, or a folder --resume completes).
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <filesystem>

#include "pasa/core/error.hpp"
#include "pasa/core/memory.hpp"
#include "pasa/io/csv.hpp"
#include "pasa/study/sweep.hpp"
#include "pasa/study/sweep_config.hpp"
#include "support/temp_dirs.hpp"

using namespace pasa;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

json small_config() {
  return json::parse(R"({
    "problem": {"shape": {"Sq": 8, "D": 4}, "seed": "$seed", "generator": {"x0": "$x0"}},
    "grid": {"x0": [1, 2]},
    "seeds": [1],
    "algorithms": [{"label": "A", "name": "fa2", "alloc": "fa_fp32"}]
  })");
}

// The library's backend, except that run() throws after `good` problems (a run-time failure).
SweepBackend failing_backend(int good) {
  SweepBackend b = library_backend();
  auto real = b.run;
  auto count = std::make_shared<int>(0);
  b.run = [real, count, good](const PlannedProblem& p, const SweepConfig& c, const std::vector<bool>& w, int t,
                              const SweepBackend::Emit& e) {
    if ((*count)++ >= good) throw std::runtime_error("simulated run-time failure");
    real(p, c, w, t, e);
  };
  return b;
}

}  // namespace

TEST_CASE("sweep size: the case count is computed without overflow and refused above the limit", "[sweep]") {
  json c = small_config();
  for (const char* axis : {"a", "b", "c", "d", "e"}) {
    c["grid"][axis] = {{"from", 1}, {"to", 100000}, {"step", 1}};
    c["problem"]["generator"]["wavelength"] = "$a";
    c["problem"]["generator"]["am"] = "$b";
    c["problem"]["generator"]["p"] = "$c";
    c["problem"]["generator"]["noise"] = "$d";
    c["problem"]["generator"]["seq_bias"] = "$e";
  }
  // 2 x 10^25 grid points: the product overflows 64 bits; reported as such, not as a wrapped number.
  CHECK_THROWS_WITH(parse_sweep_config(c, "cfg.json"), Catch::Contains("cfg.json:/grid: more than 2^64 grid points") &&
                                                           Catch::Contains("at most 1000000 cases"));
  json two = small_config();
  two["grid"]["x0"] = {{"from", 1}, {"to", 10000}, {"step", 1}};
  two["grid"]["y"] = {{"from", 1}, {"to", 10000}, {"step", 1}};
  two["problem"]["generator"]["am"] = "$y";
  CHECK_THROWS_WITH(parse_sweep_config(two, "cfg.json"), Catch::Contains("100000000 grid points x 1 seeds x 1 algorithms"));
  CHECK(sat_mul(kTooLarge / 2, 3) == kTooLarge);
  CHECK(sat_product(1u << 20, 1u << 20, 1u << 20, 1u << 20) == kTooLarge);
  CHECK(sat_product(3, 5, 7) == 105);
}

TEST_CASE("sweep size: the memory estimate refuses a sweep before its folder exists", "[sweep]") {
  json c = small_config();
  c["problem"]["shape"] = {{"Nq", 32}, {"Sq", 1 << 20}, {"D", 128}};
  const SweepConfig cfg = parse_sweep_config(c, "cfg.json");
  SweepOptions opt;
  opt.out_dir = test::fresh_dir("sweep-hardening-memory");
  opt.max_memory = std::size_t{8} << 30;
  CHECK_THROWS_WITH(run_sweep(cfg, library_backend(), opt),
                    Catch::Contains("this sweep needs about") && Catch::Contains("8.00 GiB allowed by --max-memory"));
  CHECK_FALSE(fs::exists(opt.out_dir));
  // The estimate grows with the shape: Q, K and V at fp16's width and the output as doubles alone are
  // 3 x 2 + 8 bytes/element.
  const std::size_t elements = std::size_t{32} << 27;
  CHECK(validate_with_backend(cfg, library_backend()) > (3 * 2 + 8) * elements);
}

TEST_CASE("sweep validation: golden precision, output names and CSV columns", "[sweep]") {
  json c = small_config();
  c["golden"] = {{"precision_bits", 64}};
  CHECK_THROWS_WITH(parse_sweep_config(c, "cfg.json"), "cfg.json:/golden/precision_bits: 64 is outside [106, 4096]");
  for (const char* name : {"config.json", "results.csv.partial", ".pasa-sweep.lock", "x.tmp123"}) {
    json o = small_config();
    o["outputs"] = {{"summary", name}};
    CHECK_THROWS_WITH(parse_sweep_config(o, "cfg.json"), Catch::Contains("cfg.json:/outputs/summary: \"" + std::string(name)) &&
                                                             Catch::Contains("sweep uses for its own files"));
  }
  json shard = small_config();
  shard["outputs"] = {{"summary", "results.shard-0-of-2.csv"}};
  CHECK_THROWS_WITH(parse_sweep_config(shard, "cfg.json"), Catch::Contains("shard table"));
  json label = small_config();
  label["algorithms"][0]["label"] = "A\nB";
  CHECK_THROWS_WITH(parse_sweep_config(label, "cfg.json"), Catch::Contains("cfg.json:/algorithms/0/label: ") &&
                                                               Catch::Contains("control character (code 10)"));
  json axis = small_config();
  axis["grid"] = {{"rmse", {1, 2}}};
  axis["problem"]["generator"]["x0"] = "$rmse";
  const SweepConfig cfg = parse_sweep_config(axis, "cfg.json");
  CHECK_THROWS_WITH(validate_with_backend(cfg, library_backend()),
                    Catch::Contains("cfg.json:/grid/rmse: \"rmse\" is also the name of a column"));
  json seeds = small_config();
  seeds["seeds"] = json::parse("[18446744073709551615, 0]");
  CHECK(parse_sweep_config(seeds, "cfg.json").seeds.front() == 18446744073709551615ull);
}

TEST_CASE("sweep lock: a second run into the same folder is refused", "[sweep]") {
  const SweepConfig cfg = parse_sweep_config(small_config(), "cfg.json");
  SweepOptions opt;
  opt.out_dir = test::fresh_dir("sweep-hardening-lock");
  fs::create_directories(opt.out_dir);
  const int fd = ::open((opt.out_dir / kSweepLockName).c_str(), O_RDWR | O_CREAT, 0644);
  REQUIRE(fd >= 0);
  REQUIRE(::flock(fd, LOCK_EX | LOCK_NB) == 0);  // another run holds it (flock locks belong to the open file)
  CHECK_THROWS_WITH(run_sweep(cfg, library_backend(), opt), Catch::Contains("is in use by another pasa-sweep run"));
  CHECK_FALSE(fs::exists(opt.out_dir / "config.json"));
  ::close(fd);
  CHECK(run_sweep(cfg, library_backend(), opt).cases_run == 2);
  fs::remove_all(opt.out_dir);
}

TEST_CASE("sweep failure: nothing created is left, or a folder --resume completes", "[sweep]") {
  const SweepConfig cfg = parse_sweep_config(small_config(), "cfg.json");
  SweepOptions opt;
  opt.out_dir = test::fresh_dir("sweep-hardening-fail");
  // Fails on its first problem: the folder it created is removed again.
  CHECK_THROWS_WITH(run_sweep(cfg, failing_backend(0), opt), "simulated run-time failure");
  CHECK_FALSE(fs::exists(opt.out_dir));
  // In an existing folder, only what the run created goes.
  fs::create_directories(opt.out_dir);
  CHECK_THROWS(run_sweep(cfg, failing_backend(0), opt));
  CHECK(fs::exists(opt.out_dir));
  CHECK_FALSE(fs::exists(opt.out_dir / "config.json"));
  CHECK_FALSE(fs::exists(opt.out_dir / "results.csv.partial"));
  // Fails after one problem: the finished row stays and --resume completes the table.
  CHECK_THROWS(run_sweep(cfg, failing_backend(1), opt));
  CHECK(read_complete_lines(opt.out_dir / "results.csv.partial").lines.size() == 2);
  opt.resume = true;
  const SweepReport r = run_sweep(cfg, library_backend(), opt);
  CHECK(r.cases_reused == 1);
  CHECK(r.cases_run == 1);
  fs::remove_all(opt.out_dir);
}
