// The user's kv_len and select tensors in every integer dtype mean the same: uint16 values are
// read as whole little-endian 16-bit integers (kv_len 300 is 300, not its low byte 44), so a decode with a
// uint16 kv_len gives the int64 one's output and lse, and a uint16 select element of 256 is refused as not 0/1.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <vector>

#include "pasa/attention/algorithm.hpp"
#include "pasa/core/error.hpp"
#include "pasa/io/npy.hpp"
#include "pasa/io/user_tensors.hpp"
#include "support/attention_cases.hpp"
#include "support/temp_dirs.hpp"

using namespace pasa;
namespace fs = std::filesystem;

namespace {

// Little-endian bytes of the integers, `width` bytes each (2: numpy's <u2, 8: <i8).
std::vector<unsigned char> le_bytes(const std::vector<std::uint64_t>& v, std::size_t width) {
  std::vector<unsigned char> b;
  for (std::uint64_t x : v)
    for (std::size_t i = 0; i < width; ++i) b.push_back(static_cast<unsigned char>(x >> (8 * i)));
  return b;
}

}  // namespace

TEST_CASE("user tensors: a uint16 kv_len is read as whole 16-bit integers", "[user_tensors]") {
  const UserTensorDims dims{3, 2, 1, 700};
  const std::vector<std::uint64_t> lens = {300, 5, 700};  // 300 = 0x012C and 700 = 0x02BC need the high byte
  const std::vector<std::size_t> want(lens.begin(), lens.end());
  CHECK(kv_len_from_array(NpyDtype::u16, {3}, le_bytes(lens, 2), dims, "kv_len") == want);
  CHECK(kv_len_from_array(NpyDtype::i64, {3}, le_bytes(lens, 8), dims, "kv_len") == want);
  // From .npy files, as a problem's {"kv_len": {"npy": ...}} or pasa-attn --kv-len reads them.
  const fs::path d = test::fresh_dir("kv-len-dtypes");
  fs::create_directories(d);
  write_npy(d / "u16.npy", NpyArray{NpyDtype::u16, {3}, le_bytes(lens, 2)});
  write_npy(d / "i64.npy", NpyArray{NpyDtype::i64, {3}, le_bytes(lens, 8)});
  CHECK(load_kv_len_npy(d / "u16.npy", dims, "--kv-len") == want);
  CHECK(load_kv_len_npy(d / "i64.npy", dims, "--kv-len") == want);
  // 0x0301 = 769 lies outside [0, Skv = 700] (its low byte, 1, would not).
  CHECK_THROWS_WITH(kv_len_from_array(NpyDtype::u16, {3}, le_bytes({769, 1, 1}, 2), dims, "kv_len"),
                    Catch::Contains("kv_len[0] = 769 lies outside"));
}

TEST_CASE("user tensors: a decode with a uint16 kv_len of 300 equals the int64 one", "[user_tensors]") {
  // One query row over 512 keys; batch 0 sees its first 300 keys. The lse of the uint16 run is the int64
  // run's, and both differ from a run that sees 44 keys.
  const std::size_t Skv = 512, D = 16;
  AttentionInputs in;
  in.q = test::uniform_tensor({2, 2, 1, D}, 0, 1, 1);
  in.k = test::uniform_tensor({2, 2, Skv, D}, 0, 1, 2);
  in.v = test::uniform_tensor({2, 2, Skv, D}, 0, 1, 3);
  const UserTensorDims dims{2, 2, 1, Skv};
  const AlgorithmSpec spec = test::decode_spec("fa2", "fa_fp16_fp32", 64, 1);
  auto run = [&](std::vector<std::size_t> kv) {
    AttentionInputs x = in;
    x.mask.kv_len = std::move(kv);
    return run_attention(x, spec, 1);
  };
  const AttentionOutput u16 = run(kv_len_from_array(NpyDtype::u16, {2}, le_bytes({300, 512}, 2), dims, "kv_len"));
  const AttentionOutput i64 = run(kv_len_from_array(NpyDtype::i64, {2}, le_bytes({300, 512}, 8), dims, "kv_len"));
  const AttentionOutput short44 = run({44, 512});
  CHECK(u16.lse == i64.lse);
  CHECK(u16.o.data == i64.o.data);
  CHECK(u16.lse[0] != short44.lse[0]);
}

TEST_CASE("user tensors: a uint16 select mask is read as whole 16-bit integers", "[user_tensors]") {
  const UserTensorDims dims{1, 1, 2, 3};
  const std::vector<std::uint64_t> flags = {0, 1, 1, 0, 0, 1};
  const std::vector<std::uint8_t> want = {0, 1, 1, 0, 0, 1};
  CHECK(select_from_array(NpyDtype::u16, {1, 2, 3}, le_bytes(flags, 2), dims, "select") == want);
  CHECK(select_from_array(NpyDtype::b1, {1, 2, 3}, le_bytes(flags, 1), dims, "select") == want);
  // 256 (low byte 0) and 257 (low byte 1) are not 0/1.
  for (std::uint64_t bad : {256, 257}) {
    std::vector<std::uint64_t> f = flags;
    f[4] = bad;
    INFO(bad);
    CHECK_THROWS_WITH(select_from_array(NpyDtype::u16, {1, 2, 3}, le_bytes(f, 2), dims, "select"),
                      Catch::Contains("select mask element 4 is " + std::to_string(bad) + "; expected 0/1"));
  }
}
