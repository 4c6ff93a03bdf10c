// results_flat.csv (sweep_parts.hpp flat_table_text): the results table for tools that split lines at commas
// (awk -F, cut, gnuplot's `set datafile separator ","`, a spreadsheet without a CSV parser): every cell
// unquoted, the problem_json and algorithm_json columns replaced by one column per leaf of the JSON.
#include <algorithm>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "pasa/study/detail/sweep_parts.hpp"

namespace pasa::detail {

namespace {

using nlohmann::json;

// A text cell that needs no quoting: ',' -> ';', '"' -> '\'', line breaks -> ' ' (results.csv keeps the text
// as it is: a label such as "PASA-FP16, fp32 sum/o/div" is "PASA-FP16; fp32 sum/o/div" here).
std::string plain(std::string s) {
  for (char& c : s) {
    if (c == ',') c = ';';
    else if (c == '"') c = '\'';
    else if (c == '\n' || c == '\r') c = ' ';
  }
  return s;
}

// The leaves of a JSON value as (path, text): objects by key ("shape.Sq"), arrays by index ("kv_len.0");
// numbers as the JSON cell spells them (so they read back to the same double), strings unquoted, true/false,
// null as an empty cell.
void leaves(const json& j, const std::string& path, std::vector<std::pair<std::string, std::string>>& out) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) leaves(it.value(), path + "." + it.key(), out);
  } else if (j.is_array()) {
    for (std::size_t i = 0; i < j.size(); ++i) leaves(j[i], path + "." + std::to_string(i), out);
  } else if (j.is_string()) {
    out.emplace_back(path, plain(j.get<std::string>()));
  } else {
    out.emplace_back(path, j.is_null() ? std::string() : j.dump());
  }
}

std::string line(const std::vector<std::string>& cells) {
  std::string s;
  for (std::size_t i = 0; i < cells.size(); ++i) s += (i ? "," : "") + cells[i];
  return s + "\n";
}

}  // namespace

std::string flat_table_text(const CsvRow& header, std::vector<CsvRow> rows) {
  std::sort(rows.begin(), rows.end(),
            [](const CsvRow& x, const CsvRow& y) { return std::stoull(x[0]) < std::stoull(y[0]); });
  std::vector<std::size_t> json_cols;
  for (std::size_t c = 0; c < header.size(); ++c)
    if (header[c] == "problem_json" || header[c] == "algorithm_json") json_cols.push_back(c);
  // The leaf columns in first-seen order (case order), those of one JSON column together; a row without a
  // leaf (another algorithm's options) has an empty cell there.
  std::vector<std::vector<std::string>> names(json_cols.size());
  std::vector<std::map<std::string, std::size_t>> index(json_cols.size());
  std::vector<std::vector<std::vector<std::pair<std::string, std::string>>>> values(rows.size());
  for (std::size_t r = 0; r < rows.size(); ++r) {
    values[r].resize(json_cols.size());
    for (std::size_t k = 0; k < json_cols.size(); ++k) {
      const std::string prefix = header[json_cols[k]].substr(0, header[json_cols[k]].size() - 5);  // "problem"
      leaves(json::parse(rows[r][json_cols[k]]), prefix, values[r][k]);
      for (const auto& [name, text] : values[r][k])
        if (index[k].emplace(name, names[k].size()).second) names[k].push_back(name);
    }
  }
  auto flat_row = [&](const CsvRow& row, const std::vector<std::vector<std::pair<std::string, std::string>>>* v) {
    std::vector<std::string> cells;
    for (std::size_t c = 0, k = 0; c < row.size(); ++c) {
      if (k < json_cols.size() && c == json_cols[k]) {
        std::vector<std::string> leaf(names[k].size());
        if (v)
          for (const auto& [name, text] : (*v)[k]) leaf[index[k].at(name)] = text;
        else leaf = names[k];
        cells.insert(cells.end(), leaf.begin(), leaf.end());
        ++k;
      } else {
        cells.push_back(plain(row[c]));
      }
    }
    return line(cells);
  };
  std::string text = flat_row(header, nullptr);
  for (std::size_t r = 0; r < rows.size(); ++r) text += flat_row(rows[r], &values[r]);
  return text;
}

std::string flat_csv_name(const std::string& csv_name) {
  const std::filesystem::path p(csv_name);
  return p.stem().string() + "_flat" + p.extension().string();
}

}  // namespace pasa::detail
