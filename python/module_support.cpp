// The shared helpers of the module's parts (module_support.hpp says what each is for).
#include "module_support.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "pasa/core/parallel.hpp"
#include "pasa/io/algorithm_json.hpp"

namespace pasa_py {

py::module_ numpy() { return py::module_::import("numpy"); }

std::string type_name(const py::handle& o) { return py::str(py::type::handle_of(o).attr("__name__")).cast<std::string>(); }

std::uint64_t int_arg(const char* name, const py::handle& o, std::uint64_t lo, std::uint64_t hi) {
  if (py::isinstance<py::bool_>(o) || !(py::isinstance<py::int_>(o) || py::isinstance(o, numpy().attr("integer"))))
    throw py::type_error(fmt::format("{}: expected an integer, got {}", name, type_name(o)));
  const py::int_ i(py::reinterpret_borrow<py::object>(o));
  if (py::int_(lo) > i || i > py::int_(hi))
    throw InputError(fmt::format("{}: {} is not an integer in [{}, {}]", name, py::repr(i).cast<std::string>(), lo, hi));
  return i.cast<std::uint64_t>();
}
std::optional<std::uint64_t> opt_int_arg(const char* name, const py::handle& o, std::uint64_t lo, std::uint64_t hi) {
  if (o.is_none()) return std::nullopt;
  return int_arg(name, o, lo, hi);
}
std::optional<std::size_t> opt_size_arg(const char* name, const py::handle& o) {
  const auto v = opt_int_arg(name, o);
  return v ? std::optional<std::size_t>(static_cast<std::size_t>(*v)) : std::nullopt;
}

double scale_value(const std::optional<double>& scale) {
  if (!scale) return 0;
  if (!std::isfinite(*scale) || *scale <= 0)
    throw InputError(fmt::format("scale: must be a finite number > 0 (got {}); omit it (None) for 1/sqrt(D)", *scale));
  return *scale;
}

// The most threads an argument accepts (the programs' --threads: apps/library_names.hpp).
constexpr int kMaxThreads = 4096;
int threads_arg(const py::handle& o) {
  if (o.is_none()) return pasa::default_threads();
  return static_cast<int>(int_arg("threads", o, 1, kMaxThreads));
}

namespace {

// `open` holds the containers being walked (the path from the root), so that a dict or list holding itself
// is refused as json.dumps refuses it, and the walk stops at the JSON readers' kMaxJsonDepth: the Python
// object is walked before parse_json_text could check anything, and an unbounded recursion here overflows
// the C stack (a dict holding itself crashed the interpreter).
json to_json_value(const py::handle& o, const std::string& where, std::vector<const PyObject*>& open) {
  if (o.is_none()) return nullptr;
  if (py::isinstance<py::bool_>(o) || py::isinstance(o, numpy().attr("bool_"))) return o.cast<bool>();
  if (py::isinstance<py::int_>(o) || py::isinstance(o, numpy().attr("integer"))) {
    const py::int_ i(py::reinterpret_borrow<py::object>(o));
    if (py::int_(0) > i) {
      if (py::int_(std::numeric_limits<std::int64_t>::min()) > i)
        throw InputError(fmt::format("{}: integer {} is below -2^63", where, py::str(o).cast<std::string>()));
      return i.cast<std::int64_t>();
    }
    if (i > py::int_(std::numeric_limits<std::uint64_t>::max()))
      throw InputError(fmt::format("{}: integer {} is above 2^64 - 1", where, py::str(o).cast<std::string>()));
    return i.cast<std::uint64_t>();
  }
  if (py::isinstance<py::float_>(o) || py::isinstance(o, numpy().attr("floating"))) return o.cast<double>();
  if (py::isinstance<py::str>(o)) return o.cast<std::string>();
  const bool is_dict = py::isinstance<py::dict>(o);
  const bool is_seq = py::isinstance<py::list>(o) || py::isinstance<py::tuple>(o);
  if (is_dict || is_seq) {
    if (std::find(open.begin(), open.end(), o.ptr()) != open.end())
      throw InputError(fmt::format("{}: circular reference (the {} contains itself)", where,
                                   is_dict ? "dict" : "list"));
    if (open.size() >= pasa::kMaxJsonDepth)
      throw InputError(fmt::format("{}...: nested more than {} levels deep", where.substr(0, 60), pasa::kMaxJsonDepth));
    open.push_back(o.ptr());
    json j = is_dict ? json::object() : json::array();
    if (is_dict) {
      for (const auto& [k, v] : o.cast<py::dict>()) {
        if (!py::isinstance<py::str>(k))
          throw InputError(fmt::format("{}: key {} is not a string", where, py::repr(k).cast<std::string>()));
        const std::string key = k.cast<std::string>();
        j[key] = to_json_value(v, where + "/" + key, open);
      }
    } else {
      std::size_t i = 0;
      for (const auto& v : o) j.push_back(to_json_value(v, fmt::format("{}/{}", where, i++), open));
    }
    open.pop_back();
    return j;
  }
  if (py::isinstance<py::array>(o)) {
    if (py::cast<py::array>(o).ndim() > static_cast<py::ssize_t>(pasa::kMaxJsonDepth))
      throw InputError(fmt::format("{}: nested more than {} levels deep", where, pasa::kMaxJsonDepth));
    return to_json_value(o.attr("tolist")(), where, open);
  }
  throw InputError(fmt::format("{}: {} cannot be written as JSON", where,
                               py::str(py::type::handle_of(o).attr("__name__")).cast<std::string>()));
}

}  // namespace

json to_json_value(const py::handle& o, const std::string& where) {
  std::vector<const PyObject*> open;
  return to_json_value(o, where, open);
}

json json_argument(const py::handle& o, const std::string& what) {
  if (py::isinstance<py::str>(o)) {
    const std::string text = o.cast<std::string>();
    try {
      return json::parse(text);
    } catch (const json::parse_error& e) {
      throw InputError(fmt::format("{}: invalid JSON: {}", what, e.what()));
    }
  }
  if (!py::isinstance<py::dict>(o))
    throw InputError(fmt::format("{}: expected a dict or its JSON text, got {}", what,
                                 py::str(py::type::handle_of(o).attr("__name__")).cast<std::string>()));
  return to_json_value(o, what + ":");
}

json alloc_argument(const py::handle& o) {
  if (py::isinstance<py::str>(o)) {
    const std::string s = o.cast<std::string>();
    const auto first = s.find_first_not_of(" \t\r\n");
    if (first == std::string::npos || s[first] != '{') return s;  // a preset name
  }
  return json_argument(o, "alloc");
}

py::object to_python(const json& j) {
  switch (j.type()) {
    case json::value_t::null: return py::none();
    case json::value_t::boolean: return py::bool_(j.get<bool>());
    case json::value_t::number_integer: return py::int_(j.get<std::int64_t>());
    case json::value_t::number_unsigned: return py::int_(j.get<std::uint64_t>());
    case json::value_t::number_float: return py::float_(j.get<double>());
    case json::value_t::string: return py::str(j.get<std::string>());
    case json::value_t::array: {
      py::list l;
      for (const auto& v : j) l.append(to_python(v));
      return l;
    }
    case json::value_t::object: {
      py::dict d;
      for (const auto& [k, v] : j.items()) d[py::str(k)] = to_python(v);
      return d;
    }
    default: throw std::logic_error("to_python: unexpected JSON value");
  }
}

py::dict numbers_as_floats(const json& j) {
  py::dict d;
  for (const auto& [k, v] : j.items()) {
    if (v.is_string() && (v == "nan" || v == "inf" || v == "-inf"))
      d[py::str(k)] = py::float_(v == "nan" ? NAN : v == "inf" ? INFINITY : -INFINITY);
    else
      d[py::str(k)] = to_python(v);
  }
  return d;
}

std::string text(const py::handle& h) { return py::str(h).cast<std::string>(); }
std::string dtype_name(const py::array& a) { return text(a.dtype()); }

py::array as_array(const py::handle& o) { return numpy().attr("asarray")(o); }

py::array c_native(const py::array& a) {
  return numpy().attr("ascontiguousarray")(a, py::arg("dtype") = a.dtype().attr("newbyteorder")("="));
}

const char* ml_dtypes_format(const std::string& dtype_name) {
  // The registry's dtypes that are not numpy's own (bfloat16, float8_*, float6_*, float4_*): ml_dtypes'.
  if (dtype_name.empty() || dtype_name == "float16" || dtype_name == "float32" || dtype_name == "float64") return nullptr;
  for (const pasa::FormatEntry& e : pasa::kBuiltinFormats)
    if (e.dtype == dtype_name) return e.name.data();  // (a string literal: null-terminated)
  return nullptr;
}

namespace {

// The trailing `rank` dimensions of dims.
std::vector<py::ssize_t> tail(std::vector<std::size_t> dims, std::size_t rank) {
  std::vector<py::ssize_t> s;
  for (std::size_t i = dims.size() - rank; i < dims.size(); ++i) s.push_back(static_cast<py::ssize_t>(dims[i]));
  return s;
}

}  // namespace

py::array_t<double> tensor_out(pasa::Tensor&& t, std::size_t rank) {
  const pasa::Shape s = t.shape;
  return to_numpy(std::move(t.data), tail({s.B, s.N, s.S, s.D}, rank));
}
py::array_t<double> lse_out(std::vector<double>&& lse, const pasa::Shape& s, std::size_t rank) {
  return to_numpy(std::move(lse), tail({s.B, s.N, s.S}, rank - 1));
}

pasa::AlgorithmSpec algorithm_spec(const char* function, const py::object& spec, const std::optional<std::string>& algorithm,
                                   const py::object& alloc, const std::optional<double>& beta,
                                   const std::optional<std::size_t>& s1, const std::optional<std::size_t>& s2,
                                   const std::optional<std::uint64_t>& seed, const char* default_algorithm,
                                   const char* default_alloc) {
  if (beta && !std::isfinite(*beta))  // (JSON has no NaN: the library would be told "null")
    throw InputError(fmt::format("beta: must be a finite number, got {}", *beta));
  if (!spec.is_none()) {
    if (algorithm || !alloc.is_none() || beta || s1 || s2 || seed)
      throw InputError("spec: give spec or the separate arguments (algorithm, alloc, beta, s1, s2, seed), not both");
    return pasa::algorithm_from_json(json_argument(spec, "spec"), "spec:");
  }
  json j = {{"name", algorithm.value_or(default_algorithm)},
            {"alloc", alloc.is_none() ? json(default_alloc) : alloc_argument(alloc)},
            {"s1", s1.value_or(128)},
            {"s2", s2.value_or(128)}};
  // As pasa-attn: PASA options only for pasa, or when β is given (then the library names the mistake).
  const pasa::AlgorithmInfo* info = pasa::find_algorithm(j["name"].get<std::string>());
  if ((info && info->pasa_options) || beta) j["pasa"] = {{"beta", beta.value_or(pasa::PasaOptions{}.beta)}};
  if (seed) j["seed"] = *seed;
  return pasa::algorithm_from_json(j, std::string(function) + ":");
}

pasa::GoldenOptions golden_options(const py::object& precision_bits, bool fast, const py::object& threads) {
  pasa::GoldenOptions opt;
  opt.precision_bits = static_cast<int>(int_arg("precision_bits", precision_bits, 106, 100000));
  opt.fast = fast;
  opt.threads = threads_arg(threads);
  return opt;
}

py::dict golden_dict(pasa::Golden&& g, const pasa::Shape& shape, std::size_t rank) {
  py::dict d;
  d["out"] = tensor_out(std::move(g.o), rank);
  d["lse"] = lse_out(std::move(g.lse), shape, rank);
  d["guaranteed_bits"] = g.guaranteed_bits;
  d["error_bound"] = g.error_bound;
  d["used_mpfr"] = g.used_mpfr;
  return d;
}

}  // namespace pasa_py
