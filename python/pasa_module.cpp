// The extension module pasa._pasa (python/pasa/ wraps it as the package pasa): the library for numpy users, through pybind11. Every function converts
// its arguments (numpy arrays, dicts, names), calls the same library functions as the command-line programs
// (apps/) and converts the result back; no numerics live here. Errors: the library's InputError (a bad name,
// value, shape, JSON key) becomes ValueError with the library's message, as the programs print it after
// "error: "; any other C++ exception becomes RuntimeError (the programs' "internal error"). The GIL is released
// while the library runs, so other Python threads go on meanwhile.
//
// The module's functions are bound by its parts, each a file of related functions with the helpers only it
// uses, one per layer: module_formats.cpp, module_blockscale.cpp (numeric), module_attention.cpp, module_paged.cpp
// (attention), module_exact.cpp (golden and metrics), module_study.cpp (analysis and study); what they share
// is in module_support.hpp. This file holds the module itself: its docstring, the error translation and the order.
#include <pybind11/pybind11.h>

#include "module_support.hpp"

namespace py = pybind11;
using pasa::InputError;

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

  // Each docstring opens with its signature, defaults spelt out (pybind11's would show None for them). The
  // options hold for whatever is bound while they live: every part's functions.
  py::options options;
  options.disable_function_signatures();

  pasa_py::bind_formats(m);
  pasa_py::bind_block_scale(m);
  pasa_py::bind_attention(m);
  pasa_py::bind_exact(m);
  pasa_py::bind_paged(m);
  pasa_py::bind_study(m);
}
