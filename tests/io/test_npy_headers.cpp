// Q, K and V from .npy are checked from their headers alone before any data are read:
// a Q of (16, 8) with K/V headers of (1000000, 1024) used to read 4 GB for 49 s, then end in bad_alloc.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "pasa/core/error.hpp"
#include "pasa/io/npy.hpp"
#include "pasa/io/tensor_io.hpp"

using namespace pasa;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

fs::path temp_file(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("pasa-test-npy-headers-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return dir / name;
}

// A version 1.0 .npy header for `descr` and `shape` (written by hand: the data may be absent), then
// `data_bytes` bytes of data, left as a hole (a sparse file: no disk used).
void write_header(const fs::path& file, const std::string& descr, const std::string& shape, std::size_t data_bytes) {
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  while ((10 + dict.size() + 1) % 64 != 0) dict += ' ';
  dict += '\n';
  std::string head = "\x93NUMPY";
  head += '\x01';
  head += '\x00';
  head += static_cast<char>(dict.size() & 0xff);
  head += static_cast<char>(dict.size() >> 8);
  {
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out << head << dict;
  }
  fs::resize_file(file, head.size() + dict.size() + data_bytes);
}

}  // namespace

TEST_CASE("npy inputs: every header is checked before any data is read", "[inputs]") {
  const fs::path q = temp_file("q.npy"), k = temp_file("k.npy"), v = temp_file("v.npy");
  write_npy(q, make_npy(std::vector<double>(16 * 8, 0.5), {16, 8}, NpyDtype::f16));

  SECTION("K/V claim (1000000, 1024): refused for the mismatched D without reading their 2 GB") {
    // Sparse files of the full declared size: the headers agree with the file sizes, so only the shape
    // check can stop the read (reading them would take seconds and 16 GB as doubles).
    write_header(k, "<f2", "(1000000, 1024)", std::size_t{1000000} * 1024 * 2);
    fs::copy_file(k, v, fs::copy_options::overwrite_existing);
    CHECK_THROWS_WITH(read_qkv_headers(q, k, v),
                      Contains("head dimension D of Q differs") && Contains(q.string() + " (16, 8)") &&
                          Contains(k.string() + " (1000000, 1024)"));
  }
  SECTION("a header that claims more data than the file holds: refused naming the file and its shape") {
    write_header(k, "<f2", "(1000000, 8)", 16);
    write_npy(v, make_npy(std::vector<double>(16 * 8, 0.5), {16, 8}, NpyDtype::f16));
    CHECK_THROWS_WITH(read_qkv_headers(q, k, v), Contains(k.string()) && Contains("truncated") && Contains("(1000000, 8)"));
  }
  SECTION("GQA ratio, batch and K = V are checked; a consistent trio gives the shapes and formats") {
    write_npy(k, make_npy(std::vector<double>(2 * 4 * 8, 1), {2, 4, 8}, NpyDtype::f32));
    write_npy(v, make_npy(std::vector<double>(2 * 4 * 8, 1), {2, 4, 8}, NpyDtype::f32));
    const fs::path q3 = temp_file("q3.npy"), q4 = temp_file("q4.npy"), qb = temp_file("qb.npy");
    write_npy(q3, make_npy(std::vector<double>(3 * 2 * 8, 1), {3, 2, 8}, NpyDtype::f16));
    CHECK_THROWS_WITH(read_qkv_headers(q3, k, v), Contains("not a multiple of N_kv"));
    write_npy(qb, make_npy(std::vector<double>(2 * 4 * 2 * 8, 1), {2, 4, 2, 8}, NpyDtype::f16));
    CHECK_THROWS_WITH(read_qkv_headers(qb, k, v), Contains("batch size"));
    CHECK_THROWS_WITH(read_qkv_headers(q, k, q), Contains("K and V shapes differ"));
    write_npy(q4, make_npy(std::vector<double>(4 * 2 * 8, 1), {4, 2, 8}, NpyDtype::f16));
    const auto h = read_qkv_headers(q4, k, v);
    CHECK(h[0].shape == Shape{1, 4, 2, 8});
    CHECK(h[1].shape == Shape{1, 2, 4, 8});
    CHECK(h[0].format == format_by_name("fp16"));
    CHECK(h[1].format == format_by_name("fp32"));
    CHECK(h[1].data_bytes == 2 * 4 * 8 * 4);
  }
  SECTION("bit patterns without their format, or of a wider format, are refused at the header") {
    write_header(k, "|u1", "(16, 8)", 16 * 8);
    CHECK_THROWS_WITH(read_tensor_header(k), Contains("name their format"));
    const Format bf = format_by_name("bf16");
    CHECK_THROWS_WITH(read_tensor_header(k, &bf), Contains("storage bits"));
  }
  fs::remove_all(q.parent_path());
}
