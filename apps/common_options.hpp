// The options the programs share, declared once: the same name, the same help text and the same checks in
// pasa-attn, pasa-attribute and pasa-sweep (and the other programs where they take them). A program adds
// its own options around these. docs/extending.md says where a new shared option goes.
#pragma once

#include <cstddef>
#include <iostream>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "completion.hpp"
#include "library_names.hpp"
#include "pasa/attention/algorithm.hpp"
#include "pasa/attention/kernel_recipe.hpp"
#include "pasa/core/error.hpp"
#include "pasa/core/memory.hpp"
#include "pasa/core/parallel.hpp"
#include "pasa/io/algorithm_json.hpp"
#include "pasa/io/input_file.hpp"
#include "pasa/io/json_check.hpp"

namespace pasa_apps {

// --version: "<program> <version>", the CMake project version (as pasa.__version__); with it, since every
// program calls this, the hidden --completion bash (completion.hpp).
inline void add_version(CLI::App& app, const std::string& program) {
  app.set_version_flag("--version", program + " " PASA_VERSION);
  add_completion(app, program);
}

// --threads: worker threads, checked by thread_count(). Results never depend on it.
inline CLI::Option* add_threads(CLI::App& app, int& threads,
                                const std::string& help = "worker threads (results do not depend on it)") {
  return app.add_option("--threads", threads, help)->capture_default_str()->check(thread_count());
}

// --max-memory: the size-first check's limit (core/memory.hpp); max_memory_bytes() reads it.
inline CLI::Option* add_max_memory(CLI::App& app, std::string& max_memory) {
  return app.add_option("--max-memory", max_memory, "memory the run may use, e.g. 64G (default: MemAvailable)");
}
// 0 (no option: the available memory) or the limit given.
inline std::size_t max_memory_bytes(const std::string& max_memory) {
  return max_memory.empty() ? 0 : pasa::parse_byte_size(max_memory, "--max-memory");
}

// A JSON argument (a config, a problem, an algorithm): the file, or "-": standard input, read whole (at most
// kMaxJsonFileBytes, as a file) and named "stdin" in messages (json_source). Standard input can be read
// once: a second "-" in one command is refused, naming the option that read it.
inline std::string json_source(const std::string& path) { return path == "-" ? "stdin" : path; }
inline nlohmann::json read_json_arg(const std::string& path, const std::string& option) {
  if (path != "-") return pasa::read_json_file(path);
  static std::string read_by;
  if (!read_by.empty())
    throw pasa::InputError(option + " -: standard input is " + read_by + "'s; give one of them a file");
  read_by = option;
  std::string text;
  char buf[1 << 16];
  while (std::cin.read(buf, sizeof buf) || std::cin.gcount() > 0) {
    text.append(buf, static_cast<std::size_t>(std::cin.gcount()));
    if (text.size() > pasa::kMaxJsonFileBytes)
      throw pasa::InputError(fmt::format("{} -: standard input holds more than {} bytes; a JSON input is at most that",
                                         option, pasa::kMaxJsonFileBytes));
  }
  return pasa::parse_json_text(text, "stdin");
}

// --problem: a problem JSON file (pasa-attn and pasa-attribute read the same form).
inline CLI::Option* add_problem(CLI::App& app, std::string& path) {
  return app.add_option("--problem", path, "problem JSON file, - for stdin (shape, format, generators, or \"kind\": \"paged\"; docs/inputs-golden-metrics.md)");
}

// One algorithm: --algorithm, --alloc, --s1, --s2, --beta, or all of it from --algo-json (--spec: the same
// option, pasa-attribute's first name). The names listed in the help come from the library's registries,
// so a new algorithm or preset appears there by itself.
struct AlgorithmOptions {
  std::string algorithm, alloc, json_file, kernel;
  std::size_t s1 = 128, s2 = 128;
  double beta = pasa::PasaOptions{}.beta;

  void add(CLI::App& app, std::string default_algorithm, std::string default_alloc) {
    algorithm = std::move(default_algorithm);
    alloc = std::move(default_alloc);
    CLI::Option* o[] = {
        app.add_option("--algorithm", algorithm,
                       fmt::format("algorithm: {}", fmt::join(pasa::algorithm_names(), ", ")))
            ->capture_default_str()
            ->check(completes_to(pasa::algorithm_names())),
        app.add_option("--alloc", alloc,
                       fmt::format("precision allocation preset: {}", fmt::join(pasa::allocation_preset_names(), ", ")))
            ->capture_default_str()
            ->check(library_name(pasa::allocation_preset, pasa::allocation_preset_names())),
        app.add_option("--s1", s1, "query block size (clamped to Sq)")->capture_default_str()->check(unsigned_integer(1)),
        app.add_option("--s2", s2, "key/value block size (clamped to Skv)")
            ->capture_default_str()
            ->check(unsigned_integer(1)),
        app.add_option("--beta", beta, "PASA shifting coefficient β (algorithm pasa only)")
            ->capture_default_str()
            ->check(finite_number())};
    CLI::Option* file = app.add_option("--algo-json,--spec", json_file,
                                       "algorithm JSON file, - for stdin (name, alloc, s1, s2, options; docs/algorithms.md) instead "
                                       "of the options above");
    for (CLI::Option* x : o) x->excludes(file);
    CLI::Option* k = app.add_option("--kernel", kernel,
                                    fmt::format("a kernel recipe ({}; --list-kernels) or its JSON {{\"recipe\": ..., "
                                                "<schedule fields>}}: the GPU kernel's numerics instead of the options "
                                                "above",
                                                fmt::join(pasa::kernel_recipe_names(), ", ")))
                        ->check(completes_to(pasa::kernel_recipe_names()));
    k->excludes(file);
    for (CLI::Option* x : o) x->excludes(k);
  }

  // The algorithm, through the algorithm JSON reader either way, so that every option is checked as a
  // config's would be ("beta" is written for pasa, or where --beta was given, so that a misplaced one is
  // refused rather than ignored).
  pasa::AlgorithmSpec spec(const CLI::App& app) const {
    if (!json_file.empty())
      return pasa::algorithm_from_json(read_json_arg(json_file, "--algo-json"), json_source(json_file) + ":");
    if (!kernel.empty()) {
      const auto first = kernel.find_first_not_of(" \t\r\n");
      const nlohmann::json k = first != std::string::npos && kernel[first] == '{'
                                   ? pasa::parse_json_text(kernel, "--kernel")
                                   : nlohmann::json(kernel);
      return pasa::algorithm_from_json({{"kernel", k}}, "--kernel:");
    }
    nlohmann::json j = {{"name", algorithm}, {"alloc", alloc}, {"s1", s1}, {"s2", s2}};
    const pasa::AlgorithmInfo* info = pasa::find_algorithm(algorithm);
    if ((info && info->pasa_options) || app.count("--beta") > 0) j["pasa"] = {{"beta", beta}};
    return pasa::algorithm_from_json(j, "command line");
  }

  // Where the algorithm came from, in front of validate_case's messages (which start with a JSON pointer).
  std::string source() const { return json_file.empty() ? "command line: " : json_source(json_file) + ":"; }
};

// validate_case of the problem (a ProblemSpec or a CaseLayout) against the algorithm, its message prefixed
// with where the algorithm came from.
template <class Problem>
void validate_case_from(const Problem& problem, const pasa::AlgorithmSpec& a, const std::string& source) {
  try {
    pasa::validate_case(problem, a);
  } catch (const pasa::InputError& e) {
    throw pasa::InputError(source + e.what());
  }
}

}  // namespace pasa_apps
