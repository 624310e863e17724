// What the files of the Python binding share: the exceptions and how library errors become
// them, and the functions that add each part of the module. The binding only converts
// arguments and results and calls the library, as the CLI does (docs/python.md).
#ifndef VSTACK_TOOLS_PYTHON_BINDING_H_
#define VSTACK_TOOLS_PYTHON_BINDING_H_

#include <pybind11/pybind11.h>

#include <cstdint>
#include <optional>
#include <string>
#include <system_error>

#include "lib/errors.h"

namespace vstack::python {

namespace py = pybind11;

// Releases the GIL for its scope, as py::gil_scoped_release does, and takes it back at its end
// safely at interpreter exit: a thread other than the main one that would take it back once the
// interpreter is exiting (a daemon thread inside a call when the main thread ends) is parked
// for good instead, where Python up to 3.13 would end it with pthread_exit(), which from a C++
// destructor is std::terminate() (gil.cc). Use it, never py::gil_scoped_release.
class GilRelease {
 public:
  GilRelease();
  ~GilRelease();
  GilRelease(const GilRelease&) = delete;
  GilRelease& operator=(const GilRelease&) = delete;

 private:
  PyThreadState* state_;
};

// Takes the GIL for its scope (on any thread, as py::gil_scoped_acquire does), with
// GilRelease's care at exit. Use it, never py::gil_scoped_acquire.
class GilAcquire {
 public:
  GilAcquire();
  ~GilAcquire();
  GilAcquire(const GilAcquire&) = delete;
  GilAcquire& operator=(const GilAcquire&) = delete;

 private:
  PyGILState_STATE state_;
};

// The interpreter's main thread (threading.main_thread().ident), set when the module loads:
// the one thread never parked, since it finalizes the interpreter (until CloseExitGate()).
void SetMainThread(unsigned long ident);

// From the module's atexit handler (vstack/__init__.py), before the interpreter finalizes, on
// the thread that will finalize it (from now on the one never parked): GilRelease and
// GilAcquire park every other thread that would take the GIL; the threads already taking it
// get it first. Called with the GIL held.
void CloseExitGate();

// Creates vstack.SpecError(ValueError) and vstack.IoError(OSError) in `m`.
void AddExceptions(py::module_& m);

// Raises the exception for a control-path error (open, create, check...): SpecError for a
// request the library refuses (Errc::kInvalidArgument, kNotFound: a bad spec, option or
// format), IoError for everything else, with the errno the error maps to. The message is
// Error::ToString(), the words the CLI prints after "vstack COMMAND: ".
[[noreturn]] void Raise(const Error& e);

// Raises the exception for a data-path status of `what` ("read of 4096 bytes at offset 0"):
// ValueError for a request the device refuses (out of range, misaligned, invalid), ValueError
// "I/O operation on a closed device" after close(), IoError with the errno otherwise.
// `block` and `size` complete the messages of misaligned and out-of-range requests.
[[noreturn]] void RaiseIo(std::error_code ec, const std::string& what, uint32_t block,
                          uint64_t size);

// A Python int argument that must not be negative, as uint64_t; ValueError names `what`.
uint64_t NonNegative(int64_t v, const char* what);

// An offset, length, size, seed or count: any Python int (or object with __index__, such as a
// numpy integer) from 0 to 2**64-1, as uint64_t. ValueError naming `what` for a negative value
// or one beyond 64 bits; TypeError for anything that is not an integer, and for a bool (Python's
// or numpy's). An exception raised by the object's own __index__ propagates as it is.
uint64_t ByteCount(py::handle v, const char* what);

// True if `v` is a bool: Python's, or numpy's (numpy.bool_), told by its type's name so that
// numpy need not be imported.
bool IsBool(py::handle v);

// A flag argument (read_only, overwrite, strict...): True or False, or a numpy bool; anything
// else, 1 and None included, raises TypeError "WHAT: expected a bool, not TYPE".
bool Flag(py::handle v, const char* what);

// A path or spec as os.fspath(v) gives it (a str, or a bytes path's bytes); nullopt for an
// object that is neither a str, bytes nor os.PathLike. One that holds a NUL byte raises
// ValueError "embedded null byte", as os.open() does: the C library would read it only up to
// the NUL, and another file would be used ('b.raw\0.evil' would create 'b.raw').
std::optional<std::string> FsPath(py::handle v);

// The JSON text `json` as Python objects (json.loads).
py::object FromJson(const std::string& json);

// An int argument taken as it is and converted by the function (ByteCount), so that the errors
// name the argument; help() shows it as `int`.
struct IntArg {
  py::object object;
};

// A flag argument taken as it is and converted by the function (Flag), so that the errors
// name the argument; help() shows it as `bool`.
struct FlagArg {
  py::object object;
};
inline bool Flag(const FlagArg& v, const char* what) { return Flag(v.object, what); }

// A path or spec argument: a str or any os.PathLike (pathlib.Path), as os.fspath() gives it
// (FsPath: one holding a NUL byte raises ValueError).
struct PathArg {
  std::string value;
};

void AddDevice(py::module_& m);
void AddImageTools(py::module_& m);
void AddBench(py::module_& m);  // bench.cc: vstack.bench(), vstack.space()

}  // namespace vstack::python

namespace pybind11::detail {
template <>
struct type_caster<vstack::python::IntArg> {
  PYBIND11_TYPE_CASTER(vstack::python::IntArg, const_name("int"));
  bool load(handle src, bool /*convert*/) {
    value.object = reinterpret_borrow<object>(src);
    return true;
  }
  static handle cast(const vstack::python::IntArg& v, return_value_policy, handle) {
    return v.object.inc_ref();
  }
};

template <>
struct type_caster<vstack::python::FlagArg> {
  PYBIND11_TYPE_CASTER(vstack::python::FlagArg, const_name("bool"));
  bool load(handle src, bool /*convert*/) {
    value.object = reinterpret_borrow<object>(src);
    return true;
  }
  static handle cast(const vstack::python::FlagArg& v, return_value_policy, handle) {
    return v.object.inc_ref();
  }
};

template <>
struct type_caster<vstack::python::PathArg> {
  PYBIND11_TYPE_CASTER(vstack::python::PathArg, const_name("Union[str, os.PathLike]"));
  bool load(handle src, bool /*convert*/) {
    // Not a path: pybind11's TypeError, which shows the signature.
    std::optional<std::string> path = vstack::python::FsPath(src);
    if (!path) return false;
    value.value = std::move(*path);
    return true;
  }
  static handle cast(const vstack::python::PathArg& v, return_value_policy policy, handle parent) {
    return make_caster<std::string>::cast(v.value, policy, parent);
  }
};
}  // namespace pybind11::detail

#endif  // VSTACK_TOOLS_PYTHON_BINDING_H_
