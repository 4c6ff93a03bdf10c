// The extension module pasa._pasa (python/pasa/ wraps it as the package pasa): the library for numpy users, through pybind11. Every function converts
// its arguments (numpy arrays, dicts, names), calls the same library functions as the command-line programs
// (apps/) and converts the result back; no numerics live here. Errors: the library's InputError (a bad name,
// value, shape, JSON key) becomes ValueError with the library's message, as the programs print it after
// "error: "; any other C++ exception becomes RuntimeError (the programs' "internal error"). The GIL is released
// while the library runs, so other Python threads go on meanwhile.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cfloat>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "pasa/analysis/attribution.hpp"
#include "pasa/analysis/beta_solver.hpp"
#include "pasa/attention/algorithm.hpp"
#include "pasa/attention/allocation.hpp"
#include "pasa/attention/unified.hpp"
#include "pasa/core/cancel.hpp"
#include "pasa/attention/gemm.hpp"
#include "pasa/core/error.hpp"
#include "pasa/core/memory.hpp"
#include "pasa/core/parallel.hpp"
#include "pasa/exact/baseline.hpp"
#include "pasa/exact/golden.hpp"
#include "pasa/exact/metrics.hpp"
#include "pasa/inputs/generators.hpp"
#include "pasa/io/algorithm_json.hpp"
#include "pasa/io/allocation_json.hpp"
#include "pasa/io/analysis_report.hpp"
#include "pasa/io/format_table.hpp"
#include "pasa/io/json_check.hpp"
#include "pasa/io/kernel_json.hpp"
#include "pasa/io/metrics_json.hpp"
#include "pasa/io/npy.hpp"
#include "pasa/io/problem_json.hpp"
#include "pasa/io/tensor_io.hpp"
#include "pasa/io/user_tensors.hpp"
#include "pasa/study/range_stats.hpp"
#include "pasa/numeric/format.hpp"
#include "pasa/numeric/gpu_math.hpp"
#include "pasa/numeric/round.hpp"
#include "pasa/study/hardware_compare.hpp"
#include "pasa/study/kernel_bridge.hpp"
#include "pasa/study/sweep.hpp"
#include "pasa/study/sweep_config.hpp"

namespace py = pybind11;
using nlohmann::json;
using pasa::InputError;

namespace {

py::module_ numpy() { return py::module_::import("numpy"); }

std::string type_name(const py::handle& o) { return py::str(py::type::handle_of(o).attr("__name__")).cast<std::string>(); }

// ---------------------------------------------------------------------------------------------------------
// Ctrl-C during a long call. Python runs its SIGINT handler (KeyboardInterrupt) only on the main thread and
// only when PyErr_CheckSignals runs there with the GIL; the library computes without it. So f() (library work
// on C++ values, no Python objects) runs on a worker thread while the calling thread waits without the GIL
// and polls for signals every 50 ms; on a signal it asks the library to stop (core/cancel.hpp: the golden
// checks between rows and keys, sweeps between cases), waits for the worker to unwind (what the call leaves
// is what an error leaves: a sweep's .partial rows stay for resume) and raises the signal's exception.
template <class F>
auto interruptible(F&& f) -> decltype(f()) {
  using R = decltype(f());
  std::optional<R> result;
  std::exception_ptr error;
  std::mutex m;
  std::condition_variable cv;
  bool finished = false, interrupted = false;
  {
    py::gil_scoped_release nogil;
    std::thread worker([&] {
      try {
        result.emplace(f());
      } catch (...) {
        error = std::current_exception();
      }
      std::lock_guard<std::mutex> lock(m);
      finished = true;
      cv.notify_all();
    });
    std::unique_lock<std::mutex> lock(m);
    while (!cv.wait_for(lock, std::chrono::milliseconds(50), [&] { return finished; })) {
      if (interrupted) continue;
      lock.unlock();
      {
        py::gil_scoped_acquire gil;
        interrupted = PyErr_CheckSignals() != 0;  // the handler's exception is now set
      }
      if (interrupted) pasa::request_cancel();
      lock.lock();
    }
    lock.unlock();
    worker.join();
  }
  if (interrupted) {
    pasa::clear_cancel();
    throw py::error_already_set();
  }
  if (error) {
    try {
      std::rethrow_exception(error);
    } catch (const pasa::Cancelled&) {  // another thread's Ctrl-C stopped this call too
      PyErr_SetNone(PyExc_KeyboardInterrupt);
      throw py::error_already_set();
    }
  }
  return std::move(*result);
}

// An integer argument (a Python int or numpy integer, not a bool) in [lo, hi]: TypeError or ValueError naming
// the argument (pybind11's own conversion answers a negative value with a list of signatures).
std::uint64_t int_arg(const char* name, const py::handle& o, std::uint64_t lo = 0, std::uint64_t hi = UINT64_MAX) {
  if (py::isinstance<py::bool_>(o) || !(py::isinstance<py::int_>(o) || py::isinstance(o, numpy().attr("integer"))))
    throw py::type_error(fmt::format("{}: expected an integer, got {}", name, type_name(o)));
  const py::int_ i(py::reinterpret_borrow<py::object>(o));
  if (py::int_(lo) > i || i > py::int_(hi))
    throw InputError(fmt::format("{}: {} is not an integer in [{}, {}]", name, py::repr(i).cast<std::string>(), lo, hi));
  return i.cast<std::uint64_t>();
}
std::optional<std::uint64_t> opt_int_arg(const char* name, const py::handle& o, std::uint64_t lo = 0,
                                         std::uint64_t hi = UINT64_MAX) {
  if (o.is_none()) return std::nullopt;
  return int_arg(name, o, lo, hi);
}
std::optional<std::size_t> opt_size_arg(const char* name, const py::handle& o) {
  const auto v = opt_int_arg(name, o);
  return v ? std::optional<std::size_t>(static_cast<std::size_t>(*v)) : std::nullopt;
}

// A scale argument: None is the default 1/sqrt(D) (the library's 0); a given scale is finite and > 0, so
// that scale=0 is not silently the default.
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

// A library name passed as argument `arg`: an unknown one is reported with the argument's name, as the
// programs report it with the option's ("format: unknown format \"fp17\"; known formats: ...").
template <class ByName>
auto named(const char* arg, const std::string& name, ByName by_name) {
  return pasa::at_place(arg, [&] { return by_name(name); });
}

// ---------------------------------------------------------------------------------------------------------
// JSON between Python objects and the library's readers/writers (nlohmann::json), walked directly so that
// NaN and infinities survive as floats.

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

json to_json_value(const py::handle& o, const std::string& where) {
  std::vector<const PyObject*> open;
  return to_json_value(o, where, open);
}

// A dict, or its JSON text; `what` names it in messages ("problem", "config").
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

// An allocation argument: a preset name, JSON text of an allocation object, or a dict.
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

// metrics_json writes NaN and infinities as the strings "nan", "inf", "-inf" (JSON has none); a Python dict
// holds them as floats.
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

// ---------------------------------------------------------------------------------------------------------
// numpy arrays in and out

std::string text(const py::handle& h) { return py::str(h).cast<std::string>(); }
std::string dtype_name(const py::array& a) { return text(a.dtype()); }

py::array as_array(const py::handle& o) { return numpy().attr("asarray")(o); }

// A C-contiguous, native-byte-order view of a (a copy only when a is not one already).
py::array c_native(const py::array& a) {
  return numpy().attr("ascontiguousarray")(a, py::arg("dtype") = a.dtype().attr("newbyteorder")("="));
}

// An attention tensor argument: a C-contiguous, native-order numpy array of a dtype the library reads
// (float16/32/64 values, uint8/uint16 bit patterns), read in place by tensor_from_array.
const char* ml_dtypes_format(const std::string& dtype_name);

struct TensorArg {
  py::array array;
  pasa::NpyDtype dtype;
  std::vector<std::size_t> shape;
  std::string where;
  std::optional<std::string> implied_format;  // an ml_dtypes array: its bit patterns, of this format

  TensorArg(const py::handle& obj, std::string where_) : array(c_native(as_array(obj))), where(std::move(where_)) {
    if (const char* ml = ml_dtypes_format(dtype_name(array))) {
      implied_format = ml;
      array = py::array(array.attr("view")(array.itemsize() == 1 ? "uint8" : "uint16"));
    }
    const char kind = array.dtype().kind();
    const auto size = array.itemsize();
    if (kind == 'f' && size == 2) dtype = pasa::NpyDtype::f16;
    else if (kind == 'f' && size == 4) dtype = pasa::NpyDtype::f32;
    else if (kind == 'f' && size == 8) dtype = pasa::NpyDtype::f64;
    else if (kind == 'u' && size == 1) dtype = pasa::NpyDtype::u8;
    else if (kind == 'u' && size == 2) dtype = pasa::NpyDtype::u16;
    else
      throw InputError(fmt::format("{}: dtype {} not accepted; accepted: float16, float32, float64, uint8 and uint16 "
                                   "(bit patterns of the format given as format=), and ml_dtypes' bfloat16, "
                                   "float8_e4m3fn and float8_e5m2", where, dtype_name(array)));
    for (py::ssize_t i = 0; i < array.ndim(); ++i) shape.push_back(static_cast<std::size_t>(array.shape(i)));
  }
  // What tensor() gives, from the dtype and shape alone.
  pasa::TensorHeader header(const pasa::Format* format) const {
    return pasa::tensor_header(dtype, shape, format, where);
  }
  // Without the GIL: the array is held by this object.
  pasa::Tensor tensor(const pasa::Format* format) const {
    const std::span<const unsigned char> bytes(static_cast<const unsigned char*>(array.data()),
                                               static_cast<std::size_t>(array.nbytes()));
    return pasa::tensor_from_array(dtype, shape, bytes, format, where).tensor;
  }
};

// A decode input (pse, select mask, kv_len): a C-contiguous native-order array of any dtype the .npy reader
// knows, handed to io/user_tensors.hpp (the checks and messages of the problem JSON and pasa-attn) once the
// problem's dimensions are known.
struct UserArray {
  py::array array;
  pasa::NpyDtype dtype = pasa::NpyDtype::f64;
  std::vector<std::size_t> shape;

  UserArray(const py::handle& obj, const char* where) : array(c_native(as_array(obj))) {
    const char kind = array.dtype().kind();
    const auto size = array.itemsize();
    using D = pasa::NpyDtype;
    if (kind == 'f' && size == 2) dtype = D::f16;
    else if (kind == 'f' && size == 4) dtype = D::f32;
    else if (kind == 'f' && size == 8) dtype = D::f64;
    else if (kind == 'b' && size == 1) dtype = D::b1;
    else if (kind == 'u' && size == 1) dtype = D::u8;
    else if (kind == 'u' && size == 2) dtype = D::u16;
    else if (kind == 'u' && size == 4) dtype = D::u32;
    else if (kind == 'u' && size == 8) dtype = D::u64;
    else if (kind == 'i' && size == 4) dtype = D::i32;
    else if (kind == 'i' && size == 8) dtype = D::i64;
    else
      throw InputError(fmt::format("{}: dtype {} not accepted (float16/32/64, bool, int32/64, uint8/16/32/64)", where,
                                   dtype_name(array)));
    for (py::ssize_t i = 0; i < array.ndim(); ++i) shape.push_back(static_cast<std::size_t>(array.shape(i)));
  }
  std::span<const unsigned char> bytes() const {
    return {static_cast<const unsigned char*>(array.data()), static_cast<std::size_t>(array.nbytes())};
  }
};

// A vector of doubles as a numpy float64 array that owns it (no copy).
template <class Alloc>
py::array_t<double> to_numpy(std::vector<double, Alloc>&& v, const std::vector<py::ssize_t>& shape) {
  using Vec = std::vector<double, Alloc>;
  auto* owned = new Vec(std::move(v));
  py::capsule free_it(owned, [](void* p) { delete static_cast<Vec*>(p); });
  return py::array_t<double>(shape, owned->data(), free_it);
}

// The trailing `rank` dimensions of dims.
std::vector<py::ssize_t> tail(std::vector<std::size_t> dims, std::size_t rank) {
  std::vector<py::ssize_t> s;
  for (std::size_t i = dims.size() - rank; i < dims.size(); ++i) s.push_back(static_cast<py::ssize_t>(dims[i]));
  return s;
}

// A tensor returned in the rank its inputs had: (S, D), (N, S, D) or (B, N, S, D), and the lse without D.
py::array_t<double> tensor_out(pasa::Tensor&& t, std::size_t rank) {
  const pasa::Shape s = t.shape;
  return to_numpy(std::move(t.data), tail({s.B, s.N, s.S, s.D}, rank));
}
py::array_t<double> lse_out(std::vector<double>&& lse, const pasa::Shape& s, std::size_t rank) {
  return to_numpy(std::move(lse), tail({s.B, s.N, s.S}, rank - 1));
}


// ---------------------------------------------------------------------------------------------------------
// Attention inputs: Q, K, V arrays with the mask options, as pasa-attn builds them from --q/--k/--v.

// The arrays are taken from Python first (with the GIL); inputs() then builds and checks the AttentionInputs
// without it, as pasa-attn does from its .npy files (load_tensor, then validate()).
struct InputArrays {
  TensorArg q, k, v;
  std::optional<std::string> format;
  double scale = 0;
  bool causal = false;
  std::optional<UserArray> kv_len, pse, select;  // read by io/user_tensors.hpp, as pasa-attn reads its .npy
  double select_value = pasa::Mask{}.select_value;
  std::vector<std::uint8_t> keep;
  bool allow_nonfinite = false;
  std::size_t rank() const { return q.shape.size(); }
  // Without format=, the format of ml_dtypes arrays among q, k, v (they must agree).
  std::optional<std::string> implied_format() const {
    std::optional<std::string> r;
    for (const TensorArg* t : {&q, &k, &v}) {
      if (!t->implied_format) continue;
      if (r && *r != *t->implied_format)
        throw InputError(fmt::format("{}: an array of {} among arrays of {}; give format=", t->where,
                                     *t->implied_format, *r));
      r = t->implied_format;
    }
    return r;
  }

  InputArrays(const py::handle& q_, const py::handle& k_, const py::handle& v_, std::optional<std::string> format_,
              double scale_, bool causal_, const py::object& kv_len_, const py::object& mask)
      : q(q_, "q"), k(k_, "k"), v(v_, "v"), format(std::move(format_)),
        scale(scale_), causal(causal_) {
    if (!kv_len_.is_none()) kv_len.emplace(kv_len_, "kv_len");
    if (!mask.is_none()) {
      const py::array m = c_native(as_array(mask));
      if (m.dtype().kind() != 'b')
        throw InputError(fmt::format("mask: dtype {} not accepted; give a boolean array (B, Sq, Skv), True = visible",
                                     dtype_name(m)));
      const auto* p = static_cast<const std::uint8_t*>(m.data());
      keep.assign(p, p + m.size());
    }
  }

  pasa::AttentionInputs inputs() const {
    std::unique_ptr<pasa::Format> f;
    const auto implied = implied_format();
    if (format) f = std::make_unique<pasa::Format>(named("format", *format, pasa::format_by_name));
    else if (implied) f = std::make_unique<pasa::Format>(pasa::format_by_name(*implied));
    if (implied && !(*f == pasa::format_by_name(*implied)))
      throw InputError(fmt::format("format: {} given for ml_dtypes arrays of {}", f->name, *implied));
    pasa::AttentionInputs in;
    in.q = q.tensor(f.get());
    in.k = k.tensor(f.get());
    in.v = v.tensor(f.get());
    in.scale = scale;
    in.mask.causal = causal;
    const pasa::UserTensorDims dims{in.q.shape.B, in.q.shape.N, in.q.shape.S, in.k.shape.S};
    if (kv_len) in.mask.kv_len = pasa::kv_len_from_array(kv_len->dtype, kv_len->shape, kv_len->bytes(), dims, "kv_len");
    if (pse) in.pse = pasa::pse_from_array(pse->dtype, pse->shape, pse->bytes(), dims, "pse");
    if (select) in.mask.select = pasa::select_from_array(select->dtype, select->shape, select->bytes(), dims, "select");
    in.mask.select_value = select_value;
    in.mask.keep = keep;
    in.allow_nonfinite = allow_nonfinite;
    try {
      pasa::validate(in);
    } catch (const InputError& e) {  // the library advises the programs' spelling; give Python's
      std::string what = e.what();
      const std::string cli = "--allow-nonfinite (pasa-attn) or \"allow_nonfinite\": true (problem JSON)";
      if (const auto at = what.find(cli); at != std::string::npos) what.replace(at, cli.size(), "allow_nonfinite=True");
      throw InputError(what);
    }
    return in;
  }
  // The decode inputs and allow_nonfinite (arguments of every function that takes q, k, v).
  InputArrays& decode(const py::object& pse_, const py::object& select_, double select_value_, bool allow_nonfinite_) {
    if (!pse_.is_none()) pse.emplace(pse_, "pse");
    if (!select_.is_none()) select.emplace(select_, "select");
    select_value = select_value_;
    allow_nonfinite = allow_nonfinite_;
    return *this;
  }
};

// An array of outputs (any of the tensor dtypes; (S, D), (N, S, D) or (B, N, S, D)) as a Tensor.
pasa::Tensor tensor_from(const py::handle& o, const std::string& where) { return TensorArg(o, where).tensor(nullptr); }

// ---------------------------------------------------------------------------------------------------------
// Formats and rounding

// Whether every value of `f` is a value of `into` (the same grid or a finer one, a range at least as wide,
// infinities only where `into` has them): then storing f's values there is exact.
bool values_fit(const pasa::Format& f, const pasa::Format& into) {
  return f.p <= into.p && f.max_finite() <= into.max_finite() && f.min_subnormal() >= into.min_subnormal() &&
         (!f.has_infinity() || into.has_infinity());
}
bool values_fit_float32(const pasa::Format& f) { return values_fit(f, pasa::format_by_name("fp32")); }

py::dict format_dict(const pasa::Format& f) {
  const pasa::FormatTableRow r = pasa::format_table({f}).front();
  py::dict d;
  d["name"] = r.name;
  d["p"] = r.p;
  d["emin"] = r.emin;
  d["emax"] = r.emax;
  d["min_subnormal"] = r.min_subnormal;
  d["min_normal"] = r.min_normal;
  d["max_finite"] = r.max_finite;
  d["unit_roundoff"] = r.unit_roundoff;
  d["storage_bits"] = f.storage_bits();
  d["subnormals"] = f.subnormals;
  d["infinities"] = f.has_infinity();
  return d;
}

// ---------------------------------------------------------------------------------------------------------
// numpy's narrow dtypes. float16 is numpy's own; bfloat16 and the fp8 formats are ml_dtypes' (optional: where
// it is not importable their values travel as bit patterns, uint16 / uint8). An ml_dtypes array is
// recognised by its dtype name, so nothing here needs ml_dtypes to be installed.

// The library format named like an ml_dtypes dtype, or nullptr.
const char* ml_dtypes_format(const std::string& dtype_name) {
  if (dtype_name == "bfloat16") return "bf16";
  if (dtype_name == "float8_e4m3fn") return "fp8_e4m3fn";
  if (dtype_name == "float8_e5m2") return "fp8_e5m2";
  return nullptr;
}

std::optional<py::module_> ml_dtypes() {
  try {
    return py::module_::import("ml_dtypes");
  } catch (const py::error_already_set&) {
    return std::nullopt;
  }
}

// The unsigned dtype `bytes` wide.
py::dtype uint_dtype(py::ssize_t bytes) {
  return py::dtype(bytes == 1 ? "uint8" : bytes == 2 ? "uint16" : bytes == 4 ? "uint32" : "uint64");
}
py::ssize_t storage_bytes(const pasa::Format& f) {
  const int bits = f.storage_bits();
  return bits <= 8 ? 1 : bits <= 16 ? 2 : bits <= 32 ? 4 : 8;
}

// What a dtype= argument asks for: values in a float dtype (`format`: the format its elements have), or
// storage bit patterns (`bits`; ml_dtypes arrays are bit patterns with their own dtype).
struct OutputDtype {
  py::dtype dtype;
  pasa::Format format;
  bool bits = false;  // written by encode_span (else by round_span: float32/float64)
};

// dtype=: a numpy dtype, type or name (float16, float32, float64, uint8...uint64), or an ml_dtypes type or
// name (bfloat16, float8_e4m3fn, float8_e5m2; without ml_dtypes their names give uint16 / uint8 patterns).
// Unsigned dtypes hold the patterns of `f` itself.
OutputDtype output_dtype(const py::object& dtype, const pasa::Format& f) {
  std::string name;
  py::dtype dt;
  if (py::isinstance<py::str>(dtype) && ml_dtypes_format(dtype.cast<std::string>())) {
    name = dtype.cast<std::string>();
    if (const auto ml = ml_dtypes()) dt = py::dtype::from_args(ml->attr(name.c_str()));
    else return {uint_dtype(name == "bfloat16" ? 2 : 1), pasa::format_by_name(ml_dtypes_format(name)), true};
  } else {
    try {
      dt = py::dtype::from_args(dtype);
    } catch (const py::error_already_set&) {
      throw InputError(fmt::format("dtype: {} is not a dtype", py::repr(dtype).cast<std::string>()));
    }
    name = text(dt.attr("name"));
  }
  const char kind = dt.kind();
  if (const char* ml = ml_dtypes_format(name)) return {dt, pasa::format_by_name(ml), true};
  if (kind == 'f' && dt.itemsize() == 2) return {dt, pasa::format_by_name("fp16"), true};
  if (kind == 'f' && dt.itemsize() == 4) return {dt, pasa::format_by_name("fp32"), false};
  if (kind == 'f' && dt.itemsize() == 8) return {dt, pasa::format_by_name("fp64"), false};
  if (kind == 'u') {
    if (dt.itemsize() != storage_bytes(f))
      throw InputError(fmt::format("dtype: {} cannot hold the {}-bit patterns of format {}; give {}", name,
                                   f.storage_bits(), f.name, text(uint_dtype(storage_bytes(f)).attr("name"))));
    return {dt, f, true};
  }
  throw InputError(fmt::format("dtype: {} not accepted; give float16, float32, float64, bfloat16, float8_e4m3fn, "
                               "float8_e5m2 (ml_dtypes) or an unsigned integer dtype for bit patterns", name));
}

// x as a float32 or float64 array: float16 and ml_dtypes arrays widen to float32 (exactly), Python numbers
// and lists are read as float64; arrays of those dtypes are returned as they are.
py::array float_values(const py::object& x, const char* arg) {
  if (!py::isinstance<py::array>(x)) {
    // Numbers only: numpy would read None as nan and "1.5" as 1.5.
    const py::array probe = numpy().attr("asarray")(x);
    const char k = probe.dtype().kind();
    if (py::isinstance<py::bool_>(x) || (k != 'f' && k != 'i' && k != 'u'))
      throw py::type_error(fmt::format("{}: expected a number, a sequence of numbers or a float array, got {}", arg,
                                       type_name(x)));
    return numpy().attr("asarray")(x, py::arg("dtype") = "float64");
  }
  const auto a = py::reinterpret_borrow<py::array>(x);
  const char kind = a.dtype().kind();
  if (kind == 'f' && (a.itemsize() == 4 || a.itemsize() == 8)) return a;
  if ((kind == 'f' && a.itemsize() == 2) || ml_dtypes_format(dtype_name(a))) {
    py::object quiet = numpy().attr("errstate")(py::arg("invalid") = "ignore");  // widening signalling NaNs
    quiet.attr("__enter__")();
    py::array w = a.attr("astype")("float32");
    quiet.attr("__exit__")(py::none(), py::none(), py::none());
    return w;
  }
  throw InputError(fmt::format("{}: dtype {} not accepted; give float16, float32, float64, bfloat16, float8_e4m3fn or "
                               "float8_e5m2 values", arg, dtype_name(a)));
}

bool contiguous(const py::array& a) {
  return (a.flags() & (py::array::c_style | py::array::f_style)) != 0;
}
bool same_layout(const py::array& a, const py::array& b) {
  if (a.ndim() != b.ndim()) return false;
  for (py::ssize_t i = 0; i < a.ndim(); ++i)
    if (a.shape(i) > 1 && a.strides(i) / a.itemsize() != b.strides(i) / b.itemsize()) return false;
  return true;
}

// An out= array: writeable, of this dtype and shape (any memory order).
py::array checked_out(const py::object& out, const py::dtype& dtype, const py::array& like) {
  const auto bad_out = [&] {
    return InputError(fmt::format("out: expected a writeable {} array of shape {}", text(dtype), text(like.attr("shape"))));
  };
  if (!py::isinstance<py::array>(out)) throw bad_out();
  const auto r = py::reinterpret_borrow<py::array>(out);
  if (!r.dtype().equal(dtype) || !r.writeable() || !py::tuple(r.attr("shape")).equal(py::tuple(like.attr("shape"))))
    throw bad_out();
  return r;
}

// Rounds the float values a into r (float32 or float64, a's shape, r's values of f must fit r's dtype).
// Elementwise modes run over the memory of contiguous arrays in place, whatever their order; stochastic
// rounding draws one number per element in C order, as pasa-round does, so it goes through a C-ordered
// buffer when r is not C-contiguous. Input of another dtype, layout or byte order is first copied into the
// buffer, exactly (widening float32 to float64, or a view that aliases r).
void round_into(const py::array& a, py::array& r, const pasa::Format& f, const pasa::RoundOptions& opt,
                std::uint64_t seed) {
  const bool sr = opt.mode == pasa::RoundMode::stochastic;
  const bool r_flat = contiguous(r) && (!sr || (r.flags() & py::array::c_style));
  py::array w = r_flat ? r : py::array(numpy().attr("empty")(a.attr("shape"), py::arg("dtype") = r.dtype()));
  const bool direct = contiguous(a) && same_layout(a, w) && a.dtype().equal(w.dtype()) &&
                      a.dtype().attr("isnative").cast<bool>() &&
                      !(a.data() != w.data() && numpy().attr("may_share_memory")(a, w).cast<bool>());
  if (!direct) {  // (widening a float32 signalling NaN raises numpy's "invalid" warning: not the user's concern)
    py::object quiet = numpy().attr("errstate")(py::arg("invalid") = "ignore");
    quiet.attr("__enter__")();
    try {
      numpy().attr("copyto")(w, a, py::arg("casting") = "safe");
    } catch (...) {
      quiet.attr("__exit__")(py::none(), py::none(), py::none());
      throw;
    }
    quiet.attr("__exit__")(py::none(), py::none(), py::none());
  }
  const void* src = direct ? a.data() : w.data();
  void* dst = w.mutable_data();
  const auto n = static_cast<std::size_t>(a.size());
  const bool f32 = w.itemsize() == 4;
  {
    py::gil_scoped_release nogil;
    pasa::RandomBits rng(seed);
    if (f32)
      pasa::round_span(std::span<const float>(static_cast<const float*>(src), n),
                       std::span<float>(static_cast<float*>(dst), n), f, opt, &rng);
    else
      pasa::round_span(std::span<const double>(static_cast<const double*>(src), n),
                       std::span<double>(static_cast<double*>(dst), n), f, opt, &rng);
  }
  if (!w.is(r)) numpy().attr("copyto")(r, w);
}

// The storage patterns of the float values v (contiguous, native) into r (contiguous, v's layout, 1 to 8
// bytes an element), by encode_span: a value that is not one of `f` raises ValueError naming the element
// (its index in C order) and what is wrong with it.
void encode_into(const py::array& v, py::array& r, const pasa::Format& f, const char* arg) {
  const auto n = static_cast<std::size_t>(v.size());
  const void* in = v.data();
  void* out = r.mutable_data();
  const bool f32 = v.itemsize() == 4;
  std::size_t bad;
  {
    py::gil_scoped_release nogil;
    const auto run = [&]<class Out>(Out*) {
      const auto o = std::span<Out>(static_cast<Out*>(out), n);
      return f32 ? pasa::encode_span(std::span<const float>(static_cast<const float*>(in), n), o, f)
                 : pasa::encode_span(std::span<const double>(static_cast<const double*>(in), n), o, f);
    };
    switch (r.itemsize()) {
      case 1: bad = run(static_cast<std::uint8_t*>(nullptr)); break;
      case 2: bad = run(static_cast<std::uint16_t*>(nullptr)); break;
      case 4: bad = run(static_cast<std::uint32_t*>(nullptr)); break;
      default: bad = run(static_cast<std::uint64_t*>(nullptr)); break;
    }
  }
  if (bad == n) return;
  const double x = f32 ? static_cast<const float*>(in)[bad] : static_cast<const double*>(in)[bad];
  std::size_t c_index = bad;  // the element's index in C order (the memory may be in Fortran order)
  if (!(v.flags() & py::array::c_style)) {
    const py::tuple idx = numpy().attr("unravel_index")(bad, v.attr("shape"), py::arg("order") = "F");
    c_index = numpy().attr("ravel_multi_index")(idx, v.attr("shape")).cast<std::size_t>();
  }
  try {
    (void)pasa::encode(x, f);
  } catch (const std::domain_error& e) {
    throw InputError(fmt::format("{}: element {}: {}", arg, c_index, e.what()));
  }
  throw std::logic_error("encode_span and encode disagree");
}

// A new array of a's shape and memory order (numpy's order="K", as ufuncs keep it).
py::array empty_like(const py::array& a, const py::dtype& dtype) {
  return numpy().attr("empty_like")(a, py::arg("dtype") = dtype);
}

py::object round_values(const py::object& x, const std::string& format, const std::string& mode,
                        const std::string& overflow, bool flush_input, bool flush_output, const py::object& seed_arg,
                        const py::object& dtype, const py::object& out) {
  const std::uint64_t seed = int_arg("seed", seed_arg);
  const pasa::Format f = named("format", format, pasa::format_by_name);
  const pasa::RoundOptions opt{named("mode", mode, pasa::round_mode_by_name),
                               named("overflow", overflow, pasa::overflow_by_name), flush_input,
                               flush_output};
  const bool scalar = !py::isinstance<py::array>(x) && out.is_none() && dtype.is_none() &&
                      (py::isinstance<py::float_>(x) || py::isinstance<py::int_>(x));
  const py::array a = float_values(x, "x");
  OutputDtype target{py::dtype(a.itemsize() == 4 && values_fit_float32(f) ? "float32" : "float64"),
                     pasa::format_by_name(a.itemsize() == 4 && values_fit_float32(f) ? "fp32" : "fp64")};
  if (!dtype.is_none()) {
    target = output_dtype(dtype, f);
    if (!values_fit(f, target.format))
      throw InputError(fmt::format("dtype: {} cannot hold every value of format {}", text(target.dtype.attr("name")),
                                   f.name));
  }
  py::array r = out.is_none() ? empty_like(a, target.dtype) : checked_out(out, target.dtype, a);
  // The floats rounded into: r itself, or (narrower than x, or bit patterns) floats of x's width laid out as r.
  const py::dtype work(a.itemsize() == 4 && values_fit_float32(f) ? "float32" : "float64");
  if (!target.bits && r.itemsize() >= a.itemsize()) {
    round_into(a, r, f, opt, seed);
  } else if (!target.bits) {  // float64 x into float32 values: exact, they fit
    py::array w = empty_like(r, work);
    round_into(a, w, f, opt, seed);
    numpy().attr("copyto")(r, w, py::arg("casting") = "same_kind");
  } else {  // round into floats laid out as r, then store their patterns in r
    py::array w = contiguous(r) ? empty_like(r, work)
                                : py::array(numpy().attr("empty")(a.attr("shape"), py::arg("dtype") = work));
    round_into(a, w, f, opt, seed);
    if (contiguous(r)) {
      encode_into(w, r, target.format, "x");
    } else {
      py::array bits = numpy().attr("empty")(a.attr("shape"), py::arg("dtype") = target.dtype);
      encode_into(w, bits, target.format, "x");
      numpy().attr("copyto")(r, bits);
    }
  }
  if (scalar) return py::float_(*static_cast<const double*>(r.data()));
  return r;
}

py::array encode_values(const py::object& x, const std::string& format, const py::object& dtype) {
  const pasa::Format f = named("format", format, pasa::format_by_name);
  OutputDtype target{uint_dtype(storage_bytes(f)), f, true};
  if (!dtype.is_none()) {
    target = output_dtype(dtype, f);
    if (!target.bits || !(target.format == f))
      throw InputError(fmt::format("dtype: {} does not hold the bit patterns of format {}; give {}{}",
                                   text(target.dtype.attr("name")), f.name, text(uint_dtype(storage_bytes(f)).attr("name")),
                                   f.name == "fp16" ? " or float16" : ""));
  }
  py::array v = float_values(x, "x");
  if (!contiguous(v) || !v.dtype().attr("isnative").cast<bool>())
    v = numpy().attr("ascontiguousarray")(v, py::arg("dtype") = v.dtype().attr("newbyteorder")("="));
  py::array r = empty_like(v, target.dtype);
  encode_into(v, r, f, "x");
  return r;
}

py::array_t<double> decode_bits(const py::object& bits, const std::string& format) {
  const pasa::Format f = named("format", format, pasa::format_by_name);
  py::array a = py::isinstance<py::array>(bits)
                    ? py::reinterpret_borrow<py::array>(bits)
                    : py::array(numpy().attr("asarray")(bits, py::arg("dtype") = "uint64"));
  // float16 and ml_dtypes arrays are their bit patterns
  if ((a.dtype().kind() == 'f' && a.itemsize() == 2) || ml_dtypes_format(dtype_name(a)))
    a = a.attr("view")(uint_dtype(a.itemsize()));
  if (a.dtype().kind() != 'u')
    throw InputError(fmt::format("bits: dtype {} not accepted; give unsigned integers (uint8, uint16, ...) holding "
                                 "bit patterns, or float16 / ml_dtypes arrays", dtype_name(a)));
  const py::array_t<std::uint64_t, py::array::c_style | py::array::forcecast> v(a);
  py::array_t<double> r(std::vector<py::ssize_t>(a.shape(), a.shape() + a.ndim()));
  const std::uint64_t* in = v.data();
  double* out = r.mutable_data();
  const auto n = static_cast<std::size_t>(a.size());
  {
    py::gil_scoped_release nogil;
    for (std::size_t i = 0; i < n; ++i) {
      try {
        out[i] = pasa::decode(in[i], f);
      } catch (const std::domain_error& e) {
        throw InputError(fmt::format("bits: element {}: {}", i, e.what()));
      }
    }
  }
  return r;
}


// The algorithm as pasa-attn (and pasa-attribute) build it: from `spec` (an AlgorithmSpec dict or JSON text,
// like --algo-json) or from the separate arguments (like --algorithm, --alloc, --s1, --s2, --beta).
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

py::tuple attention(const py::object& q, const py::object& k, const py::object& v, const std::optional<std::string>& algorithm,
                    const py::object& alloc, const std::optional<double>& beta, const py::object& s1,
                    const py::object& s2, const py::object& seed, const py::object& spec,
                    const std::optional<std::string>& format, const std::optional<double>& scale, bool causal,
                    const py::object& kv_len, const py::object& mask, const py::object& pse,
                    const py::object& select, double select_value,
                    bool allow_nonfinite, const py::object& threads, const py::object& kernel) {
  // kernel=: a recipe's name or {"recipe": name, <schedule fields>} (pasa-attn --kernel), alone: the recipe
  // fixes what algorithm, alloc, beta, s1, s2, seed and spec would set.
  if (!kernel.is_none() && (!spec.is_none() || algorithm || !alloc.is_none() || beta || !s1.is_none() ||
                            !s2.is_none() || !seed.is_none()))
    throw InputError("kernel: a kernel recipe fixes the algorithm, allocation, blocks and seed; give kernel alone "
                     "(override its schedule fields with kernel={\"recipe\": ..., ...})");
  const pasa::AlgorithmSpec algo =
      kernel.is_none()
          ? algorithm_spec("pasa.attention", spec, algorithm, alloc, beta, opt_size_arg("s1", s1),
                           opt_size_arg("s2", s2), opt_int_arg("seed", seed), "fa2", "fa_fp16_fp32")
          : pasa::algorithm_from_json(json{{"kernel", py::isinstance<py::str>(kernel) ? json(kernel.cast<std::string>())
                                                                                       : json_argument(kernel, "kernel")}},
                                      "pasa.attention:");
  InputArrays arrays(q, k, v, format, scale_value(scale), causal, kv_len, mask);
  arrays.decode(pse, select, select_value, allow_nonfinite);
  const int t = threads_arg(threads);
  pasa::Shape shape;
  pasa::AttentionOutput out = interruptible([&] {
    const pasa::AttentionInputs in = arrays.inputs();
    shape = in.q.shape;
    return pasa::run_attention(in, algo, t);
  });
  return py::make_tuple(tensor_out(std::move(out.o), arrays.rank()), lse_out(std::move(out.lse), shape, arrays.rank()));
}

// The GPU math models (numeric/gpu_math.hpp) over a float32 array, for the tests that check them against the
// measured digests and for users asking what the hardware gives.
py::array_t<float> gpu_math(const py::object& x, const std::string& function) {
  using F = float (*)(float);
  static const std::vector<std::pair<std::string, F>> fns = {
      {"ex2", pasa::gpu::ex2_approx_ftz}, {"lg2", pasa::gpu::lg2_approx_ftz}, {"exp2f", pasa::gpu::exp2f},
      {"expf", pasa::gpu::expf},          {"logf", pasa::gpu::logf},          {"fast_logf", pasa::gpu::fast_logf}};
  F f = nullptr;
  std::string known;
  for (const auto& [name, fn] : fns) {
    if (name == function) f = fn;
    known += (known.empty() ? "" : ", ") + name;
  }
  if (!f) throw InputError(fmt::format("function: unknown GPU function \"{}\"; known: {}", function, known));
  const py::array_t<float, py::array::c_style | py::array::forcecast> a(x);
  py::array_t<float> out(a.request().shape);
  const float* in = a.data();
  float* o = out.mutable_data();
  const auto n = static_cast<std::size_t>(a.size());
  try {
    py::gil_scoped_release nogil;
    for (std::size_t i = 0; i < n; ++i) o[i] = f(in[i]);
  } catch (const std::domain_error& e) {
    throw InputError(std::string("function ") + function + ": " + e.what());
  }
  return out;
}

// The bridge (study/kernel_bridge.hpp): which recipe produced gpu_out from q, k, v, and where the closest parts.
py::dict compare_kernel(const py::object& q, const py::object& k, const py::object& v, const py::object& gpu_out,
                        const std::optional<std::string>& format, const std::optional<double>& scale, bool causal,
                        const py::object& threads) {
  InputArrays arrays(q, k, v, format, scale_value(scale), causal, py::none(), py::none());
  arrays.decode(py::none(), py::none(), pasa::Mask{}.select_value, false);
  const TensorArg go(gpu_out, "gpu_out");
  // gpu_out in the inputs' format (format=, else an ml_dtypes dtype's, else its own dtype's).
  const std::optional<std::string> fname = format ? format : go.implied_format ? go.implied_format : arrays.implied_format();
  std::unique_ptr<pasa::Format> f;
  if (fname) f = std::make_unique<pasa::Format>(named("format", *fname, pasa::format_by_name));
  const int t = threads_arg(threads);
  const pasa::KernelBridgeReport r = interruptible([&] {
    const pasa::AttentionInputs in = arrays.inputs();
    return pasa::compare_kernel(in, go.tensor(f.get()), t);
  });
  auto rows = [](const std::vector<pasa::KernelMatch>& ms) {
    py::list l;
    for (const pasa::KernelMatch& m : ms) {
      py::dict d;
      d["recipe"] = m.recipe;
      d["variant"] = m.variant;
      d["identical_pct"] = m.identical_pct();
      d["max_ulp"] = m.max_ulp;
      l.append(d);
    }
    return l;
  };
  py::dict d;
  d["recipes"] = rows(r.recipes);
  d["variants"] = rows(r.variants);
  d["refused"] = r.refused;
  d["verdict"] = r.verdict;
  return d;
}

// The golden's options from Python's arguments, and its result as Python sees it (golden, unified_golden).
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

py::dict golden(const py::object& q, const py::object& k, const py::object& v, const std::optional<std::string>& format,
                const std::optional<double>& scale, bool causal, const py::object& kv_len, const py::object& mask, const py::object& pse,
                const py::object& select, double select_value, bool allow_nonfinite,
                const py::object& precision_bits, bool fast, const py::object& threads) {
  InputArrays arrays(q, k, v, format, scale_value(scale), causal, kv_len, mask);
  arrays.decode(pse, select, select_value, allow_nonfinite);
  const pasa::GoldenOptions opt = golden_options(precision_bits, fast, threads);
  pasa::Shape shape;
  pasa::Golden g = interruptible([&] {
    const pasa::AttentionInputs in = arrays.inputs();
    shape = in.q.shape;
    return pasa::golden_attention(in, opt);
  });
  return golden_dict(std::move(g), shape, arrays.rank());
}

py::array_t<double> uniform_baseline(const py::object& q, const py::object& k, const py::object& v,
                                     const std::optional<std::string>& format, const std::optional<double>& scale, bool causal,
                                     const py::object& kv_len, const py::object& mask, const py::object& pse,
                                     const py::object& select, double select_value, bool allow_nonfinite,
                                     const py::object& threads) {
  InputArrays arrays(q, k, v, format, scale_value(scale), causal, kv_len, mask);
  arrays.decode(pse, select, select_value, allow_nonfinite);
  const int t = threads_arg(threads);
  pasa::Tensor b = interruptible([&] { return pasa::uniform_baseline(arrays.inputs(), t); });
  return tensor_out(std::move(b), arrays.rank());
}

py::dict score_stats(const py::object& q, const py::object& k, const py::object& v, const std::string& score_format,
                     const std::optional<std::string>& format, const std::optional<double>& scale, bool causal,
                     const py::object& kv_len, const py::object& mask, const py::object& pse,
                     const py::object& select, double select_value, bool allow_nonfinite,
                     const py::object& threads) {
  const pasa::Format sf = named("score_format", score_format, pasa::format_by_name);
  InputArrays arrays(q, k, v, format, scale_value(scale), causal, kv_len, mask);
  arrays.decode(pse, select, select_value, allow_nonfinite);
  const int t = threads_arg(threads);
  const pasa::ScoreStats st = interruptible([&] { return pasa::score_stats(arrays.inputs(), sf, t); });
  return numbers_as_floats(pasa::to_json(st));
}

py::list range_stats(const py::object& q, const py::object& k, const py::object& v, double beta, std::size_t s2,
                     const std::string& score_format, std::size_t heads, const std::optional<std::string>& format,
                     const std::optional<double>& scale, bool causal, const py::object& kv_len, const py::object& mask, const py::object& pse,
                     const py::object& select, double select_value, bool allow_nonfinite, const py::object& threads) {
  const pasa::Format sf = named("score_format", score_format, pasa::format_by_name);
  InputArrays arrays(q, k, v, format, scale_value(scale), causal, kv_len, mask);
  arrays.decode(pse, select, select_value, allow_nonfinite);
  const int t = threads_arg(threads);
  const auto r = interruptible([&] { return pasa::range_stats(arrays.inputs(), beta, s2, sf, heads, t); });
  py::list out;
  for (const pasa::HeadRanges& h : r) out.append(numbers_as_floats(pasa::to_json(h)));
  return out;
}

// The metrics as pasa-attn --json writes them, with "rel_rmse" first: Eq. 19 is a relative RMSE (the error's
// norm over the golden's), which "rmse", the programs' key, keeps as an alias for existing scripts.
py::dict metrics_dict(const pasa::Metrics& m) {
  py::dict d;
  d["rel_rmse"] = m.rmse;
  for (const auto& [k, v] : numbers_as_floats(pasa::to_json(m))) d[k] = v;
  return d;
}

py::dict metrics(const py::object& out, const py::object& golden, const py::object& baseline) {
  const py::object g = py::isinstance<py::dict>(golden) ? py::object(golden["out"]) : golden;
  const pasa::Tensor o = tensor_from(out, "out"), gt = tensor_from(g, "golden");
  std::optional<pasa::Tensor> b;
  if (!baseline.is_none()) b = tensor_from(baseline, "baseline");
  pasa::Metrics m;
  {
    py::gil_scoped_release nogil;
    m = b ? pasa::compare_outputs(o, gt, *b) : pasa::compare_outputs(o, gt);
  }
  return metrics_dict(m);
}

// ---------------------------------------------------------------------------------------------------------
// Paged KV / unified attention (attention/unified.hpp): Q, the cache's K and V and the sequences, as
// generate() returns them for a "kind": "paged" problem.

struct PagedArrays {
  TensorArg q, k, v;
  std::optional<std::string> format;
  double scale = 0;
  std::vector<pasa::PagedSequence> seqs;

  PagedArrays(const py::handle& q_, const py::handle& k_, const py::handle& v_, const py::handle& sequences,
              std::optional<std::string> format_, double scale_)
      : q(q_, "q"), k(k_, "k_cache"), v(v_, "v_cache"), format(std::move(format_)), scale(scale_) {
    if (k.shape.size() != 4 || v.shape.size() != 4)
      throw InputError(fmt::format("k_cache, v_cache: (num_blocks, Nkv, block_size, D) arrays expected, got {} and {} "
                                   "dimensions", k.shape.size(), v.shape.size()));
    const json j = to_json_value(sequences, "sequences");
    if (!j.is_array()) throw InputError("sequences: a list of dicts {q_len, ctx_len, shared_blocks, block_table} expected");
    for (std::size_t s = 0; s < j.size(); ++s) {
      const std::string at = fmt::format("sequences/{}", s);
      pasa::require_object(j[s], at);
      pasa::check_keys(j[s], {"q_len", "ctx_len", "shared_blocks", "block_table"}, at);
      for (const char* key : {"q_len", "ctx_len", "block_table"})
        if (!j[s].contains(key)) pasa::json_fail(at, fmt::format("missing \"{}\"", key));
      pasa::PagedSequence sq;
      pasa::read_size(j[s], "q_len", at, sq.q_len);
      pasa::read_size(j[s], "ctx_len", at, sq.ctx_len);
      pasa::read_size(j[s], "shared_blocks", at, sq.shared_blocks);
      const json& t = j[s].at("block_table");
      if (!t.is_array()) pasa::json_fail(at + "/block_table", "expected a list of cache block indices");
      for (std::size_t b = 0; b < t.size(); ++b) sq.block_table.push_back(pasa::as_size(t[b], fmt::format("{}/block_table/{}", at, b)));
      seqs.push_back(std::move(sq));
    }
  }

  // Without the GIL. The cache's values as floats: validate(PagedBatch) refuses a format wider than fp32.
  pasa::PagedBatch batch() const {
    std::unique_ptr<pasa::Format> f;
    if (format) f = std::make_unique<pasa::Format>(named("format", *format, pasa::format_by_name));
    pasa::PagedBatch pb;
    pb.q = q.tensor(f.get());
    const pasa::Tensor kt = k.tensor(f.get() ? f.get() : &pb.q.format), vt = v.tensor(f.get() ? f.get() : &pb.q.format);
    if (!(kt.shape == vt.shape))
      throw InputError("k_cache, v_cache: the two arrays' shapes differ");
    pasa::PagedCache& c = pb.cache;
    c.num_blocks = kt.shape.B, c.Nkv = kt.shape.N, c.block_size = kt.shape.S, c.D = kt.shape.D;
    c.format = pb.q.format;
    const pasa::Format& cf = c.format;
    if (!(cf.p <= 24 && cf.emax <= 127 && cf.emin() - (cf.p - 1) >= -149))
      throw InputError(fmt::format("format: the cache holds floats: give format= of at most fp32's width (the "
                                   "arrays are {}; generate() returns the problem's format)", cf.name));
    c.k.assign(kt.data.begin(), kt.data.end());
    c.v.assign(vt.data.begin(), vt.data.end());
    pb.seqs = seqs;
    pb.scale = scale;
    pasa::validate(pb);
    return pb;
  }
};

py::tuple unified_attention_py(const py::object& q, const py::object& k, const py::object& v, const py::object& sequences,
                               const std::optional<std::string>& algorithm, const py::object& alloc,
                               const std::optional<double>& beta, const py::object& s1, const py::object& s2,
                               const py::object& seed, const py::object& spec, const std::optional<std::string>& format,
                               const std::optional<double>& scale, const py::object& threads) {
  const pasa::AlgorithmSpec algo =
      algorithm_spec("pasa.unified_attention", spec, algorithm, alloc, beta, opt_size_arg("s1", s1),
                     opt_size_arg("s2", s2), opt_int_arg("seed", seed), "fa2", "fa_fp16_fp32");
  const PagedArrays arrays(q, k, v, sequences, format, scale_value(scale));
  const int t = threads_arg(threads);
  pasa::Shape shape;
  pasa::AttentionOutput out = interruptible([&] {
    const pasa::PagedBatch pb = arrays.batch();
    shape = pb.q.shape;
    return pasa::unified_attention(pb, algo, t);
  });
  return py::make_tuple(tensor_out(std::move(out.o), 4), lse_out(std::move(out.lse), shape, 4));
}

py::dict unified_golden_py(const py::object& q, const py::object& k, const py::object& v, const py::object& sequences,
                           const std::optional<std::string>& format, const std::optional<double>& scale, const py::object& precision_bits,
                           bool fast, const py::object& threads) {
  const PagedArrays arrays(q, k, v, sequences, format, scale_value(scale));
  const pasa::GoldenOptions opt = golden_options(precision_bits, fast, threads);
  pasa::Shape shape;
  pasa::Golden g = interruptible([&] {
    const pasa::PagedBatch pb = arrays.batch();
    shape = pb.q.shape;
    return pasa::unified_golden(pb, opt);
  });
  return golden_dict(std::move(g), shape, 4);
}

py::array_t<double> unified_baseline_py(const py::object& q, const py::object& k, const py::object& v,
                                        const py::object& sequences, const std::optional<std::string>& format,
                                        const std::optional<double>& scale, const py::object& threads) {
  const PagedArrays arrays(q, k, v, sequences, format, scale_value(scale));
  const int t = threads_arg(threads);
  pasa::Tensor b = interruptible([&] { return pasa::unified_baseline(arrays.batch(), t); });
  return tensor_out(std::move(b), 4);
}

py::dict unified_score_stats_py(const py::object& q, const py::object& k, const py::object& v, const py::object& sequences,
                                const std::string& score_format, const std::optional<std::string>& format, const std::optional<double>& scale,
                                const py::object& threads) {
  const pasa::Format sf = named("score_format", score_format, pasa::format_by_name);
  const PagedArrays arrays(q, k, v, sequences, format, scale_value(scale));
  const int t = threads_arg(threads);
  const pasa::ScoreStats st = interruptible([&] { return pasa::unified_score_stats(arrays.batch(), sf, t); });
  return numbers_as_floats(pasa::to_json(st));
}

// A paged problem's inputs as generate() returns them: the arguments of unified_attention().
py::dict generate_paged_py(const pasa::ProblemSpec& spec, int t) {
  pasa::PagedBatch pb = interruptible([&] { return pasa::generate_paged(spec, t); });
  const pasa::PagedCache& c = pb.cache;
  auto cache = [&](const std::vector<float, pasa::HugePageAllocator<float>>& x) {
    return to_numpy(std::vector<double>(x.begin(), x.end()),
                    {static_cast<py::ssize_t>(c.num_blocks), static_cast<py::ssize_t>(c.Nkv),
                     static_cast<py::ssize_t>(c.block_size), static_cast<py::ssize_t>(c.D)});
  };
  py::dict d;
  d["k_cache"] = cache(c.k);
  d["v_cache"] = cache(c.v);
  d["q"] = tensor_out(std::move(pb.q), 4);
  py::list seqs;
  for (const pasa::PagedSequence& s : pb.seqs) {
    py::dict q;
    q["q_len"] = s.q_len;
    q["ctx_len"] = s.ctx_len;
    q["shared_blocks"] = s.shared_blocks;
    q["block_table"] = py::cast(s.block_table);
    seqs.append(q);
  }
  d["sequences"] = seqs;
  d["format"] = spec.format;
  d["scale"] = pb.scale == 0 ? py::object(py::none()) : py::float_(pb.scale);  // (None: 1/sqrt(D))
  return d;
}

py::dict generate(const py::object& problem, const py::object& threads) {
  const pasa::ProblemSpec spec = pasa::problem_from_json(json_argument(problem, "problem"), "problem:");
  const int t = threads_arg(threads);
  if (spec.paged) {
    pasa::check_memory(pasa::inputs_bytes(spec), 0, "problem", "a paged problem's Q (float64) and cache (float32)");
    return generate_paged_py(spec, t);
  }
  // Size first, as pasa-attn --problem: the three tensors, before one element is drawn (core/memory.hpp).
  pasa::check_memory(pasa::inputs_bytes(spec), 0, "problem",
                     fmt::format("Q ({}, {}, {}, {}), K/V ({}, {}, {}, {}) as float64", spec.B, spec.Nq, spec.Sq,
                                 spec.D, spec.B, spec.Nkv, spec.Skv, spec.D));
  pasa::AttentionInputs in = interruptible([&] { return pasa::generate_inputs(spec, t); });
  py::dict d;
  d["q"] = tensor_out(std::move(in.q), 4);
  d["k"] = tensor_out(std::move(in.k), 4);
  d["v"] = tensor_out(std::move(in.v), 4);
  d["format"] = spec.format;
  d["scale"] = in.scale == 0 ? py::object(py::none()) : py::float_(in.scale);  // (None: 1/sqrt(D))
  d["causal"] = in.mask.causal;
  d["kv_len"] = in.mask.kv_len.empty() ? py::object(py::none()) : py::cast(in.mask.kv_len);
  // The decode inputs too (dropping them gave attention(**inputs) another problem than pasa-attn's).
  d["pse"] = in.pse.data.empty() ? py::object(py::none()) : py::object(tensor_out(std::move(in.pse), 4));
  if (in.mask.select.empty()) {
    d["select"] = py::none();
  } else {
    py::array_t<bool> sel({static_cast<py::ssize_t>(spec.B), static_cast<py::ssize_t>(spec.Sq),
                           static_cast<py::ssize_t>(spec.Skv)});
    bool* out = sel.mutable_data();
    for (std::size_t i = 0; i < in.mask.select.size(); ++i) out[i] = in.mask.select[i] != 0;
    d["select"] = sel;
  }
  d["select_value"] = in.mask.select_value;
  d["allow_nonfinite"] = in.allow_nonfinite;
  return d;
}

// C = A·B under a GEMM model, as pasa-gemm computes it (study/hardware_compare.hpp batched_gemm).
py::array_t<double> gemm_values(const py::object& a, const py::object& b, const std::optional<std::string>& a_format,
                                const std::optional<std::string>& b_format, const std::string& acc,
                                const std::string& out, const py::object& model) {
  const TensorArg ta(a, "a"), tb(b, "b");
  for (const TensorArg* t : {&ta, &tb})
    if (t->shape.size() != 2 && t->shape.size() != 3)
      throw InputError(fmt::format("{}: {} dimensions; expected (rows, columns) or (batch, rows, columns)", t->where,
                                   t->shape.size()));
  if (ta.shape.size() != tb.shape.size()) throw InputError("a, b: one is batched, the other not");
  std::unique_ptr<pasa::Format> fa, fb;
  if (a_format) fa = std::make_unique<pasa::Format>(named("a_format", *a_format, pasa::format_by_name));
  if (b_format) fb = std::make_unique<pasa::Format>(named("b_format", *b_format, pasa::format_by_name));
  else if (fa) fb = std::make_unique<pasa::Format>(*fa);
  const pasa::StageSpec sacc{named("acc", acc, pasa::format_by_name)}, sout{named("out", out, pasa::format_by_name)};
  const std::string model_text = py::isinstance<py::str>(model) ? model.cast<std::string>()
                                                                 : json_argument(model, "model").dump();
  std::vector<double> c;
  // Shapes, formats, model and size from the arrays' headers before any element is converted.
  const pasa::TensorHeader ha = ta.header(fa.get()), hb = tb.header(fb.get());
  const pasa::Shape sa = ha.shape, sb = hb.shape;
  if (sa.N != sb.N || sa.D != sb.S)
    throw InputError(fmt::format("a, b: shapes {} x {} x {} and {} x {} x {} are not (batch, M, K) and (batch, K, N)",
                                 sa.N, sa.S, sa.D, sb.N, sb.S, sb.D));
  const pasa::GemmSpec spec{ha.format, hb.format, sacc, sout, pasa::gemm_model_by_name(model_text, ha.format, "model")};
  pasa::check_batched_gemm(spec, sa.N, sa.S, sb.D, sa.D, 0, 0, "model " + model_text);
  {
    py::gil_scoped_release nogil;
    const pasa::Tensor A = ta.tensor(fa.get()), B = tb.tensor(fb.get());
    c = pasa::batched_gemm(spec, sa.N, sa.S, sb.D, sa.D, A.data, B.data);
  }
  std::vector<py::ssize_t> shape = {static_cast<py::ssize_t>(sa.S), static_cast<py::ssize_t>(sb.D)};
  if (ta.shape.size() == 3) shape.insert(shape.begin(), static_cast<py::ssize_t>(sa.N));
  return to_numpy(std::move(c), shape);
}

py::object solve_beta(const py::object& beta0, const py::object& n_arg, const std::string& format,
                      const py::object& sqrt_d_arg, double tol, const py::object& max_iter_arg) {
  const long long n = static_cast<long long>(int_arg("n", n_arg, 0, INT64_MAX));  // 0: the block-size message below
  const std::size_t sqrt_d = static_cast<std::size_t>(int_arg("sqrt_d", sqrt_d_arg));
  const int max_iter = static_cast<int>(int_arg("max_iter", max_iter_arg, 1, INT32_MAX));
  const pasa::Format tp = named("format", format, pasa::format_by_name);
  if (n < 1) throw InputError(fmt::format("n {}: the block size must be at least 1", n));
  pasa::BetaOptions opt;
  opt.sqrt_d = sqrt_d;
  opt.tol = tol;
  opt.max_iter = max_iter;
  const bool one = !py::isinstance<py::sequence>(beta0) && !py::isinstance<py::array>(beta0);  // a number
  const std::vector<double> betas = one ? std::vector<double>{beta0.cast<double>()} : beta0.cast<std::vector<double>>();
  py::list rows;
  for (double b : betas) rows.append(to_python(pasa::to_json(pasa::solve_beta(b, static_cast<std::size_t>(n), tp, opt))));
  return one ? py::object(rows[0]) : py::object(rows);
}

py::dict attribute(const py::object& problem, const py::object& q, const py::object& k, const py::object& v,
                   const std::optional<std::string>& format, const std::optional<double>& scale, bool causal,
                   const py::object& kv_len, const py::object& mask, const py::object& pse,
                   const py::object& select, double select_value, bool allow_nonfinite,
                   const std::optional<std::string>& algorithm, const py::object& alloc, const std::optional<double>& beta,
                   const py::object& s1, const py::object& s2, const py::object& seed, const py::object& spec,
                   bool invariance,
                   const py::object& threads) {
  const pasa::AlgorithmSpec algo =
      algorithm_spec("pasa.attribute", spec, algorithm, alloc, beta, opt_size_arg("s1", s1), opt_size_arg("s2", s2),
                     opt_int_arg("seed", seed), "pasa", "pasa_fp16");
  const bool arrays_given = !q.is_none() || !k.is_none() || !v.is_none();
  if (problem.is_none() == !arrays_given)
    throw InputError("problem: give either a problem (dict or JSON text) or the arrays q, k, v");
  std::optional<pasa::ProblemSpec> pspec;
  std::optional<InputArrays> arrays;
  if (!problem.is_none()) pspec = pasa::problem_from_json(json_argument(problem, "problem"), "problem:");
  else arrays.emplace(q, k, v, format, scale_value(scale), causal, kv_len, mask).decode(pse, select, select_value, allow_nonfinite);
  const int t = threads_arg(threads);
  std::optional<pasa::InvarianceView> view;
  const std::vector<pasa::StageShare> rows = interruptible([&] {
    const pasa::AttentionInputs in = pspec ? pasa::generate_inputs(*pspec, t) : arrays->inputs();
    pasa::GoldenOptions gopt;
    gopt.threads = t;
    const pasa::Golden g = pasa::golden_attention(in, gopt);
    // The invariance view first, as pasa-attribute does: it rejects a non-PASA algorithm before the long runs.
    if (invariance) view = pasa::invariance_view(in, algo, g, t);
    return pasa::attribute_error(in, algo, g, t);
  });
  json j = {{"algorithm", pasa::to_json(algo)}, {"stages", json::array()}};
  if (pspec) j["problem"] = pasa::to_json(*pspec);
  for (const pasa::StageShare& r : rows) j["stages"].push_back(pasa::to_json(r));
  if (view) j["invariance"] = pasa::to_json(*view);
  return to_python(j);
}

py::dict sweep(const py::object& config, const py::object& out_dir, const py::object& threads, bool resume,
               const std::optional<std::string>& shard) {
  pasa::SweepConfig cfg;
  // A str is JSON text when it starts with '{' (a file name hardly does), else a path.
  const bool json_text = py::isinstance<py::str>(config) && [&] {
    const std::string s = config.cast<std::string>();
    const auto first = s.find_first_not_of(" \t\r\n");
    return first != std::string::npos && s[first] == '{';
  }();
  if (py::isinstance<py::dict>(config) || json_text)
    cfg = pasa::parse_sweep_config(json_argument(config, "config"), "config");
  else if (py::isinstance<py::str>(config) || py::isinstance(config, py::module_::import("os").attr("PathLike")))
    cfg = pasa::load_sweep_config(py::str(py::module_::import("os").attr("fspath")(config)).cast<std::string>());
  else
    throw py::type_error(fmt::format("config: expected a dict, its JSON text or the path of a JSON file, got {}",
                                 py::str(py::type::handle_of(config).attr("__name__")).cast<std::string>()));
  pasa::SweepOptions opt;
  if (!out_dir.is_none()) opt.out_dir = py::str(py::module_::import("os").attr("fspath")(out_dir)).cast<std::string>();
  opt.threads = threads_arg(threads);
  opt.resume = resume;
  if (shard) pasa::parse_shard(*shard, opt.shard_index, opt.shard_count);
  opt.progress = [](const pasa::SweepProgress&) { pasa::check_cancel(); };  // Ctrl-C: stop between cases
  std::string digest;
  const pasa::SweepReport r = interruptible([&] {
    pasa::SweepReport rep = pasa::run_sweep(cfg, pasa::library_backend(), opt);
    digest = pasa::sweep_digest(cfg, rep.csv);
    return rep;
  });
  py::dict d;
  d["csv"] = r.csv.string();
  d["summary"] = r.summary.empty() ? py::object(py::none()) : py::object(py::str(r.summary.string()));
  d["cases_run"] = r.cases_run;
  d["cases_reused"] = r.cases_reused;
  d["digest"] = digest;
  return d;
}

}  // namespace

PYBIND11_MODULE(_pasa, m) {
  m.doc() = R"doc(pasa: numerical analysis of low-precision attention, from Python.

The C++ library underneath the pasa-* programs, for numpy arrays: rounding to low-precision formats, the
blocked attention algorithms under a precision allocation, the MPFR golden, metrics, input generators, the
beta solver, error attribution and sweeps. Results are the programs' results bit for bit; the documentation
of each topic is in docs/ (docs/python.md for this module).

Errors: a bad argument (name, value, shape, JSON key) raises ValueError with the message the programs print
after "error:"; anything else raises RuntimeError (a bug to report). The GIL is released while the library
computes.)doc";
  m.attr("__version__") = PASA_VERSION;

  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const py::error_already_set&) {
      throw;
    } catch (const py::builtin_exception&) {
      throw;
    } catch (const std::bad_alloc&) {
      throw;
    } catch (const InputError& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const std::exception& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what());
    }
  });

  using py::arg;
  // Each docstring opens with its signature, defaults spelt out (pybind11's would show None for them).
  py::options options;
  options.disable_function_signatures();

  m.def("formats", [] {
    py::list l;
    for (const pasa::Format& f : pasa::builtin_formats()) l.append(format_dict(f));
    return l;
  }, R"doc(formats() -> list of dict

The built-in formats (PASA Table 1 with the exponent range and the smallest values), one dict each:
name, p (significand bits, implicit bit included), emin, emax, min_subnormal, min_normal, max_finite,
unit_roundoff (2^-p), storage_bits, subnormals, infinities. What `pasa-round --list-formats` prints.)doc");

  m.def("format_info", [](const std::string& name) { return format_dict(named("name", name, pasa::format_by_name)); }, arg("name"),
        R"doc(format_info(name) -> dict

One format by name, built-in ("fp16", "bf16", "fp8_e4m3fn", ...) or custom ("p=8,emax=15",
"p=5,emax=15,subnormals=0"), with the keys of formats(). Unknown names raise ValueError listing the known ones.)doc");

  m.def("round", &round_values, arg("x"), arg("format"), py::kw_only(), arg("mode") = "rne", arg("overflow") = "ieee",
        arg("flush_input") = false, arg("flush_output") = false, arg("seed") = 0, arg("dtype") = py::none(),
        arg("out") = py::none(),
        R"doc(round(x, format, *, mode="rne", overflow="ieee", flush_input=False, flush_output=False, seed=0, dtype=None, out=None)

Round every element of x to `format` once (from its exact value), as pasa-round does.

x: a numpy array of any shape, order and strides: float16, float32 or float64, or ml_dtypes' bfloat16,
   float8_e4m3fn, float8_e5m2; or a Python number or list (read as float64). Contiguous input is read in
   place; other input is copied into the result first.
format: a format name (see formats(); numpy's and ml_dtypes' names too: "float16", "bfloat16",
   "float8_e4m3fn", ...), a custom "p=<bits>,emax=<e>[,subnormals=0]", or a numpy / ml_dtypes dtype.
mode: "rne" (nearest, ties to even), "rz", "ru", "rd", "ro" (to odd), "sr" (stochastic).
overflow: "ieee" (inf, or NaN for fp8_e4m3fn) or "saturate" (clamp to the largest finite value).
flush_input / flush_output: DAZ / FTZ (subnormal inputs / results become zero).
seed: the random stream of stochastic rounding: one draw per element, in C order, so a given seed gives
   the same bits as pasa-round --seed on the same values.
dtype: the result's dtype. None: float32 for float32, float16 and ml_dtypes x when every value of the
   format is a float32 (fp16, bf16, fp8, tf32, fp32, ...), else float64. numpy.float16, float32, float64:
   those (every value of the format must be one of the dtype's, else ValueError). ml_dtypes.bfloat16,
   float8_e4m3fn, float8_e5m2 or their names: ml_dtypes arrays, or where ml_dtypes is not installed the
   names give the bit patterns as uint16 / uint8. An unsigned dtype: the format's storage bit patterns
   (as encode()).
out: an optional writeable array of the result's dtype and shape to write into (saves the allocation).

Returns an array of x's shape and memory order (C or Fortran, as numpy's ufuncs keep it) holding values of
the format; a float for a Python number. NaN stays NaN of the same sign, quiet.)doc");

  m.def("encode", &encode_values, arg("x"), arg("format"), arg("dtype") = py::none(),
        R"doc(encode(x, format, dtype=None) -> numpy array of bit patterns

The storage bit patterns of values of `format` (round them first: other values raise ValueError naming the
element), x as round() takes it. dtype=None: unsigned integers as wide as the format's storage: uint8 for
fp8, uint16 for fp16/bf16, uint32 for fp32/tf32, uint64 for fp64. dtype=numpy.float16 (fp16) or
ml_dtypes.bfloat16 / float8_e4m3fn / float8_e5m2 (or their names): the same patterns as that narrow float
array (names without ml_dtypes: uint16 / uint8). NaN encodes as the canonical quiet NaN with its sign. For
fp16, encode(x, "fp16") equals x.astype(numpy.float16).view(numpy.uint16) for every fp16 value and
encode(x, "fp16", dtype=numpy.float16) equals x.astype(numpy.float16).)doc");

  m.def("decode", &decode_bits, arg("bits"), arg("format"),
        R"doc(decode(bits, format) -> float64 numpy array

The values of storage bit patterns of `format` (unsigned integer array, any shape; a float16 or ml_dtypes
array stands for its patterns; or Python ints). A pattern wider than the format, or one the format does not
have, raises ValueError naming the element. For fp16, decode(b, "fp16") equals
b.view(numpy.float16).astype(numpy.float64).)doc");

  m.def("algorithms", &pasa::algorithm_names, "algorithms() -> list of str\n\nThe registered attention algorithms.");
  m.def("presets", &pasa::allocation_preset_names,
        "presets() -> list of str\n\nThe precision allocation presets (docs/allocations.md).");
  m.def("allocation", [](const py::object& alloc) {
    return to_python(pasa::to_json(pasa::allocation_from_json(alloc_argument(alloc), "alloc")));
  }, arg("alloc"), R"doc(allocation(alloc) -> dict

The full form of an allocation (every stage with its format, rounding and reduction, the GEMM model): a preset
name, the JSON text of an allocation object, or a dict {"preset": ..., "stages": {...}} (docs/allocations.md).
The result can be edited and passed back as alloc= to attention().)doc");

  m.def(
      "kernels",
      [] {
        py::list out;
        for (const pasa::KernelRecipe& k : pasa::kernel_recipes()) {
          py::dict d;
          d["name"] = k.name;
          d["summary"] = k.summary;
          d["source"] = k.source;
          d["status"] = k.status;
          d["schedule"] = to_python(pasa::to_json(k));
          out.append(d);
        }
        return out;
      },
      R"doc(kernels() -> list

The kernel recipes (pasa-attn --list-kernels): dicts {"name", "summary", "source", "status" (how far the GPU
confirms it), "schedule"}, the schedule
in the form attention(kernel={...}) takes.)doc");
  m.def("gpu_math", &gpu_math, arg("x"), arg("function") = "ex2",
        R"doc(gpu_math(x, function="ex2") -> float32 array

An H100/H200's float32 math on x (cast to float32), bit for bit as measured (results/hardware/kernels/README.md):
"ex2" (MUFU.EX2, ex2.approx.ftz.f32), "lg2" (MUFU.LG2, for x >= 1), and CUDA's "exp2f", "expf", "logf" and
"fast_logf" (__logf) as nvcc compiles them without fast math. The kernel recipes use these.)doc");
  m.def("compare_kernel", &compare_kernel, arg("q"), arg("k"), arg("v"), arg("gpu_out"), py::kw_only(),
        arg("format") = py::none(), arg("scale") = py::none(), arg("causal") = false, arg("threads") = py::none(),
        R"doc(compare_kernel(q, k, v, gpu_out, *, format=None, scale=None, causal=False, threads=None) -> dict

Which kernel recipe produced gpu_out (a GPU kernel's attention output on q, k, v), and where the closest one
parts from the kernel, as pasa-hwcompare kernel reports it: {"recipes": [{"recipe", "variant", "identical_pct",
"max_ulp"}, ...] best first, "variants": the closest recipe with one schedule field changed, best first,
"refused": recipes that do not run on these inputs, "verdict": one sentence}. Arrays as attention() takes them.)doc");
  m.def("attention", &attention, arg("q"), arg("k"), arg("v"), py::kw_only(), arg("algorithm") = py::none(),
        arg("alloc") = py::none(), arg("beta") = py::none(), arg("s1") = py::none(), arg("s2") = py::none(),
        arg("seed") = py::none(), arg("spec") = py::none(), arg("format") = py::none(), arg("scale") = py::none(),
        arg("causal") = false, arg("kv_len") = py::none(), arg("mask") = py::none(), arg("pse") = py::none(),
        arg("select") = py::none(), arg("select_value") = pasa::Mask{}.select_value, arg("allow_nonfinite") = false,
        arg("threads") = py::none(), arg("kernel") = py::none(),
        R"doc(attention(q, k, v, *, algorithm="fa2", alloc="fa_fp16_fp32", beta=0.984497, s1=128, s2=128, seed=0,
          spec=None, format=None, scale=None, causal=False, kv_len=None, mask=None, pse=None, select=None,
          select_value=-1e12, allow_nonfinite=False, threads=None, kernel=None) -> (out, lse)

Run one blocked attention algorithm under a precision allocation, as pasa-attn does on .npy inputs.

q: (Sq, D), (Nq, Sq, D) or (B, Nq, Sq, D); k, v: the same rank with Nkv heads (Nq a multiple: GQA) and Skv
   keys. float16/float32/float64 arrays hold values (their dtype is their format unless format= is given,
   then they are rounded to it, nearest even); uint8/uint16 arrays hold bit patterns of format= (bf16, fp8).
algorithm: one of algorithms(): safe_softmax, online_softmax, fa1, fa2, pasa, smooth_k (SageAttention's smoothed K),
   fdpp (FlashDecoding++'s asynchronised softmax, spec={"name": "fdpp", "fdpp": {"phi", "a", "b"}}).
alloc: a preset name (presets()), the JSON text of an allocation, or a dict (see allocation()).
beta, s1, s2, seed: PASA's shift coefficient, the query and key/value block sizes, the stochastic
   rounding stream.
spec: instead of the five arguments above, a whole algorithm description (dict or JSON text, the form of
   pasa-attn --algo-json: {"name", "alloc", "s1", "s2", "seed", "pasa": {...}}).
scale: the softmax scale, > 0 (None: 1/sqrt(D)). causal: causal mask aligned to the end. kv_len: valid keys per
   batch (a list or an integer array (B,)). mask: a boolean (B, Sq, Skv) array, True = visible.
pse: a position bias [IFA] (B or 1, Nq, Sq, Skv), float values added exactly to the scaled scores.
select: [IFA]'s atten_mask, boolean (B, Sq, Skv) or (B, Nq, Sq, Skv) with the same mask for every head,
   True = the score is replaced by select_value (docs/decode.md). generate() returns all of these, so
   attention(**pasa.generate(problem)) is pasa-attn --problem's problem.
allow_nonfinite: accept NaN/inf input elements (else ValueError naming the first), to follow them through.
threads: worker threads (default: all cores); the result does not depend on it.
kernel: a kernel recipe (kernels(); docs/allocations.md "Kernel recipes"): the GPU kernel's own numerics and
   schedule, e.g. kernel="torch_flash_sm90" with fp16/bf16 q, k, v; a dict {"recipe": name, "kv_order":
   "forward", ...} overrides its fields. Given alone (not with algorithm, alloc, beta, s1, s2, seed, spec).

Returns out (float64, q's shape with D; values of the allocation's "out" format) and lse (float64, q's shape
without D; natural log, -inf for rows that see no key).)doc");

  m.def("golden", &golden, arg("q"), arg("k"), arg("v"), py::kw_only(), arg("format") = py::none(),
        arg("scale") = py::none(), arg("causal") = false, arg("kv_len") = py::none(), arg("mask") = py::none(),
        arg("pse") = py::none(), arg("select") = py::none(), arg("select_value") = pasa::Mask{}.select_value,
        arg("allow_nonfinite") = false, arg("precision_bits") = 128, arg("fast") = true, arg("threads") = py::none(),
        R"doc(golden(q, k, v, *, format=None, scale=None, causal=False, kv_len=None, mask=None, pse=None, select=None,
       select_value=-1e12, allow_nonfinite=False, precision_bits=128, fast=True, threads=None) -> dict

The MPFR-certified attention of the exact input values (arguments as in attention()), rounded to float64 only
at the end. Returns {"out", "lse" (arrays as attention() returns them), "guaranteed_bits" (the bound: every
element within 2^-guaranteed_bits, relative to the weighted mean of |V|; >= 54: faithful doubles),
"error_bound", "used_mpfr"}. precision_bits: MPFR working precision; fast: double-double path with an a
posteriori bound, MPFR where the bound is too weak. Inputs must be finite.)doc");

  m.def("uniform_baseline", &uniform_baseline, arg("q"), arg("k"), arg("v"), py::kw_only(), arg("format") = py::none(),
        arg("scale") = py::none(), arg("causal") = false, arg("kv_len") = py::none(), arg("mask") = py::none(),
        arg("pse") = py::none(), arg("select") = py::none(), arg("select_value") = pasa::Mask{}.select_value,
        arg("allow_nonfinite") = false, arg("threads") = py::none(),
        R"doc(uniform_baseline(q, k, v, *, format=None, scale=None, causal=False, kv_len=None, mask=None, pse=None,
                 select=None, select_value=-1e12, allow_nonfinite=False, threads=None)

The output that ignores the scores: every row the mean of V over the keys it sees (float64, q's shape).
Passed to metrics() as baseline= it gives the skill score.)doc");

  m.def("score_stats", &score_stats, arg("q"), arg("k"), arg("v"), py::kw_only(), arg("score_format") = "fp16",
        arg("format") = py::none(), arg("scale") = py::none(), arg("causal") = false, arg("kv_len") = py::none(),
        arg("mask") = py::none(), arg("pse") = py::none(), arg("select") = py::none(),
        arg("select_value") = pasa::Mask{}.select_value, arg("allow_nonfinite") = false, arg("threads") = py::none(),
        R"doc(score_stats(q, k, v, *, score_format="fp16", format=None, scale=None, causal=False, kv_len=None, mask=None,
            pse=None, select=None, select_value=-1e12, allow_nonfinite=False, threads=None) -> dict

Range of the exact scores QKᵀ and scale·QKᵀ over the visible entries, and how many exceed score_format's
largest finite value or round to inf/NaN in it (FA-FP16/FP32's overflow), as pasa-attn prints them.)doc");

  m.def("range_stats", &range_stats, arg("q"), arg("k"), arg("v"), py::kw_only(),
        arg("beta") = pasa::PasaOptions{}.beta, arg("s2") = 128, arg("score_format") = "fp16", arg("heads") = 0,
        arg("format") = py::none(), arg("scale") = py::none(), arg("causal") = false, arg("kv_len") = py::none(),
        arg("mask") = py::none(), arg("pse") = py::none(), arg("select") = py::none(),
        arg("select_value") = pasa::Mask{}.select_value, arg("allow_nonfinite") = false, arg("threads") = py::none(),
        R"doc(range_stats(q, k, v, *, beta=0.984497, s2=128, score_format="fp16", heads=0, format=None, scale=None,
            causal=False, kv_len=None, mask=None, pse=None, select=None, select_value=-1e12, allow_nonfinite=False,
            threads=None) -> list

PASA's range reduction per head (the paper's Fig. 5, Figs. 11-14), as pasa-attn --ranges prints it: one dict
per (batch, query head) (the first `heads` heads of batch 0; 0: all) with the ranges of K and of the shifted
keys K' = M·K (Eq. 11, per block of s2 keys, 1/sqrt(D) or scale inside), of the exact scores S = QKᵀ (unscaled)
and of the shifted scores S' = QK'ᵀ, and how many S and S' round to inf in score_format (k_min, k_max,
kp_min, kp_max, s_min, s_max, sp_min, sp_max, scores, s_overflow, sp_overflow). v is not read (the
signature is score_stats', so that range_stats(**generate(problem)) works); masks, pse and select are refused.)doc");

  m.def("metrics", &metrics, arg("out"), arg("golden"), arg("baseline") = py::none(),
        R"doc(metrics(out, golden, baseline=None) -> dict

Accuracy of an attention output against the golden (golden: the array, or the dict golden() returns):
rel_rmse (PASA Eq. 19: ||out - golden||_2 / ||golden||_2; "rmse" is the same number under the key
pasa-attn --json uses, kept as an alias), rmse_finite, NaN/inf counts and percentages, rows with NaN/inf, max_abs_err, max_rel_err,
cosine, and with baseline= (uniform_baseline()) rmse_uniform_baseline, rmse_centred and skill (else NaN).
The keys and values of pasa-attn --json's "metrics" (and rel_rmse); NaN and infinities as floats.)doc");

  m.def("generate", &generate, arg("problem"), py::kw_only(), arg("threads") = py::none(),
        R"doc(generate(problem, *, threads=None) -> dict

Seeded inputs from a problem description (a dict or its JSON text: {"shape": {"B", "Nq", "Nkv", "Sq", "Skv",
"D"}, "format", "scale", "causal", "kv_len", "seed", "generator": {"kind": "uniform"|"hybrid"|"resonance",
"x0", "am", ...}, "q"/"k"/"v": {...},
"pse": {generator keys} or {"npy": file}, "select": {"p", "value"} or {"npy": file, "value"}, "kv_len": [...] or
{"npy": file}; relative file names from the working directory), the same bits as pasa-attn --problem.
Returns {"q", "k", "v" (float64 (B, N, S, D), values of "format"), "format", "scale", "causal", "kv_len",
"pse" (float64 (B or 1, Nq, Sq, Skv) or None), "select" (bool (B, Sq, Skv) or None), "select_value",
"allow_nonfinite"}: pass it on as pasa.attention(**inputs, algorithm=...), pasa.golden(**inputs).
A paged problem ({"kind": "paged", "block_size", "sequences": [...], ...}, docs/decode.md) returns {"q",
"k_cache", "v_cache" (float64 (num_blocks, Nkv, block_size, D)), "sequences" (dicts with the resolved
"block_table"), "format", "scale"}: the arguments of unified_attention(), unified_golden(), ...)doc");

  m.def("unified_attention", &unified_attention_py, arg("q"), arg("k_cache"), arg("v_cache"), arg("sequences"),
        py::kw_only(), arg("algorithm") = py::none(), arg("alloc") = py::none(), arg("beta") = py::none(),
        arg("s1") = py::none(), arg("s2") = py::none(), arg("seed") = py::none(), arg("spec") = py::none(),
        arg("format") = py::none(), arg("scale") = py::none(), arg("threads") = py::none(),
        R"doc(unified_attention(q, k_cache, v_cache, sequences, *, algorithm="fa2", alloc="fa_fp16_fp32", beta=0.984497,
                  s1=128, s2=128, seed=0, spec=None, format=None, scale=None, threads=None) -> (out, lse)

Unified attention ([UA]) over a paged KV cache, as pasa-attn runs a "kind": "paged" problem (docs/decode.md):
a batch of sequences, each with q_len new tokens at the end of ctx_len tokens held in the cache blocks its
block table names; each new token attends causally to its context in up to three parts (shared prefix,
unique cached blocks, the new tokens) merged in the allocation's merge stage. generate() of a paged problem
returns every argument: pasa.unified_attention(**pasa.generate(problem), spec=...).
q: (1, Nq, Σ q_len, D) (or (Nq, Σ q_len, D)), the sequences' new tokens in order. k_cache, v_cache:
   (num_blocks, Nkv, block_size, D). Dtypes and format= as attention(); the cache's format must fit fp32.
sequences: a list of dicts {"q_len", "ctx_len", "shared_blocks" (optional, default 0), "block_table"}.
algorithm, alloc, beta, s1, s2, seed, spec: as attention(); the algorithm must be fa2 or pasa.
Returns out (float64 (1, Nq, Σ q_len, D), values of the allocation's "out" format) and lse (1, Nq, Σ q_len).)doc");

  m.def("unified_golden", &unified_golden_py, arg("q"), arg("k_cache"), arg("v_cache"), arg("sequences"),
        py::kw_only(), arg("format") = py::none(), arg("scale") = py::none(), arg("precision_bits") = 128,
        arg("fast") = true, arg("threads") = py::none(),
        R"doc(unified_golden(q, k_cache, v_cache, sequences, *, format=None, scale=None, precision_bits=128, fast=True,
               threads=None) -> dict

The MPFR golden of unified_attention()'s batch (arguments as there): every sequence's golden on its gathered
dense inputs, concatenated. Returns the dict golden() returns (guaranteed_bits: the worst sequence's).)doc");

  m.def("unified_baseline", &unified_baseline_py, arg("q"), arg("k_cache"), arg("v_cache"), arg("sequences"),
        py::kw_only(), arg("format") = py::none(), arg("scale") = py::none(), arg("threads") = py::none(),
        R"doc(unified_baseline(q, k_cache, v_cache, sequences, *, format=None, scale=None, threads=None)

uniform_baseline() of unified_attention()'s batch: every new token's row the mean of V over the keys it
sees (float64, q's shape); metrics(out, golden, baseline) then gives pasa-attn's metrics.)doc");

  m.def("unified_score_stats", &unified_score_stats_py, arg("q"), arg("k_cache"), arg("v_cache"), arg("sequences"),
        py::kw_only(), arg("score_format") = "fp16", arg("format") = py::none(), arg("scale") = py::none(),
        arg("threads") = py::none(),
        R"doc(unified_score_stats(q, k_cache, v_cache, sequences, *, score_format="fp16", format=None, scale=None,
                    threads=None) -> dict

score_stats() of unified_attention()'s batch (over every sequence's visible scores), as pasa-attn prints
them for a paged problem.)doc");

  m.def("gemm", &gemm_values, arg("a"), arg("b"), py::kw_only(), arg("a_format") = py::none(),
        arg("b_format") = py::none(), arg("acc") = "fp32", arg("out") = "fp32", arg("model") = "ordered",
        R"doc(gemm(a, b, *, a_format=None, b_format=None, acc="fp32", out="fp32", model="ordered") -> float64 array

C = A·B under a GEMM model (docs/tensor-cores.md), as pasa-gemm computes it: each C[i, j] accumulated over k
in order as the model says, then rounded once to `out` (nearest even).
a: (M, K) or (batch, M, K); b: (K, N) or (batch, K, N). float16/32/64 arrays hold values (rounded to a_format /
   b_format when given); uint8/uint16 arrays hold bit patterns of a_format / b_format (b_format: a_format's).
acc: the accumulator format (ordered, chunked, every_op). out: the output format.
model: "ordered", "chunked", "every_op", "h100" (the H100 tensor-core model of a's format, as the _h100
   presets: fp8 inputs get the FP8 model), a tensor-core model name ("h100_fp16", "h100_e4m3", "exact", ...),
   or the allocation's "gemm" object (dict or JSON text).
Returns C (float64, (M, N) or (batch, M, N)), values of `out`.)doc");

  m.def("table3_initial_betas", &pasa::table3_initial_betas,
        "table3_initial_betas() -> list of float\n\nThe initial betas of the paper's Table 3.");

  m.def("solve_beta", &solve_beta, arg("beta0"), py::kw_only(), arg("n") = 128, arg("format") = "fp16",
        arg("sqrt_d") = 0, arg("tol") = 1e-8, arg("max_iter") = 1000,
        R"doc(solve_beta(beta0, *, n=128, format="fp16", sqrt_d=0, tol=1e-8, max_iter=1000) -> dict or list of dict

PASA's optimal shift coefficient (Appendix A-C, Eq. 22) from beta0 (a number, or a list: one row each), as
pasa-beta computes it: {"beta0", "inva0", "inva_r0", "rel_err0", "beta", "inva", "inva_r", "rel_err",
"iterations"}. n: the block size s2; format: the format M's entries are rounded to; sqrt_d > 0 rounds the
entries of M/sqrt(D) (Eq. 10). solve_beta(table3_initial_betas()) is the paper's Table 3.)doc");

  m.def("attribute", &attribute, arg("problem") = py::none(), py::kw_only(), arg("q") = py::none(),
        arg("k") = py::none(), arg("v") = py::none(), arg("format") = py::none(), arg("scale") = py::none(),
        arg("causal") = false, arg("kv_len") = py::none(), arg("mask") = py::none(), arg("pse") = py::none(),
        arg("select") = py::none(), arg("select_value") = pasa::Mask{}.select_value, arg("allow_nonfinite") = false,
        arg("algorithm") = py::none(),
        arg("alloc") = py::none(), arg("beta") = py::none(), arg("s1") = py::none(), arg("s2") = py::none(),
        arg("seed") = py::none(), arg("spec") = py::none(), arg("invariance") = false, arg("threads") = py::none(),
        R"doc(attribute(problem=None, *, q=None, k=None, v=None, format=None, scale=None, causal=False, kv_len=None,
          mask=None, pse=None, select=None, select_value=-1e12, allow_nonfinite=False, algorithm="pasa", alloc="pasa_fp16", beta=0.984497, s1=128, s2=128, seed=0, spec=None,
          invariance=False, threads=None) -> dict

Which rounding stage of the allocation makes the error (docs/attribution.md), as pasa-attribute --json:
each stage lifted alone to fp64, and alone kept in its format. The inputs: a problem (dict or JSON text, as
generate() takes) or the arrays q, k, v with the mask options of attention(). The algorithm: as attention().
invariance=True adds PASA's invariance view (given beta, exact M, optimised beta).
Returns {"problem" (with a problem), "algorithm", "stages": [{"stage", "format", "rmse_base", "rmse_fp64",
"rmse_lifted", "reduction", "share", "rmse_only", "share_only", "nan_pct_base", "nan_pct_lifted",
"nan_pct_only"}, ...], "invariance" (with invariance=True)}.)doc");

  m.def("sweep", &sweep, arg("config"), arg("out_dir") = py::none(), py::kw_only(), arg("threads") = 1,
        arg("resume") = false, arg("shard") = py::none(),
        R"doc(sweep(config, out_dir=None, *, threads=1, resume=False, shard=None) -> dict

Run a sweep (grid x seeds x algorithms) as pasa-sweep does: config is a dict (the JSON schema of
docs/sweeps.md) or the path of a config file; out_dir overrides the config's outputs.dir; shard "I/N" runs
every N-th problem. Writes results.csv and summary.json there and returns {"csv", "summary" (None for a
shard), "cases_run", "cases_reused", "digest" (the table's mean RMSE and NaN % per grid point)}.)doc");
}
