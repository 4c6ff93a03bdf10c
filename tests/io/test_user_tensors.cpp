// The user's decode tensors (io/user_tensors.hpp) and the .npy bool/integer dtypes they arrive in, and the
// problem JSON's {"npy": file} form.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "pasa/core/error.hpp"
#include "pasa/inputs/generators.hpp"
#include "pasa/io/npy.hpp"
#include "pasa/io/problem_json.hpp"
#include "pasa/io/tensor_io.hpp"
#include "pasa/io/user_tensors.hpp"

using namespace pasa;
namespace fs = std::filesystem;

namespace {
fs::path temp_dir() {
  const fs::path d = fs::temp_directory_path() / ("pasa_user_tensors_" + std::to_string(::getpid()));
  fs::create_directories(d);
  return d;
}
}  // namespace

TEST_CASE(".npy bool and integer dtypes: exact values, refused beyond 2^53 and as tensors", "[npy][user_tensors]") {
  const std::vector<double> v = {0, 1, -5, 4294967295.0};
  for (NpyDtype d : {NpyDtype::i64, NpyDtype::u64, NpyDtype::i32, NpyDtype::u32, NpyDtype::b1}) {
    CAPTURE(npy_descr(d));
    std::vector<double> x = v;
    if (d == NpyDtype::b1) x = {0, 1, 1, 0};
    if (d == NpyDtype::u64 || d == NpyDtype::u32) x[2] = 5;
    if (d == NpyDtype::i32) x[3] = -2147483648.0;
    const std::string bytes = npy_file_bytes(make_npy(x, {2, 2}, d));
    const NpyArray a = parse_npy(std::span(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size()), "x");
    CHECK(a.dtype == d);
    CHECK(npy_values(a) == x);
    CHECK_THROWS_WITH(tensor_from_npy(a, nullptr, "x.npy"), Catch::Contains("holds integers, not tensor values"));
  }
  CHECK_THROWS_AS(make_npy(std::vector<double>{2}, {1}, NpyDtype::b1), InputError);
  CHECK_THROWS_AS(make_npy(std::vector<double>{-1}, {1}, NpyDtype::u32), InputError);
  CHECK_THROWS_AS(make_npy(std::vector<double>{0.5}, {1}, NpyDtype::i64), InputError);
  // 2^53 + 1 as int64: not a double
  std::vector<unsigned char> big(8);
  const std::uint64_t n = (std::uint64_t{1} << 53) + 1;
  for (int b = 0; b < 8; ++b) big[b] = static_cast<unsigned char>(n >> (8 * b));
  CHECK_THROWS_WITH(npy_values(NpyDtype::i64, big, 1), Catch::Contains("exceeds 2^53"));
  const std::vector<unsigned char> two = {2};
  CHECK_THROWS_WITH(npy_values(NpyDtype::b1, two, 1), Catch::Contains("neither 0 nor 1"));
}

TEST_CASE("User pse, select mask and kv_len: shapes checked, heads merged, problem JSON reads them", "[user_tensors]") {
  const fs::path d = temp_dir();
  const UserTensorDims x{2, 3, 1, 4};  // B, Nq, Sq, Skv
  // pse (1, Nq, Sq, Skv) broadcasts; values exact
  std::vector<double> pse(3 * 4);
  for (std::size_t i = 0; i < pse.size(); ++i) pse[i] = 0.25 * static_cast<double>(i) - 1;
  write_npy(d / "pse.npy", make_npy(pse, {1, 3, 1, 4}, NpyDtype::f32));
  const Tensor t = load_pse_npy(d / "pse.npy", x, "w");
  CHECK((t.shape == Shape{1, 3, 1, 4}));
  CHECK(t.data == pse);
  write_npy(d / "pse_bad.npy", make_npy(pse, {3, 1, 4}, NpyDtype::f32));
  CHECK_THROWS_WITH(load_pse_npy(d / "pse_bad.npy", x, "w"),
                    Catch::StartsWith("w: " + (d / "pse_bad.npy").string()) && Catch::Contains("(B or 1, Nq, Sq, Skv)"));
  // select: 4-D with equal heads -> the (B, Sq, Skv) flags; a differing head refused
  std::vector<double> m4(2 * 3 * 4, 0), m3 = {1, 0, 0, 1, 0, 1, 1, 0};
  for (std::size_t b = 0; b < 2; ++b)
    for (std::size_t h = 0; h < 3; ++h)
      for (std::size_t j = 0; j < 4; ++j) m4[(b * 3 + h) * 4 + j] = m3[b * 4 + j];
  write_npy(d / "m4.npy", make_npy(m4, {2, 3, 1, 4}, NpyDtype::b1));
  const std::vector<std::uint8_t> flags = load_select_npy(d / "m4.npy", x, "w");
  CHECK(std::vector<double>(flags.begin(), flags.end()) == m3);
  m4[(1 * 3 + 2) * 4 + 3] = 1;
  write_npy(d / "m4x.npy", make_npy(m4, {2, 3, 1, 4}, NpyDtype::b1));
  CHECK_THROWS_WITH(load_select_npy(d / "m4x.npy", x, "w"), Catch::Contains("heads 0 and 2 at (b=1, i=0, j=3)"));
  // kv_len
  write_npy(d / "len.npy", make_npy(std::vector<double>{4, 2}, {2}, NpyDtype::i64));
  CHECK(load_kv_len_npy(d / "len.npy", x, "w") == std::vector<std::size_t>{4, 2});
  write_npy(d / "len5.npy", make_npy(std::vector<double>{5, 2}, {2}, NpyDtype::i64));
  CHECK_THROWS_WITH(load_kv_len_npy(d / "len5.npy", x, "w"), Catch::Contains("kv_len[0] = 5 lies outside [0, Skv = 4]"));
  // The problem JSON: names relative to base_dir, the tensors used by generate_inputs, to_json writes them back.
  const nlohmann::json j = {{"shape", {{"B", 2}, {"Nq", 3}, {"Sq", 1}, {"Skv", 4}, {"D", 8}}},
                            {"pse", {{"npy", "pse.npy"}}},
                            {"select", {{"npy", "m4.npy"}, {"value", -7}}},
                            {"kv_len", {{"npy", "len.npy"}}}};
  const ProblemSpec p = problem_from_json(j, "p.json:", d);
  const AttentionInputs in = generate_inputs(p, 1);
  CHECK(in.pse.data == pse);
  CHECK(in.mask.select == flags);
  CHECK(in.mask.select_value == -7);
  CHECK(in.mask.kv_len == std::vector<std::size_t>{4, 2});
  const nlohmann::json back = to_json(p);
  CHECK(back["pse"]["npy"] == (d / "pse.npy").string());
  const ProblemSpec p2 = problem_from_json(back, "back:");
  CHECK(generate_inputs(p2, 1).pse.data == pse);
  nlohmann::json both = j;
  both["select"]["p"] = 0.5;
  CHECK_THROWS_WITH(problem_from_json(both, "p.json:", d), Catch::Contains("p.json:/select") && Catch::Contains("not both"));
  CHECK_THROWS_WITH(problem_from_json(j, "p.json:", d / "elsewhere"),
                    Catch::StartsWith("p.json:/kv_len/npy: ") && Catch::Contains("cannot open"));
  fs::remove_all(d);
}
