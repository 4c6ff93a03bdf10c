// What the parts of the extension module pasa._pasa (module_*.cpp, bound by pasa_module.cpp) share: argument
// parsing, Ctrl-C during a long call, JSON between Python objects and the library, numpy arrays in and out,
// the attention inputs (q, k, v with the mask options), the algorithm and golden options. Definitions that
// are not templates or classes are in module_support.cpp.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>  // in every part: the casters of std::optional and std::vector must be the same in each

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "pasa/attention/algorithm.hpp"
#include "pasa/core/cancel.hpp"
#include "pasa/core/error.hpp"
#include "pasa/exact/golden.hpp"
#include "pasa/io/json_check.hpp"
#include "pasa/io/npy.hpp"
#include "pasa/io/tensor_io.hpp"
#include "pasa/io/user_tensors.hpp"
#include "pasa/numeric/format.hpp"

namespace pasa_py {

namespace py = pybind11;
using nlohmann::json;
using pasa::InputError;

// The parts of the module, each binding its functions into m; pasa_module.cpp calls them in this order.
void bind_block_scale(py::module_& m);  // module_blockscale.cpp: block_schemes, block_quantise
void bind_formats(py::module_& m);    // module_formats.cpp: formats, rounding, encode and decode
void bind_attention(py::module_& m);  // module_attention.cpp: algorithms, presets, kernels, GPU math, attention
void bind_exact(py::module_& m);      // module_exact.cpp: golden, uniform_baseline, score_stats, metrics
void bind_paged(py::module_& m);      // module_paged.cpp: generate and the paged-KV (unified) functions
void bind_study(py::module_& m);      // module_study.cpp: gemm, beta solver, attribution, range statistics, sweeps

py::module_ numpy();

std::string type_name(const py::handle& o);

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
std::uint64_t int_arg(const char* name, const py::handle& o, std::uint64_t lo = 0, std::uint64_t hi = UINT64_MAX);
std::optional<std::uint64_t> opt_int_arg(const char* name, const py::handle& o, std::uint64_t lo = 0,
                                         std::uint64_t hi = UINT64_MAX);
std::optional<std::size_t> opt_size_arg(const char* name, const py::handle& o);

// A scale argument: None is the default 1/sqrt(D) (the library's 0); a given scale is finite and > 0, so
// that scale=0 is not silently the default.
double scale_value(const std::optional<double>& scale);

// A threads= argument: None is every core; else an integer in [1, 4096] (the programs' --threads).
int threads_arg(const py::handle& o);

// A library name passed as argument `arg`: an unknown one is reported with the argument's name, as the
// programs report it with the option's ("format: unknown format \"fp17\"; known formats: ...").
template <class ByName>
auto named(const char* arg, const std::string& name, ByName by_name) {
  return pasa::at_place(arg, [&] { return by_name(name); });
}

// ---------------------------------------------------------------------------------------------------------
// JSON between Python objects and the library's readers/writers (nlohmann::json), walked directly so that
// NaN and infinities survive as floats.

// o as JSON, `where` naming it in messages (a dict holding itself, or nested too deep, is refused).
json to_json_value(const py::handle& o, const std::string& where);

// A dict, or its JSON text; `what` names it in messages ("problem", "config").
json json_argument(const py::handle& o, const std::string& what);

// An allocation argument: a preset name, JSON text of an allocation object, or a dict.
json alloc_argument(const py::handle& o);

py::object to_python(const json& j);

// metrics_json writes NaN and infinities as the strings "nan", "inf", "-inf" (JSON has none); a Python dict
// holds them as floats.
py::dict numbers_as_floats(const json& j);

// ---------------------------------------------------------------------------------------------------------
// numpy arrays in and out

std::string text(const py::handle& h);
std::string dtype_name(const py::array& a);

py::array as_array(const py::handle& o);

// A C-contiguous, native-byte-order view of a (a copy only when a is not one already).
py::array c_native(const py::array& a);

// The library format named like an ml_dtypes dtype ("bfloat16", "float8_e4m3fn", "float8_e5m2"), or nullptr.
const char* ml_dtypes_format(const std::string& dtype_name);

// An attention tensor argument: a C-contiguous, native-order numpy array of a dtype the library reads
// (float16/32/64 values, uint8/uint16 bit patterns), read in place by tensor_from_array.
struct TensorArg {
  py::array array;
  pasa::NpyDtype dtype;
  std::vector<std::size_t> shape;
  std::string where;
  std::optional<std::string> implied_format;  // an ml_dtypes array: its bit patterns, of this format

  TensorArg(const py::handle& obj, std::string where_) : array(c_native(as_array(obj))), where(std::move(where_)) {
    // A torch bfloat16 tensor comes from the package (python/pasa/_tensors.py) as its float32 values (exact)
    // marked with their format, as an ml_dtypes array is by its dtype: the same inputs as bf16 patterns.
    if (py::hasattr(obj, "__pasa_format__")) implied_format = text(obj.attr("__pasa_format__"));
    else if (const char* ml = ml_dtypes_format(dtype_name(array))) {
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

// A tensor returned in the rank its inputs had: (S, D), (N, S, D) or (B, N, S, D), and the lse without D.
py::array_t<double> tensor_out(pasa::Tensor&& t, std::size_t rank);
py::array_t<double> lse_out(std::vector<double>&& lse, const pasa::Shape& s, std::size_t rank);

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
  std::vector<py::ssize_t> keep_shape;  // the mask array's shape (checked against (B, Sq, Skv) in inputs())
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
      keep_shape.assign(m.shape(), m.shape() + m.ndim());
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
    // The shape, not only the element count: a transposed (B, Skv, Sq) mask has B·Sq·Skv elements too, and
    // read as (B, Sq, Skv) it would silently mask the wrong scores.
    // With one batch, (Sq, Skv) is as unambiguous.
    const auto B = static_cast<py::ssize_t>(dims.B), Sq = static_cast<py::ssize_t>(dims.Sq),
               Skv = static_cast<py::ssize_t>(dims.Skv);
    if (!keep.empty() && keep_shape != std::vector<py::ssize_t>{B, Sq, Skv} &&
        !(B == 1 && keep_shape == std::vector<py::ssize_t>{Sq, Skv})) {
      std::string shape;
      for (py::ssize_t d : keep_shape) shape += (shape.empty() ? "" : ", ") + std::to_string(d);
      if (keep_shape.size() == 1) shape += ",";
      throw InputError(fmt::format("mask: shape ({}) is not (B, Sq, Skv) = ({}, {}, {}); True = visible", shape, dims.B,
                                   dims.Sq, dims.Skv));
    }
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

// The algorithm as pasa-attn (and pasa-attribute) build it: from `spec` (an AlgorithmSpec dict or JSON text,
// like --algo-json) or from the separate arguments (like --algorithm, --alloc, --s1, --s2, --beta).
pasa::AlgorithmSpec algorithm_spec(const char* function, const py::object& spec,
                                   const std::optional<std::string>& algorithm, const py::object& alloc,
                                   const std::optional<double>& beta, const std::optional<std::size_t>& s1,
                                   const std::optional<std::size_t>& s2, const std::optional<std::uint64_t>& seed,
                                   const char* default_algorithm, const char* default_alloc);

// The golden's options from Python's arguments, and its result as Python sees it (golden, unified_golden).
pasa::GoldenOptions golden_options(const py::object& precision_bits, bool fast, const py::object& threads);
py::dict golden_dict(pasa::Golden&& g, const pasa::Shape& shape, std::size_t rank);

}  // namespace pasa_py
