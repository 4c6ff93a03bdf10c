// Hardening of the readers of user input: JSON text (duplicate keys, nesting depth, numbers
// beyond double), .npy headers, number lists, problem and algorithm JSON. Every case is a mistake a user
// made or could make, and the test checks that it is refused with a message naming the place and value.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "pasa/core/error.hpp"
#include "pasa/io/algorithm_json.hpp"
#include "pasa/io/allocation_json.hpp"
#include "pasa/io/json_check.hpp"
#include "pasa/io/npy.hpp"
#include "pasa/io/number_text.hpp"
#include "pasa/io/problem_json.hpp"

using namespace pasa;
using nlohmann::json;

namespace {

std::vector<unsigned char> npy_with_header(const std::string& dict) {
  std::string h = dict;
  while ((10 + h.size() + 1) % 64 != 0) h += ' ';
  h += '\n';
  std::string s = std::string("\x93NUMPY\x01\x00", 8);
  s += static_cast<char>(h.size() & 0xff);
  s += static_cast<char>(h.size() >> 8);
  s += h;
  return {s.begin(), s.end()};
}

}  // namespace

TEST_CASE("JSON text: duplicate keys, deep nesting and overflowing numbers are refused", "[json]") {
  CHECK_THROWS_WITH(parse_json_text(R"({"shape": {"Sq": 16, "Sq": 32}})", "p.json"),
                    "p.json: invalid JSON: /shape/Sq: key \"Sq\" appears twice in one object");
  CHECK(parse_json_text(R"([{"a": 1}, {"a": 2}])", "x").size() == 2);  // the same key in two objects is fine
  const std::string deep = std::string(kMaxJsonDepth + 1, '[') + std::string(kMaxJsonDepth + 1, ']');
  CHECK_THROWS_WITH(parse_json_text(deep, "d.json"), Catch::Contains("nested more than 256 levels deep"));
  const std::string ok = std::string(kMaxJsonDepth, '[') + std::string(kMaxJsonDepth, ']');
  CHECK_NOTHROW(parse_json_text(ok, "d.json"));
  const std::string huge = std::string(200000, '[') + std::string(200000, ']');  // once a stack overflow
  CHECK_THROWS_AS(parse_json_text(huge, "d.json"), InputError);
  CHECK_THROWS_WITH(parse_json_text(R"({"x0": 1e999})", "n.json"), Catch::Contains("n.json: invalid JSON") &&
                                                                        Catch::Contains("number overflow"));
  CHECK_THROWS_WITH(parse_json_text("{\"a\": 1", "t.json"), Catch::Contains("t.json: invalid JSON"));
}

TEST_CASE(".npy: a negative dimension is named as such", "[npy]") {
  const auto bytes = npy_with_header("{'descr': '<f8', 'fortran_order': False, 'shape': (2, -3), }");
  CHECK_THROWS_WITH(parse_npy(bytes, "neg.npy"), Catch::Contains("neg.npy: malformed .npy header: shape holds a negative dimension"));
}

TEST_CASE(".npy: the header alone sizes a file before its data are read", "[npy]") {
  auto bytes = npy_with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 2), }");
  const auto path = std::filesystem::temp_directory_path() / ("pasa-test-npy-header-" + std::to_string(::getpid()) + ".npy");
  auto write = [&](std::size_t data_bytes) {
    std::ofstream f(path, std::ios::binary);
    f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    f << std::string(data_bytes, '\0');
  };
  write(24);
  const NpyArray h = read_npy_header(path);
  CHECK(h.dtype == NpyDtype::f32);
  CHECK(h.shape == std::vector<std::size_t>{3, 2});
  CHECK(h.bytes.empty());
  write(20);
  CHECK_THROWS_WITH(read_npy_header(path), Catch::Contains("truncated .npy data: shape (3, 2) of <f4 needs 24 bytes, file holds 20"));
  std::filesystem::remove(path);
}

TEST_CASE("number lists: a number below the smallest subnormal reads as 0, with a note", "[number_text]") {
  std::vector<std::string> notes;
  const auto xs = parse_numbers("1 1e-400 -1e-400 4.9e-324 0e-400", "stdin", &notes);
  REQUIRE(xs.size() == 5);
  CHECK(xs[1] == 0);
  CHECK(std::signbit(xs[2]));
  CHECK(xs[3] > 0);  // the smallest subnormal itself is kept
  REQUIRE(notes.size() == 2);
  CHECK(notes[0] == "stdin: number 2 (\"1e-400\") is below the smallest double subnormal and reads as 0");
  CHECK(notes[1] == "stdin: number 3 (\"-1e-400\") is below the smallest double subnormal and reads as -0");
  CHECK_THROWS_WITH(parse_numbers("1e400", "stdin"), Catch::Contains("number 1 (\"1e400\") is not a finite double"));
}

TEST_CASE("algorithm JSON: options that do not apply to the algorithm are refused", "[algorithm_json]") {
  CHECK_THROWS_WITH(algorithm_from_json(json::parse(R"({"name": "fa2", "pasa": {"beta": 0.9}})"), "a.json:"),
                    "a.json:/pasa: PASA options do not apply to algorithm \"fa2\" (only to \"pasa\")");
  CHECK(algorithm_from_json(json::parse(R"({"name": "pasa", "pasa": {"beta": 0.9}})"), "a.json:").pasa.beta == 0.9);
}

TEST_CASE("problem JSON: generator errors where written, allow_nonfinite, shapes that overflow", "[problem_json]") {
  CHECK_THROWS_WITH(problem_from_json(json::parse(R"({"generator": {"kind": "hybrid", "p": 99999999999999999999}})"), "p.json:"),
                    "p.json:/generator/p: must lie in [0, 1] (got 1e+20)");
  CHECK_THROWS_WITH(problem_from_json(json::parse(R"({"q": {"p": 2}})"), "p.json:"), Catch::Contains("p.json:/q/p: must lie in [0, 1]"));
  CHECK_THROWS_WITH(problem_from_json(json::parse(R"({"generator": {"x0": 1e308, "am": 1e308}})"), "p.json:"),
                    Catch::Contains("p.json:/generator: x0 = 1e+308, am = 1e+308: the generated values would leave double's range"));
  const ProblemSpec p = problem_from_json(json::parse(R"({"allow_nonfinite": true})"), "p.json:");
  CHECK(p.allow_nonfinite);
  CHECK(to_json(p).at("allow_nonfinite") == true);
  CHECK_FALSE(to_json(ProblemSpec{}).contains("allow_nonfinite"));  // written only when set (tables keep their bits)
  CHECK_THROWS_WITH(problem_from_json(json::parse(R"({"shape": {"B": 4294967296, "Sq": 4294967296, "D": 4294967296}})"), "p.json:"),
                    Catch::Contains("its element count overflows"));
}

TEST_CASE("allocation JSON: a GEMM chunk beyond int is refused, not wrapped around", "[allocation_json]") {
  CHECK_THROWS_WITH(allocation_from_json(json::parse(R"({"preset": "fa_fp16", "gemm": {"model": "chunked", "chunk": 1099511627776}})"), "l.json:"),
                    "l.json:/gemm/chunk: expected an integer in [1, 65536], got 1099511627776");
  CHECK(allocation_from_json(json::parse(R"({"preset": "fa_fp16", "gemm": {"model": "chunked", "chunk": 65536}})"), "l.json:").gemm.chunk == 65536);
}
