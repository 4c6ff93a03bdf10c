// .npy reading and writing. Fixtures are written byte by byte here (independent of write_npy), following
// the NumPy format specification (numpy/lib/format.py): magic, version, header length, dict, data.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "pasa/core/error.hpp"
#include "pasa/io/npy.hpp"
#include "pasa/numeric/round.hpp"

using namespace pasa;
namespace fs = std::filesystem;

namespace {

// A fresh, empty directory per test case, removed at the end.
struct TempDir {
  fs::path dir;
  explicit TempDir(const std::string& tag) {
    dir = fs::temp_directory_path() / ("pasa-test-npy-" + tag + "-" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  std::size_t file_count() const {
    return static_cast<std::size_t>(std::distance(fs::directory_iterator(dir), fs::directory_iterator()));
  }
};

// Bytes of a .npy file: version 1.0 (2-byte length) or 2.0 (4-byte length), header padded to 64 bytes.
std::string npy_bytes(const std::string& dict, const std::string& data, int major = 1) {
  std::string header = dict;
  const std::size_t pre = 6 + 2 + (major == 1 ? 2 : 4);
  while ((pre + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string s = "\x93NUMPY";
  s += static_cast<char>(major);
  s += '\0';
  const std::size_t n = header.size();
  s += static_cast<char>(n & 0xFF);
  s += static_cast<char>((n >> 8) & 0xFF);
  if (major != 1) {
    s += static_cast<char>((n >> 16) & 0xFF);
    s += static_cast<char>((n >> 24) & 0xFF);
  }
  return s + header + data;
}

template <class T>
std::string raw(std::initializer_list<T> xs) {
  std::string s;
  for (T x : xs) s.append(reinterpret_cast<const char*>(&x), sizeof(T));  // little-endian host
  return s;
}

void put_file(const fs::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}
std::string get_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

bool same_bits(double a, double b) { return std::bit_cast<std::uint64_t>(a) == std::bit_cast<std::uint64_t>(b); }

}  // namespace

TEST_CASE("npy reads hand-written files of every dtype", "[npy]") {
  TempDir t("read");
  const fs::path p = t.dir / "a.npy";

  put_file(p, npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }",
                        raw<float>({1.5f, -2.0f, 0.1f, 1e-45f, -0.0f, 3e38f})));
  NpyArray a = read_npy(p);
  CHECK(a.dtype == NpyDtype::f32);
  CHECK(a.shape == std::vector<std::size_t>{2, 3});
  std::vector<double> v = npy_values(a);
  REQUIRE(v.size() == 6);
  CHECK(v[0] == 1.5);
  CHECK(v[2] == static_cast<double>(0.1f));
  CHECK(v[3] == std::ldexp(1.0, -149));
  CHECK(std::signbit(v[4]));

  // Version 2.0 header, double quotes, no trailing comma, float64.
  put_file(p, npy_bytes("{\"descr\": \"<f8\", \"fortran_order\": False, \"shape\": (3,)}",
                        raw<double>({0.1, -1e300, 5e-324}), 2));
  v = npy_values(read_npy(p));
  CHECK(v == std::vector<double>{0.1, -1e300, 5e-324});

  // float16: 1.0 = 0x3C00, -2 = 0xC000, smallest subnormal 0x0001 = 2^-24, inf 0x7C00.
  put_file(p, npy_bytes("{'descr': '<f2', 'fortran_order': False, 'shape': (4,), }",
                        raw<std::uint16_t>({0x3C00, 0xC000, 0x0001, 0x7C00})));
  v = npy_values(read_npy(p));
  CHECK(v[0] == 1.0);
  CHECK(v[1] == -2.0);
  CHECK(v[2] == std::ldexp(1.0, -24));
  CHECK(v[3] == std::numeric_limits<double>::infinity());

  // uint8 patterns of fp8_e4m3fn (0x7E = 448, 0x01 = 2^-9, 0xB8 = -1) and uint16 of bf16 (0x3F80 = 1).
  const Format e4 = format_by_name("fp8_e4m3fn"), bf = format_by_name("bf16");
  put_file(p, npy_bytes("{'descr': '|u1', 'fortran_order': False, 'shape': (3,), }", "\x7E\x01\xB8"));
  a = read_npy(p);
  CHECK(a.dtype == NpyDtype::u8);
  CHECK(npy_values(a, &e4) == std::vector<double>{448.0, std::ldexp(1.0, -9), -1.0});
  CHECK_THROWS_AS(npy_values(a), InputError);  // bit patterns need a format
  put_file(p, npy_bytes("{'descr': '<u2', 'fortran_order': False, 'shape': (1, 1), }", raw<std::uint16_t>({0x3F80})));
  CHECK(npy_values(read_npy(p), &bf) == std::vector<double>{1.0});
  CHECK_THROWS_AS(npy_values(read_npy(p), &e4), InputError);  // not the element width of fp8

  // A scalar (shape ()) holds one element.
  put_file(p, npy_bytes("{'descr': '<f8', 'fortran_order': False, 'shape': (), }", raw<double>({2.5})));
  a = read_npy(p);
  CHECK(a.shape.empty());
  CHECK(npy_values(a) == std::vector<double>{2.5});
}

TEST_CASE("npy round trips every dtype bit-exactly", "[npy]") {
  TempDir t("roundtrip");
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  struct Case {
    NpyDtype dtype;
    const char* bits_format;
    std::vector<double> values;
  };
  const std::vector<Case> cases = {
      {NpyDtype::f64, nullptr, {0.1, -0.0, 5e-324, 1.7976931348623157e308, -inf, nan}},
      {NpyDtype::f32, nullptr, {static_cast<double>(0.1f), -0.0, std::ldexp(1.0, -149), 0x1.fffffep127, inf, nan}},
      {NpyDtype::f16, nullptr, {1.0, -0.0, std::ldexp(1.0, -24), 65504.0, -inf, nan}},
      {NpyDtype::u8, "fp8_e4m3fn", {448.0, -0.0, std::ldexp(1.0, -9), -1.75, 0.0, nan}},
      {NpyDtype::u8, "fp8_e5m2", {57344.0, -0.0, std::ldexp(1.0, -16), -1.5, inf, nan}},
      {NpyDtype::u16, "bf16", {0x1.fep127, -0.0, std::ldexp(1.0, -133), 1.0078125, -inf, nan}},
      {NpyDtype::u16, "fp16", {65504.0, -0.0, std::ldexp(1.0, -24), -1.0009765625, inf, nan}},
  };
  for (const auto& c : cases) {
    const Format f = c.bits_format ? format_by_name(c.bits_format) : Format{};
    const Format* fp = c.bits_format ? &f : nullptr;
    INFO("dtype " << npy_descr(c.dtype) << " " << (c.bits_format ? c.bits_format : ""));
    const NpyArray a = make_npy(c.values, {2, 3}, c.dtype, fp);
    CHECK(a.bytes.size() == 6 * npy_itemsize(c.dtype));
    const fs::path p = t.dir / "r.npy";
    write_npy(p, a);
    const std::string bytes = get_file(p);
    // The header as the NumPy spec says: magic, version 1.0, data start aligned to 64 bytes.
    REQUIRE(bytes.substr(0, 8) == std::string("\x93NUMPY\x01\x00", 8));
    const std::size_t hl = static_cast<unsigned char>(bytes[8]) | (static_cast<unsigned char>(bytes[9]) << 8);
    CHECK((10 + hl) % 64 == 0);
    CHECK(bytes.size() == 10 + hl + a.bytes.size());
    CHECK(bytes.substr(10, hl).find("'descr': '" + npy_descr(c.dtype) + "'") != std::string::npos);
    CHECK(bytes.substr(10, hl).find("'shape': (2, 3)") != std::string::npos);
    const NpyArray b = read_npy(p);
    CHECK(b.dtype == c.dtype);
    CHECK(b.shape == a.shape);
    CHECK(b.bytes == a.bytes);
    const std::vector<double> v = npy_values(b, fp);
    REQUIRE(v.size() == c.values.size());
    for (std::size_t i = 0; i < v.size(); ++i) {
      INFO("element " << i);
      CHECK((std::isnan(c.values[i]) ? std::isnan(v[i]) : same_bits(v[i], c.values[i])));
    }
  }
  // One-dimensional arrays are written as (n,), which read back with one dimension.
  write_npy(t.dir / "one.npy", make_npy(std::vector<double>{1.0, 2.0}, {2}, NpyDtype::f64));
  CHECK(get_file(t.dir / "one.npy").find("'shape': (2,)") != std::string::npos);
  CHECK(read_npy(t.dir / "one.npy").shape == std::vector<std::size_t>{2});
  CHECK(t.file_count() == 2);  // no temporary files left behind
}

TEST_CASE("make_npy rejects values that are not exact in the dtype", "[npy]") {
  const Format e4 = format_by_name("fp8_e4m3fn"), h = format_by_name("fp16");
  CHECK_THROWS_AS(make_npy(std::vector<double>{0.1}, {1}, NpyDtype::f32), InputError);
  CHECK_THROWS_AS(make_npy(std::vector<double>{1.0 + 1.0 / 4096}, {1}, NpyDtype::f16), InputError);
  CHECK_THROWS_AS(make_npy(std::vector<double>{1.0625}, {1}, NpyDtype::u8, &e4), InputError);
  CHECK_THROWS_AS(make_npy(std::vector<double>{1.0}, {1}, NpyDtype::u8, &h), InputError);  // 16 bits in 8
  CHECK_THROWS_AS(make_npy(std::vector<double>{1.0}, {1}, NpyDtype::u8), InputError);      // no format
  CHECK_THROWS_AS(make_npy(std::vector<double>{1.0, 2.0}, {3}, NpyDtype::f64), InputError);
}

TEST_CASE("npy reports each kind of malformed file", "[npy]") {
  TempDir t("bad");
  const fs::path p = t.dir / "bad.npy";
  const std::string ok_dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";
  const std::string two = raw<float>({1.0f, 2.0f});
  auto expect_error = [&](const std::string& bytes, const std::string& reason) {
    put_file(p, bytes);
    INFO("expected reason: " << reason);
    CHECK_THROWS_WITH(read_npy(p), Catch::Contains(p.string()) && Catch::Contains(reason));
  };
  expect_error("PK\x03\x04 not numpy at all, a zip file", "wrong magic");
  expect_error("", "wrong magic");
  expect_error(npy_bytes(ok_dict, two).substr(0, 9), "truncated .npy header");
  expect_error(npy_bytes(ok_dict, two).substr(0, 40), "truncated .npy header");
  expect_error(npy_bytes(ok_dict, two, 7), "unsupported .npy format version 7");
  expect_error(npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), ", two), "malformed .npy header");
  expect_error(npy_bytes("{'descr': '<f4', 'shape': (2,), }", two), "lacks one of the keys");
  expect_error(npy_bytes("{'descr': '<f4', 'fortran_order': Maybe, 'shape': (2,), }", two), "neither True nor False");
  expect_error(npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2.5,), }", two), "in the shape tuple");
  expect_error(npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }", two), "negative dimension");
  expect_error(npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}", two), "unexpected header key 'x'");
  expect_error(npy_bytes("[1, 2]", two), "malformed .npy header");
  // Unsupported dtypes: the message lists the supported ones.
  expect_error(npy_bytes("{'descr': '<i2', 'fortran_order': False, 'shape': (2,), }", two), "unsupported .npy dtype '<i2'");
  expect_error(npy_bytes("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", two), "supported: '<f2' (float16)");
  expect_error(npy_bytes("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }", two), "quoted string");
  expect_error(npy_bytes("{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }", two), "Fortran order");
  // Truncated data, too much data, absurd shapes.
  expect_error(npy_bytes(ok_dict, two.substr(0, 7)), "truncated .npy data");
  expect_error(npy_bytes(ok_dict, two + "xx"), "2 bytes more than shape");
  expect_error(npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (1000000, 1000000), }", two), "truncated .npy data");
  expect_error(npy_bytes("{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296), }", two), "overflows");
  expect_error(npy_bytes("{'descr': '<f8', 'fortran_order': False, 'shape': (99999999999999999999999,), }", two), "overflows");
  CHECK_THROWS_WITH(read_npy(t.dir / "missing.npy"), Catch::Contains("missing.npy") && Catch::Contains("cannot open"));
}

TEST_CASE("npy writes atomically and leaves nothing on failure", "[npy]") {
  TempDir t("atomic");
  const fs::path p = t.dir / "keep.npy";
  write_npy(p, make_npy(std::vector<double>{1.0, 2.0}, {2}, NpyDtype::f64));
  const std::string before = get_file(p);
  // A bad array (bytes do not match the shape) leaves the existing file as it was.
  NpyArray bad = make_npy(std::vector<double>{1.0, 2.0}, {2}, NpyDtype::f64);
  bad.shape = {3};
  CHECK_THROWS(write_npy(p, bad));
  CHECK(get_file(p) == before);
  // A target in a missing directory: an error naming it, and nothing created.
  CHECK_THROWS_WITH(write_npy(t.dir / "no" / "such" / "x.npy", make_npy(std::vector<double>{1.0}, {1}, NpyDtype::f64)),
                    Catch::Contains("x.npy"));
  // A target that is a directory: the rename fails and the temporary file is removed.
  fs::create_directory(t.dir / "adir.npy");
  CHECK_THROWS_AS(write_npy(t.dir / "adir.npy", make_npy(std::vector<double>{1.0}, {1}, NpyDtype::f64)), InputError);
  CHECK(t.file_count() == 2);  // keep.npy and adir.npy only
}
