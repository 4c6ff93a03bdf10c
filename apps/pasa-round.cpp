// pasa-round: round numbers (command line, stdin, or a float32/float64 .npy) to a low-precision format and
// print them with their storage bits, or write them as .npy (float64 values and/or uint8/uint16 bits).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "common_options.hpp"
#include "library_names.hpp"
#include "pasa/core/error.hpp"
#include "pasa/core/memory.hpp"
#include "pasa/io/csv.hpp"
#include "pasa/io/npy.hpp"
#include "pasa/io/number_text.hpp"
#include "pasa/io/format_table.hpp"
#include "pasa/numeric/block_scale.hpp"
#include "pasa/numeric/round.hpp"

int main(int argc, char** argv) {
  CLI::App app{"Round numbers to a low-precision format (one rounding from double) and show the storage bits.\n"
               "Numbers come from the arguments, from --input (a float32/float64 .npy), or else from stdin."};
  std::vector<std::string> numbers;
  std::string format_name = "fp16", mode_name = "rne", overflow_name = "ieee", convention_name = "exact", input,
      output, bits_output;
  bool flush_input = false, flush_output = false, list_formats = false;
  std::uint64_t seed = 0;
  std::string block_name, scale_rule_name, scales_output;
  app.add_option("numbers", numbers, "numbers to round (decimal, hex float such as 0x1.8p-3, inf, nan)");
  app.add_option("-f,--format", format_name, "target format: " + pasa::known_format_names())
      ->capture_default_str()
      ->check(pasa_apps::library_name(pasa::format_by_name, pasa_apps::format_names()));
  app.add_option("-m,--mode", mode_name, "rounding mode: " + pasa::known_round_mode_names())
      ->capture_default_str()
      ->check(pasa_apps::library_name(pasa::round_mode_by_name, pasa_apps::listed_names(pasa::known_round_mode_names())));
  app.add_option("--overflow", overflow_name,
                 "overflow policy: ieee (inf, or NaN for fp8_e4m3fn and e8m0; fp6, fp4 and the integers have neither "
                 "and saturate) or saturate")
      ->capture_default_str()
      ->check(pasa_apps::library_name(pasa::overflow_by_name));
  app.add_option("--convention", convention_name,
                 "whose rules decide what libraries disagree on: exact (pasa: the nearest value of the format), "
                 "ml_dtypes or torch (their casts: e8m0's bottom code, fp6/fp4 NaN, e8m0's sign and zero); "
                 "docs/formats-and-rounding.md, \"Conventions\"")
      ->capture_default_str()
      ->check(pasa_apps::library_name(pasa::convention_by_name));
  app.add_flag("--flush-input", flush_input, "treat inputs below the smallest normal as zero (DAZ)");
  app.add_flag("--flush-output", flush_output, "flush results below the smallest normal to zero (FTZ)");
  app.add_option("--seed", seed, "seed of the random source for stochastic and hybrid rounding (modes sr, hr)")
      ->capture_default_str()
      ->check(pasa_apps::unsigned_integer());
  app.add_option("-i,--input", input, "read the numbers from this .npy (float32 or float64)");
  app.add_option("-o,--output", output, "write the rounded values to this .npy (float64, same shape)");
  app.add_option("--bits-output", bits_output,
                 "write the storage bit patterns to this .npy (uint8 for 8-bit formats, else uint16)");
  app.add_option("--block", block_name,
                 "block-quantise with this scheme instead of rounding (docs/block-scaling.md): " +
                     pasa::known_block_scheme_names() + "; blocks run along the last axis, rows along the one before")
      ->check(pasa_apps::library_name(pasa::block_scheme_by_name, pasa_apps::listed_names(pasa::known_block_scheme_names())));
  app.add_option("--scale-rule", scale_rule_name, "with --block: the scale rule (floor, ceil, even, rceil, round_up, nearest, "
                                                  "recip, sage) instead of the scheme's");
  app.add_option("--scales-output", scales_output, "with --block: write the scales to this .npy (float64, one per group)");
  std::string max_memory;
  pasa_apps::add_max_memory(app, max_memory);
  app.add_flag("--list-formats", list_formats, "print each built-in format's precision and range, and exit");
  pasa_apps::add_version(app, "pasa-round");  // (before the loop below, which asks which words are options)
  // Numbers that start with '-' ("-inf", "-nan", "-0x1p-3") would be read as short options ("-i nf"): every
  // number is passed after "--" (in its order), unless it is the value of an option. So is every other word
  // that is not an option or an option's value ("abc" in "1 2 3 abc"), so that parse_numbers names it by
  // its place among the numbers (number 4), not as the first positional CLI11 saw.
  std::vector<std::string> args(argv + 1, argv + argc), options, positional;
  bool after_dashes = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (after_dashes || a == "--") {
      if (a == "--" && !after_dashes) after_dashes = true;
      else positional.push_back(a);
      continue;
    }
    char* end = nullptr;
    const bool number = !a.empty() && (std::strtod(a.c_str(), &end), end == a.c_str() + a.size());
    const bool option_value = i > 0 && !options.empty() && options.back() == args[i - 1] && [&] {
      const CLI::Option* o = app.get_option_no_throw(args[i - 1]);
      return o != nullptr && o->get_expected_min() > 0 && args[i - 1].find('=') == std::string::npos;
    }();
    if ((number || a.empty() || a[0] != '-') && !option_value) positional.push_back(a);
    else options.push_back(a);
  }
  // options..., "--", numbers..., handed to CLI11 reversed (as its parse(vector) expects).
  std::vector<std::string> reordered(positional.rbegin(), positional.rend());
  reordered.push_back("--");
  reordered.insert(reordered.end(), options.rbegin(), options.rend());
  try {
    app.parse(std::move(reordered));  // (CLI11 takes a reversed vector)
  } catch (const CLI::ParseError& e) {
    return pasa_apps::parse_failure(app, e);
  }

  try {
    if (list_formats) {
      std::cout << pasa::format_table_text();
      return 0;
    }
    const pasa::Format f = pasa::format_by_name(format_name);
    const pasa::RoundOptions opt{pasa::round_mode_by_name(mode_name), pasa::overflow_by_name(overflow_name),
                                 flush_input, flush_output, pasa::convention_by_name(convention_name)};
    if (!input.empty() && !numbers.empty()) throw pasa::InputError("give numbers or --input, not both");
    const pasa::NpyDtype bits_dtype = f.storage_bits() <= 8 ? pasa::NpyDtype::u8 : pasa::NpyDtype::u16;
    if (!bits_output.empty() && f.storage_bits() > 16)
      throw pasa::InputError(fmt::format("--bits-output: format {} has {} storage bits; at most 16 fit a .npy "
                                         "uint16 (use --output for the values)", f.name, f.storage_bits()));

    pasa::check_output_paths({{"--output", output}, {"--bits-output", bits_output}}, {{"--input", input}});
    std::vector<double> xs;
    std::vector<std::size_t> shape;
    if (!input.empty()) {
      // Size first, from the header (core/memory.hpp): the file's bytes, the values and the rounded values
      // as doubles, and the output files' bytes.
      const pasa::NpyArray h = pasa::read_npy_header(input);
      const std::size_t n = pasa::npy_element_count(h);
      const std::size_t outputs = pasa::sat_add(output.empty() ? 0 : pasa::sat_mul(n, 8),
                                                bits_output.empty() ? 0 : pasa::sat_mul(n, bits_dtype == pasa::NpyDtype::u8 ? 1 : 2));
      pasa::check_memory(pasa::sat_add(pasa::sat_add(pasa::sat_mul(n, pasa::npy_itemsize(h.dtype)), pasa::sat_mul(n, 16)),
                                       outputs),
                         max_memory.empty() ? 0 : pasa::parse_byte_size(max_memory, "--max-memory"), input,
                         fmt::format("{} elements", n));
      const pasa::NpyArray a = pasa::read_npy(input);
      if (a.dtype != pasa::NpyDtype::f32 && a.dtype != pasa::NpyDtype::f64)
        throw pasa::InputError(fmt::format("{}: dtype {} not accepted; give float32 or float64 values", input,
                                           pasa::npy_descr(a.dtype)));
      xs = pasa::npy_values(a);
      shape = a.shape;
    } else {
      std::string text;
      for (const auto& n : numbers) text += n + ' ';
      const bool from_stdin = numbers.empty();
      if (from_stdin) text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
      std::vector<std::string> notes;
      xs = pasa::parse_numbers(text, from_stdin ? "stdin" : "command line", &notes);
      for (const auto& n : notes) std::fprintf(stderr, "pasa-round: warning: %s\n", n.c_str());
      shape = {xs.size()};
    }

    std::vector<double> rounded(xs.size());
    pasa::RandomBits rng(seed);
    if ((!scale_rule_name.empty() || !scales_output.empty()) && block_name.empty())
      throw pasa::InputError("--scale-rule and --scales-output go with --block SCHEME");
    if (!block_name.empty()) {
      // The scheme's element rounding unless -m is given; the shape's last axis is the block axis.
      pasa::BlockScheme s = pasa::block_scheme_by_name(block_name);
      if (!scale_rule_name.empty()) s.rule = pasa::scale_rule_by_name(scale_rule_name, "--scale-rule: ");
      if (app.count("--mode") > 0) s.round = opt.mode;
      if (!bits_output.empty()) throw pasa::InputError("--bits-output: with --block the values are elements x scales; use --output");
      pasa::validate_block_scheme(s, "--block " + block_name + ": ");
      const std::size_t C = shape.empty() ? 1 : shape.back(), R = shape.size() >= 2 ? shape[shape.size() - 2] : 1;
      const pasa::BlockQuantised q = pasa::block_quantise(xs.data(), xs.size() / std::max<std::size_t>(1, R * C), R, C, s, false, &rng);
      std::vector<std::pair<std::filesystem::path, std::string>> files;
      if (!output.empty()) files.emplace_back(output, pasa::npy_file_bytes(pasa::make_npy(q.values, shape, pasa::NpyDtype::f64)));
      if (!scales_output.empty())
        files.emplace_back(scales_output, pasa::npy_file_bytes(pasa::make_npy(q.scales, {q.scales.size()}, pasa::NpyDtype::f64)));
      pasa::write_files_atomic(files);
      if (output.empty() && scales_output.empty()) {
        const pasa::GroupLayout& g = s.a;
        std::string out;
        for (std::size_t i = 0; i < xs.size(); ++i) {
          const std::size_t rc = i % (R * C);
          const std::size_t gi = g.group == pasa::Grouping::tensor ? 0 : (i / (R * C)) * q.groups_per_matrix + pasa::group_of(g, R, C, rc / C, rc % C);
          out += fmt::format("{:<24} -> {:<24} element {:<12} scale {}\n", pasa::value_text(xs[i]), pasa::value_text(q.values[i]),
                             pasa::value_text(q.elements[i]), pasa::value_text(q.scales[gi]));
        }
        if (s.tensor_scale) out += fmt::format("tensor scale {}\n", pasa::value_text(q.tensor_scale));
        std::fputs(out.c_str(), stdout);
      }
      return 0;
    }
    pasa::round_span(xs, rounded, f, opt, &rng);

    // Both files or neither.
    std::vector<std::pair<std::filesystem::path, std::string>> files;
    if (!output.empty())
      files.emplace_back(output, pasa::npy_file_bytes(pasa::make_npy(rounded, shape, pasa::NpyDtype::f64)));
    if (!bits_output.empty())
      files.emplace_back(bits_output, pasa::npy_file_bytes(pasa::make_npy(rounded, shape, bits_dtype, &f)));
    pasa::write_files_atomic(files);
    if (output.empty() && bits_output.empty()) {
      std::string out;
      for (std::size_t i = 0; i < xs.size(); ++i) {
        // A NaN kept for a format without NaN (fp6, fp4, integers: the exact convention) has no pattern.
        const bool encodable = !std::isnan(rounded[i]) || f.has_nan();
        out += fmt::format("{:<24} -> {:<24} {}\n", pasa::value_text(xs[i]), pasa::value_text(rounded[i]),
                           encodable ? pasa::bits_text(pasa::encode(rounded[i], f), f) : "(no pattern: no NaN)");
      }
      std::fputs(out.c_str(), stdout);
    }
    return 0;
  } catch (...) {
    return pasa::report_error("pasa-round");
  }
}
