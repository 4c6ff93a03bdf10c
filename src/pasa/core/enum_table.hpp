// One home per enumeration that users name: an enum class and ONE table of {value, name, help} entries in
// enum order (CPFloat's one enum + one switch, ml_dtypes' single registration list). Every reader and
// writer of the names — JSON parsing and printing, error messages listing the known names, --help text —
// goes through the table, so a new enumerator is one enum line and one table line; the static_asserts
// beside each table (enum_table_in_order, and the count against the last enumerator) refuse a table that
// is out of order or short.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pasa {

template <class E>
struct EnumEntry {
  E value;
  std::string_view name;
  std::string_view help;  // one line for docs and --help; may be empty
};

template <class E, std::size_t N>
using EnumTable = std::array<EnumEntry<E>, N>;

// Entry i names enumerator i (enumerators numbered 0, 1, ... in declaration order), no name twice.
template <class E, std::size_t N>
constexpr bool enum_table_in_order(const EnumTable<E, N>& t) {
  for (std::size_t i = 0; i < N; ++i) {
    if (static_cast<std::size_t>(t[i].value) != i || t[i].name.empty()) return false;
    for (std::size_t j = 0; j < i; ++j)
      if (t[j].name == t[i].name) return false;
  }
  return true;
}

template <class E, std::size_t N>
constexpr std::string_view enum_name(const EnumTable<E, N>& t, E e) {
  const auto i = static_cast<std::size_t>(e);
  return i < N ? t[i].name : std::string_view("?");
}

template <class E, std::size_t N>
constexpr std::optional<E> enum_by_name(const EnumTable<E, N>& t, std::string_view name) {
  for (const auto& entry : t)
    if (entry.name == name) return entry.value;
  return std::nullopt;
}

template <class E, std::size_t N>
std::vector<std::string> enum_names(const EnumTable<E, N>& t) {
  std::vector<std::string> v;
  for (const auto& entry : t) v.emplace_back(entry.name);
  return v;
}

// "a, b, c": the list that error messages and --help show.
template <class E, std::size_t N>
std::string enum_names_joined(const EnumTable<E, N>& t, std::string_view sep = ", ") {
  std::string s;
  for (const auto& entry : t) {
    if (!s.empty()) s += sep;
    s += entry.name;
  }
  return s;
}

}  // namespace pasa
