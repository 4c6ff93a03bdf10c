#include "pasa/io/csv.hpp"
#include "pasa/io/input_file.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "pasa/core/error.hpp"

namespace pasa {

std::string csv_field(std::string_view s) {
  if (s.find_first_of(",\"\r\n") == std::string_view::npos) return std::string(s);
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
  return out;
}

std::string csv_line(const CsvRow& row) {
  std::string out;
  for (std::size_t i = 0; i < row.size(); ++i) {
    if (i) out += ',';
    out += csv_field(row[i]);
  }
  out += '\n';
  return out;
}

CsvRow parse_csv_line(std::string_view line) {
  CsvRow row;
  std::string field;
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"') {
        if (i + 1 < line.size() && line[i + 1] == '"') {
          field += '"';
          ++i;
        } else {
          quoted = false;
        }
      } else {
        field += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      row.push_back(std::move(field));
      field.clear();
    } else {
      field += c;
    }
  }
  if (quoted) throw InputError("CSV line has an unterminated quoted field: " + std::string(line.substr(0, 80)));
  row.push_back(std::move(field));
  return row;
}

std::string csv_number(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", x);
  return buf;
}

double parse_csv_number(std::string_view s) {
  const std::string text(s);
  char* end = nullptr;
  errno = 0;
  const double x = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size())
    throw InputError("CSV field '" + text + "' is not a number");
  return x;
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in = open_input_file(path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

CsvFileLines read_complete_lines(const std::filesystem::path& path) {
  const std::string text = read_file(path);
  CsvFileLines out;
  std::size_t start = 0;
  while (start < text.size()) {
    const std::size_t nl = text.find('\n', start);
    if (nl == std::string::npos) {
      out.torn = true;  // interrupted mid-row: the writer always ends a row with '\n'
      break;
    }
    out.lines.push_back(text.substr(start, nl - start));
    start = nl + 1;
  }
  return out;
}

}  // namespace pasa
