#include "pasa/io/npy.hpp"
#include "pasa/io/input_file.hpp"

#include <bit>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <limits>
#include <random>
#include <system_error>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "pasa/core/error.hpp"
#include "pasa/io/output_file.hpp"
#include "pasa/numeric/round.hpp"

namespace pasa {

static_assert(std::endian::native == std::endian::little, "the .npy code assumes a little-endian host");

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr std::size_t kMagicLen = 6;

struct DtypeInfo {
  NpyDtype dtype;
  const char* descr;  // what we write
  const char* alt;    // another spelling NumPy uses for the same bytes
  std::size_t size;
};
constexpr DtypeInfo kDtypes[] = {
    {NpyDtype::f16, "<f2", "<f2", 2}, {NpyDtype::f32, "<f4", "<f4", 4}, {NpyDtype::f64, "<f8", "<f8", 8},
    {NpyDtype::u8, "|u1", "<u1", 1},  {NpyDtype::u16, "<u2", "<u2", 2}, {NpyDtype::b1, "|b1", "<b1", 1},
    {NpyDtype::i32, "<i4", "<i4", 4}, {NpyDtype::i64, "<i8", "<i8", 8}, {NpyDtype::u32, "<u4", "<u4", 4},
    {NpyDtype::u64, "<u8", "<u8", 8},
};

const DtypeInfo& info(NpyDtype d) {
  for (const auto& i : kDtypes)
    if (i.dtype == d) return i;
  throw std::invalid_argument("unknown NpyDtype");
}

// Parser of the header: a Python dict literal {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }.
class HeaderParser {
 public:
  HeaderParser(std::string_view s, const std::filesystem::path& file) : s_(s), file_(file) {}

  NpyArray parse() {
    NpyArray a{NpyDtype::f64, {}, {}};
    bool have_descr = false, have_order = false, have_shape = false;
    expect('{');
    while (true) {
      skip_ws();
      if (peek() == '}') break;
      const std::string key = string_literal();
      expect(':');
      if (key == "descr") {
        a.dtype = dtype_of(string_literal());
        have_descr = true;
      } else if (key == "fortran_order") {
        if (boolean()) fail("Fortran order (fortran_order: True) is not supported; save a C-order array");
        have_order = true;
      } else if (key == "shape") {
        a.shape = shape_tuple();
        have_shape = true;
      } else {
        fail(fmt::format("unexpected header key '{}'", key));
      }
      skip_ws();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      skip_ws();
      if (peek() != '}') fail("expected ',' or '}' in the header dict");
    }
    ++pos_;
    skip_ws();
    if (pos_ != s_.size()) fail("trailing characters after the header dict");
    if (!have_descr || !have_order || !have_shape)
      fail("header lacks one of the keys 'descr', 'fortran_order', 'shape'");
    return a;
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw InputError(fmt::format("{}: malformed .npy header: {}", file_.string(), why));
  }
  void skip_ws() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) ++pos_;
  }
  char peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  void expect(char c) {
    skip_ws();
    if (peek() != c) fail(fmt::format("expected '{}' at header offset {}", c, pos_));
    ++pos_;
  }
  std::string string_literal() {
    skip_ws();
    const char q = peek();
    if (q != '\'' && q != '"') fail(fmt::format("expected a quoted string at header offset {}", pos_));
    const std::size_t end = s_.find(q, pos_ + 1);
    if (end == std::string_view::npos) fail("unterminated string");
    std::string r(s_.substr(pos_ + 1, end - pos_ - 1));
    pos_ = end + 1;
    return r;
  }
  bool boolean() {
    skip_ws();
    if (s_.substr(pos_, 4) == "True") return pos_ += 4, true;
    if (s_.substr(pos_, 5) == "False") return pos_ += 5, false;
    fail("fortran_order is neither True nor False");
  }
  std::vector<std::size_t> shape_tuple() {
    expect('(');
    std::vector<std::size_t> shape;
    while (true) {
      skip_ws();
      if (peek() == ')') break;
      if (peek() == '-') fail(fmt::format("shape holds a negative dimension at header offset {}", pos_));
      if (peek() < '0' || peek() > '9') fail(fmt::format("shape holds a non-integer at header offset {}", pos_));
      std::size_t v = 0;
      while (peek() >= '0' && peek() <= '9') {
        const std::size_t d = static_cast<std::size_t>(peek() - '0');
        if (v > (std::numeric_limits<std::size_t>::max() - d) / 10) fail("shape dimension overflows");
        v = v * 10 + d;
        ++pos_;
      }
      if (peek() == 'L') ++pos_;  // Python 2 long suffix
      shape.push_back(v);
      skip_ws();
      if (peek() == ',') ++pos_;
      else if (peek() != ')') fail("expected ',' or ')' in the shape tuple");
    }
    ++pos_;
    return shape;
  }
  NpyDtype dtype_of(const std::string& d) const {
    for (const auto& i : kDtypes)
      if (d == i.descr || d == i.alt) return i.dtype;
    throw InputError(fmt::format("{}: unsupported .npy dtype '{}'; supported: {}", file_.string(), d,
                                 npy_supported_dtypes()));
  }

  std::string_view s_;
  const std::filesystem::path& file_;
  std::size_t pos_ = 0;
};

// product(shape) * itemsize, or nothing when it overflows.
bool checked_bytes(const std::vector<std::size_t>& shape, std::size_t itemsize, std::size_t& out) {
  std::size_t n = itemsize;
  for (std::size_t d : shape) {
    if (d != 0 && n > std::numeric_limits<std::size_t>::max() / d) return false;
    n *= d;
  }
  out = n;
  return true;
}

std::uint32_t le(const unsigned char* p, int n) {
  std::uint32_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

}  // namespace

std::size_t npy_itemsize(NpyDtype d) { return info(d).size; }
bool npy_is_integer(NpyDtype d) {
  return d == NpyDtype::b1 || d == NpyDtype::i32 || d == NpyDtype::i64 || d == NpyDtype::u32 || d == NpyDtype::u64;
}
std::string npy_descr(NpyDtype d) { return info(d).descr; }
std::string npy_supported_dtypes() {
  return "'<f2' (float16), '<f4' (float32), '<f8' (float64), '|u1' (uint8 bit patterns), '<u2' (uint16 bit "
         "patterns), and for masks and lengths '|b1' (bool), '<i4', '<i8', '<u4', '<u8'; little-endian, C order";
}
std::size_t npy_element_count(const NpyArray& a) {
  std::size_t n = 1;
  for (std::size_t d : a.shape) n *= d;
  return n;
}

namespace {

// The header of a .npy whose first bytes are `prefix` and whose size is `file_size`: dtype and shape (bytes
// left empty), checked against the file size; `data_offset` receives where the data start.
NpyArray parse_header(std::span<const unsigned char> buf, std::size_t file_size, const std::filesystem::path& file,
                      std::size_t& data_offset) {
  if (buf.size() < kMagicLen + 2 || std::memcmp(buf.data(), kMagic, kMagicLen) != 0)
    throw InputError(fmt::format("{}: not a .npy file (wrong magic; expected \\x93NUMPY)", file.string()));
  const int major = buf[6];
  if (major < 1 || major > 3)
    throw InputError(fmt::format("{}: unsupported .npy format version {}.{}", file.string(), major, buf[7]));
  const int len_bytes = major == 1 ? 2 : 4;
  const std::size_t pre = kMagicLen + 2 + static_cast<std::size_t>(len_bytes);
  if (buf.size() < pre) throw InputError(fmt::format("{}: truncated .npy header", file.string()));
  const std::size_t header_len = le(buf.data() + kMagicLen + 2, len_bytes);
  if (buf.size() - pre < header_len)
    throw InputError(fmt::format("{}: truncated .npy header (declares {} bytes, file has {})", file.string(),
                                 header_len, file_size - pre));
  const std::string_view header(reinterpret_cast<const char*>(buf.data() + pre), header_len);
  NpyArray a = HeaderParser(header, file).parse();
  std::size_t need = 0;
  const std::size_t have = file_size - pre - header_len;
  std::string dims;
  for (std::size_t d : a.shape) dims += (dims.empty() ? "" : ", ") + std::to_string(d);
  if (!checked_bytes(a.shape, npy_itemsize(a.dtype), need))
    throw InputError(fmt::format("{}: absurd .npy shape ({}): its byte count overflows", file.string(), dims));
  if (need > have)
    throw InputError(fmt::format("{}: truncated .npy data: shape ({}) of {} needs {} bytes, file holds {}",
                                 file.string(), dims, npy_descr(a.dtype), need, have));
  if (need < have)
    throw InputError(fmt::format("{}: .npy data has {} bytes more than shape ({}) of {} needs", file.string(),
                                 have - need, dims, npy_descr(a.dtype)));
  data_offset = pre + header_len;
  return a;
}

}  // namespace

namespace {

// The header of an open file (read_npy_header); `data_offset` receives where the data start.
NpyArray read_header(std::ifstream& in, const std::filesystem::path& file, std::size_t& data_offset) {
  std::error_code ec;
  const std::size_t size = std::filesystem::file_size(file, ec);
  if (ec) throw InputError(fmt::format("{}: cannot read its size: {}", file.string(), ec.message()));
  std::vector<unsigned char> buf(std::min<std::size_t>(size, kMagicLen + 6));
  in.read(reinterpret_cast<char*>(buf.data()), static_cast<std::streamsize>(buf.size()));
  if (buf.size() >= kMagicLen + 6 && std::memcmp(buf.data(), kMagic, kMagicLen) == 0 && buf[6] >= 1 && buf[6] <= 3) {
    // The whole header (its length is in the first bytes), at most the file.
    const std::size_t pre = kMagicLen + 2 + (buf[6] == 1 ? 2u : 4u);
    const std::size_t want = std::min(size, pre + le(buf.data() + kMagicLen + 2, buf[6] == 1 ? 2 : 4));
    const std::size_t had = buf.size();
    buf.resize(std::max(had, want));
    in.read(reinterpret_cast<char*>(buf.data() + had), static_cast<std::streamsize>(buf.size() - had));
  }
  return parse_header(buf, size, file, data_offset);
}

}  // namespace

// The header first (its shape checked against the file's size), then the data straight into the array's
// buffer: the file's bytes are held once, and a malformed or mis-sized file is refused before any is read.
NpyArray read_npy(const std::filesystem::path& file) {
  std::ifstream in = open_input_file(file);  // (a regular file: its size is checked against the header)
  std::size_t offset = 0;
  NpyArray a = read_header(in, file, offset);
  std::size_t n = 0;
  checked_bytes(a.shape, npy_itemsize(a.dtype), n);  // (parse_header checked that it does not overflow)
  a.bytes.resize(n);
  in.clear();
  in.seekg(static_cast<std::streamoff>(offset));
  in.read(reinterpret_cast<char*>(a.bytes.data()), static_cast<std::streamsize>(n));
  if (!in || static_cast<std::size_t>(in.gcount()) != n)
    throw InputError(fmt::format("{}: read error (the file changed or could not be read)", file.string()));
  return a;
}

NpyMapped map_npy(const std::filesystem::path& file) {
  std::size_t offset = 0;
  NpyMapped m;
  {
    std::ifstream in = open_input_file(file);
    m.header = read_header(in, file, offset);
  }
  std::size_t n = 0;
  checked_bytes(m.header.shape, npy_itemsize(m.header.dtype), n);
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw InputError(fmt::format("{}: cannot open: {}", file.string(), std::strerror(errno)));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || static_cast<std::size_t>(st.st_size) < offset + n) {
    ::close(fd);
    throw InputError(fmt::format("{}: read error (the file changed or could not be read)", file.string()));
  }
  const std::size_t len = offset + n;
  void* base = ::mmap(nullptr, len, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);  // (the mapping keeps the file)
  if (base == MAP_FAILED) throw InputError(fmt::format("{}: cannot map: {}", file.string(), std::strerror(errno)));
  m.data = static_cast<const unsigned char*>(base) + offset;
  m.owner = std::shared_ptr<const void>(base, [len](const void* p) { ::munmap(const_cast<void*>(p), len); });
  return m;
}

NpyArray read_npy_header(const std::filesystem::path& file) {
  std::ifstream in = open_input_file(file);
  std::size_t offset = 0;
  return read_header(in, file, offset);
}

NpyArray parse_npy(std::span<const unsigned char> buf, const std::filesystem::path& file) {
  std::size_t offset = 0;
  NpyArray a = parse_header(buf, buf.size(), file, offset);
  a.bytes.assign(buf.begin() + static_cast<std::ptrdiff_t>(offset), buf.end());
  return a;
}

std::string npy_file_bytes(const NpyArray& a) {
  std::size_t need = 0;
  if (!checked_bytes(a.shape, npy_itemsize(a.dtype), need) || need != a.bytes.size())
    throw std::invalid_argument(fmt::format("npy_file_bytes: {} data bytes do not match the shape", a.bytes.size()));
  std::string dims;
  for (std::size_t d : a.shape) dims += (dims.empty() ? "" : ", ") + std::to_string(d);
  if (a.shape.size() == 1) dims += ',';  // Python's one-element tuple: (n,)
  std::string header = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': ({}), }}",
                                   npy_descr(a.dtype), dims);
  // Version 1.0 with a 2-byte length, padded with spaces and a newline so the data starts 64-byte aligned.
  const std::size_t pre = kMagicLen + 2 + 2;
  const std::size_t total = (pre + header.size() + 1 + 63) / 64 * 64;
  header.append(total - pre - header.size() - 1, ' ');
  header.push_back('\n');
  if (header.size() > 0xFFFF) throw InputError("a .npy shape with too many dimensions");
  std::string out(kMagic, kMagicLen);
  out += static_cast<char>(1);
  out += static_cast<char>(0);
  out += static_cast<char>(header.size() & 0xFF);
  out += static_cast<char>(header.size() >> 8);
  out += header;
  out.append(reinterpret_cast<const char*>(a.bytes.data()), a.bytes.size());
  return out;
}

void write_npy(const std::filesystem::path& file, const NpyArray& a) { write_file_atomic(file, npy_file_bytes(a)); }

namespace {
// The Format whose bit patterns a u8/u16 array holds; checks it fits the element width.
const Format& bits_format_for(NpyDtype d, const Format* f) {
  const int width = d == NpyDtype::u8 ? 8 : 16;
  if (f == nullptr)
    throw InputError(fmt::format("a {} array holds bit patterns; say of which format", npy_descr(d)));
  if (f->storage_bits() > width)
    throw InputError(fmt::format("format {} needs {} storage bits; a {} element holds {}", f->name,
                                 f->storage_bits(), npy_descr(d), width));
  return *f;
}
}  // namespace

std::vector<double> npy_values(const NpyArray& a, const Format* bits_format) {
  return npy_values(a.dtype, a.bytes, npy_element_count(a), bits_format);
}

std::vector<double> npy_values(NpyDtype dtype, std::span<const unsigned char> bytes, std::size_t n,
                               const Format* bits_format) {
  std::vector<double> v(n);
  npy_values(dtype, bytes, bits_format, std::span<double>(v));
  return v;
}

void npy_values(NpyDtype dtype, std::span<const unsigned char> bytes, const Format* bits_format, std::span<double> v) {
  const std::size_t n = v.size();
  if (bytes.size() != n * npy_itemsize(dtype))
    throw std::invalid_argument("npy_values: data bytes do not match the shape");
  const unsigned char* p = bytes.data();
  switch (dtype) {
    case NpyDtype::f64:
      std::memcpy(v.data(), p, n * 8);
      break;
    case NpyDtype::f32:
      for (std::size_t i = 0; i < n; ++i) {
        float x;
        std::memcpy(&x, p + 4 * i, 4);
        v[i] = x;
      }
      break;
    case NpyDtype::f16: {
      const Format h = format_by_name("fp16");
      for (std::size_t i = 0; i < n; ++i) v[i] = decode(le(p + 2 * i, 2), h);
      break;
    }
    case NpyDtype::u8:
    case NpyDtype::u16: {
      const Format& f = bits_format_for(dtype, bits_format);
      const int w = static_cast<int>(npy_itemsize(dtype));
      for (std::size_t i = 0; i < n; ++i) {
        try {
          v[i] = decode(le(p + w * i, w), f);
        } catch (const std::domain_error& e) {
          throw InputError(fmt::format("element {}: {}", i, e.what()));
        }
      }
      break;
    }
    case NpyDtype::b1:
    case NpyDtype::i32:
    case NpyDtype::i64:
    case NpyDtype::u32:
    case NpyDtype::u64: {
      const std::size_t w = npy_itemsize(dtype);
      const bool is_signed = dtype == NpyDtype::i32 || dtype == NpyDtype::i64;
      for (std::size_t i = 0; i < n; ++i) {
        std::uint64_t u = 0;
        for (std::size_t b = 0; b < w; ++b) u |= static_cast<std::uint64_t>(p[w * i + b]) << (8 * b);
        if (dtype == NpyDtype::b1 && u > 1) throw InputError(fmt::format("element {}: bool byte {} is neither 0 nor 1", i, u));
        const bool neg = is_signed && (u >> (8 * w - 1)) != 0;
        const std::uint64_t mag = neg ? (w == 8 ? ~u + 1 : (std::uint64_t{1} << 32) - u) : u;
        if (mag > (std::uint64_t{1} << 53))
          throw InputError(fmt::format("element {}: |value| {} exceeds 2^53 (not exact as a double)", i, mag));
        v[i] = neg ? -static_cast<double>(mag) : static_cast<double>(mag);
      }
      break;
    }
  }
}

NpyArray make_npy(std::span<const double> values, std::vector<std::size_t> shape, NpyDtype dtype,
                  const Format* bits_format) {
  std::size_t n = 1;
  for (std::size_t d : shape) n *= d;
  if (n != values.size())
    throw InputError(fmt::format("make_npy: shape holds {} elements but {} values were given", n, values.size()));
  NpyArray a{dtype, std::move(shape), std::vector<unsigned char>(n * npy_itemsize(dtype))};
  unsigned char* p = a.bytes.data();
  auto put = [&](std::size_t i, std::uint64_t bits, int w) {
    for (int b = 0; b < w; ++b) p[w * i + static_cast<std::size_t>(b)] = static_cast<unsigned char>(bits >> (8 * b));
  };
  auto encode_checked = [&](std::size_t i, const Format& f) {
    try {
      return encode(values[i], f);
    } catch (const std::domain_error& e) {
      throw InputError(fmt::format("make_npy: element {}: {}", i, e.what()));
    }
  };
  switch (dtype) {
    case NpyDtype::f64:
      std::memcpy(p, values.data(), n * 8);
      break;
    case NpyDtype::f32:
      for (std::size_t i = 0; i < n; ++i) {
        const float x = static_cast<float>(values[i]);
        if (static_cast<double>(x) != values[i] && !std::isnan(values[i]))
          throw InputError(fmt::format("make_npy: element {} = {} is not a float32 value", i, values[i]));
        std::memcpy(p + 4 * i, &x, 4);
      }
      break;
    case NpyDtype::f16: {
      const Format h = format_by_name("fp16");
      for (std::size_t i = 0; i < n; ++i) put(i, encode_checked(i, h), 2);
      break;
    }
    case NpyDtype::u8:
    case NpyDtype::u16: {
      const Format& f = bits_format_for(dtype, bits_format);
      const int w = static_cast<int>(npy_itemsize(dtype));
      for (std::size_t i = 0; i < n; ++i) put(i, encode_checked(i, f), w);
      break;
    }
    case NpyDtype::b1:
    case NpyDtype::i32:
    case NpyDtype::i64:
    case NpyDtype::u32:
    case NpyDtype::u64: {
      const int w = static_cast<int>(npy_itemsize(dtype));
      const bool is_signed = dtype == NpyDtype::i32 || dtype == NpyDtype::i64;
      const double hi = dtype == NpyDtype::b1 ? 1 : std::ldexp(1.0, 8 * w - (is_signed ? 1 : 0));
      const double lo = is_signed ? -hi : 0;
      for (std::size_t i = 0; i < n; ++i) {
        const double x = values[i];
        if (!(x == std::floor(x) && x >= lo && (dtype == NpyDtype::b1 ? x <= hi : x < hi)))
          throw InputError(fmt::format("make_npy: element {} = {} is not a {} value", i, x, npy_descr(dtype)));
        put(i, x < 0 ? static_cast<std::uint64_t>(static_cast<std::int64_t>(x)) : static_cast<std::uint64_t>(x), w);
      }
      break;
    }
  }
  return a;
}

std::string npy_shape_text(const std::vector<std::size_t>& s) {
  std::string r = "(";
  for (std::size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + (s.size() == 1 ? ",)" : ")");
}

}  // namespace pasa
