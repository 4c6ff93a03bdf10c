// Small CSV layer for result tables (RFC 4180 quoting) and the readers of the sweep's files. Writing (rows
// appended one by one, whole files replaced atomically) is output_file.hpp's, included here.
#pragma once

#include <cstdio>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "pasa/io/output_file.hpp"

namespace pasa {

using CsvRow = std::vector<std::string>;

// A field quoted only when it must be (comma, quote, CR or LF inside); quotes doubled.
std::string csv_field(std::string_view s);
// Fields joined by commas, terminated by '\n'.
std::string csv_line(const CsvRow& row);
// Inverse of csv_line for one line without its '\n'. Throws InputError on an unterminated quote.
CsvRow parse_csv_line(std::string_view line);

// A number as CSV text: %.17g (round-trips every double exactly), "nan", "inf", "-inf".
std::string csv_number(double x);
double parse_csv_number(std::string_view s);  // inverse; throws InputError naming the text

// The complete lines of a text file: a last line without its '\n' is torn (the writer was interrupted
// mid-row) and is reported in `torn` instead of `lines`.
struct CsvFileLines {
  std::vector<std::string> lines;
  bool torn = false;
};
CsvFileLines read_complete_lines(const std::filesystem::path&);

std::string read_file(const std::filesystem::path&);

}  // namespace pasa
