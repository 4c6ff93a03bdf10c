// Command-line checks shared by the apps: an option whose value is a library name (a format, a rounding
// mode, a preset) is checked while CLI11 parses, so a wrong name is reported with the option that holds
// it ("--format: unknown format "fp17"; known formats: ...") through the library's own InputError message.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "pasa/core/error.hpp"

namespace pasa_apps {

// ->check(library_name(pasa::format_by_name)): the value must be a name `by_name` accepts.
template <class ByName>
CLI::Validator library_name(ByName by_name) {
  return CLI::Validator(
      [by_name](std::string& s) -> std::string {
        try {
          (void)by_name(s);
          return {};
        } catch (const pasa::InputError& e) {
          return e.what();
        }
      },
      "");
}

}  // namespace pasa_apps
