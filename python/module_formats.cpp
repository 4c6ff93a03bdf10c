// The module's formats and rounding (formats, format_info, round, encode, decode): numpy arrays of any dtype,
// shape and memory order rounded, encoded and decoded by the library's span kernels (numeric/round.hpp).
#include "module_support.hpp"
#include "pasa/io/format_table.hpp"
#include "pasa/numeric/round.hpp"

namespace pasa_py {
namespace {

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
  d["nan"] = f.has_nan();
  d["signed"] = f.is_signed;
  d["zero"] = f.has_zero;
  d["max_negative"] = f.max_negative();
  d["tapered"] = f.tapered();
  return d;
}

// ---------------------------------------------------------------------------------------------------------
// numpy's narrow dtypes. float16 is numpy's own; bfloat16 and the fp8 formats are ml_dtypes' (optional: where
// it is not importable their values travel as bit patterns, uint16 / uint8). An ml_dtypes array is
// recognised by its dtype name, so nothing here needs ml_dtypes to be installed.

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
// name (bfloat16, float8_e4m3fn, float8_e5m2; without ml_dtypes see bits_by_name).
// Unsigned dtypes hold the patterns of `f` itself.
// bits_by_name: whether an ml_dtypes name gives bit patterns where ml_dtypes is missing (encode: its result
// is patterns anyway), or is refused (round: its result type must not depend on what is installed).
OutputDtype output_dtype(const py::object& dtype, const pasa::Format& f, bool bits_by_name) {
  std::string name;
  py::dtype dt;
  if (py::isinstance<py::str>(dtype) && ml_dtypes_format(dtype.cast<std::string>())) {
    name = dtype.cast<std::string>();
    if (const auto ml = ml_dtypes()) dt = py::dtype::from_args(ml->attr(name.c_str()));
    else if (bits_by_name) return {uint_dtype(storage_bytes(pasa::format_by_name(ml_dtypes_format(name)))),
                                   pasa::format_by_name(ml_dtypes_format(name)), true};
    else  // (round: the same type whatever is installed; bit patterns only when asked for)
      throw InputError(fmt::format("dtype: \"{}\" arrays need ml_dtypes, which is not installed; give dtype=\"float32\" "
                                   "for its values, or numpy.{} for its bit patterns (or pasa.encode)", name,
                                   text(uint_dtype(storage_bytes(pasa::format_by_name(ml_dtypes_format(name)))).attr("name"))));
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
                        const py::object& dtype, const py::object& out, const std::string& convention) {
  const std::uint64_t seed = int_arg("seed", seed_arg);
  const pasa::Format f = named("format", format, pasa::format_by_name);
  const pasa::RoundOptions opt{named("mode", mode, pasa::round_mode_by_name),
                               named("overflow", overflow, pasa::overflow_by_name), flush_input,
                               flush_output, named("convention", convention, pasa::convention_by_name)};
  const bool scalar = !py::isinstance<py::array>(x) && out.is_none() && dtype.is_none() &&
                      (py::isinstance<py::float_>(x) || py::isinstance<py::int_>(x));
  const py::array a = float_values(x, "x");
  OutputDtype target{py::dtype(a.itemsize() == 4 && values_fit_float32(f) ? "float32" : "float64"),
                     pasa::format_by_name(a.itemsize() == 4 && values_fit_float32(f) ? "fp32" : "fp64")};
  if (!dtype.is_none()) {
    target = output_dtype(dtype, f, false);
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
    target = output_dtype(dtype, f, true);
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
  // float16 and ml_dtypes arrays (and torch's bfloat16 tensors, as their marked float32 values: module_support.hpp's
  // TensorArg) are values of their own format: decoded as that format only. Their patterns read as another
  // format's would change the values (float16 1.5 read as bf16 is 0.125).
  std::optional<std::string> own;
  if (py::hasattr(bits, "__pasa_format__")) own = text(bits.attr("__pasa_format__"));
  else if (a.dtype().kind() == 'f' && a.itemsize() == 2) own = "fp16";
  else if (const char* ml = ml_dtypes_format(dtype_name(a))) own = ml;
  if (own) {
    if (!(pasa::format_by_name(*own) == f))
      throw InputError(fmt::format("bits: a {} array holds values of {}, not bit patterns of {}; give format=\"{}\", or "
                                   "the patterns as unsigned integers (numpy: x.view(numpy.uint{}))", dtype_name(a),
                                   *own, f.name, *own, 8 * a.itemsize()));
    if (py::hasattr(bits, "__pasa_format__"))  // (the values themselves)
      return py::array_t<double>(numpy().attr("array")(a, py::arg("dtype") = "float64"));
    a = a.attr("view")(uint_dtype(a.itemsize()));
  }
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

}  // namespace

void bind_formats(py::module_& m) {
  using py::arg;
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
        arg("out") = py::none(), arg("convention") = "exact",
        R"doc(round(x, format, *, mode="rne", overflow="ieee", flush_input=False, flush_output=False, seed=0, dtype=None, out=None, convention="exact")

Round every element of x to `format` once (from its exact value), as pasa-round does.

x: a numpy array of any shape, order and strides: float16, float32 or float64, or ml_dtypes' bfloat16,
   float8_e4m3fn, float8_e5m2; or a Python number or list (read as float64). Contiguous input is read in
   place; other input is copied into the result first.
format: a format name (see formats(); numpy's and ml_dtypes' names too: "float16", "bfloat16",
   "float8_e4m3fn", ...), a custom "p=<bits>,emax=<e>[,subnormals=0]", or a numpy / ml_dtypes dtype.
mode: "rne" (nearest, ties to even), "rna" (nearest, ties away from zero), "rz", "ru", "rd", "ro" (to odd),
   "sr" (stochastic), "hr" (HiFloat8's hybrid: ties away in the full-precision binades, stochastic in the
   tapered ones).
overflow: "ieee" (inf, or NaN for fp8_e4m3fn and e8m0; fp6, fp4 and the integers have neither and saturate)
   or "saturate" (clamp to the largest finite value).
convention: "exact" (the nearest value of the format; NaN stays NaN), "ml_dtypes" or "torch": those
   libraries' casts where they differ (e8m0's bottom code, fp6/fp4 NaN, e8m0's sign and zero; see
   docs/formats-and-rounding.md, "Conventions").
flush_input / flush_output: DAZ / FTZ (subnormal inputs / results become zero).
seed: the random stream of stochastic rounding: one draw per element, in C order, so a given seed gives
   the same bits as pasa-round --seed on the same values.
dtype: the result's dtype. None: float32 for float32, float16 and ml_dtypes x when every value of the
   format is a float32 (fp16, bf16, fp8, tf32, fp32, ...), else float64. numpy.float16, float32, float64:
   those (every value of the format must be one of the dtype's, else ValueError). ml_dtypes.bfloat16,
   float8_e4m3fn, float8_e5m2, float8_e8m0fnu, float6_e2m3fn, float6_e3m2fn, float4_e2m1fn or their names:
   ml_dtypes arrays (ValueError where ml_dtypes is not installed: the type does not change with what is
   installed). An unsigned dtype: the format's storage bit patterns (as encode()). A torch dtype: a torch
   tensor of it. Given format as a dtype (round(x, numpy.float16)), dtype defaults to it.
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

The values of storage bit patterns of `format` (unsigned integer array, any shape; or Python ints). A
float16 or ml_dtypes array (or a torch bfloat16 tensor) holds values of its own format: decoded as that
format only (another format is a ValueError: float16 1.5 read as bf16 patterns would be 0.125). A pattern wider than the format, or one the format does not
have, raises ValueError naming the element. For fp16, decode(b, "fp16") equals
b.view(numpy.float16).astype(numpy.float64).)doc");
}

}  // namespace pasa_py
