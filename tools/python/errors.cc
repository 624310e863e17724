// The binding's exceptions: vstack.SpecError(ValueError) with the CLI's message, and
// vstack.IoError(OSError) carrying an errno; how library errors map onto them.
#include <cerrno>
#include <string_view>

#include "nbd/nbd_export.h"
#include "tools/python/binding.h"

namespace vstack::python {
namespace {

PyObject* g_spec_error = nullptr;
PyObject* g_io_error = nullptr;

// A spec, option or format refused (Errc::kBadSpec for a stack spec), not an I/O failure.
bool IsRefusal(std::error_code ec) {
  return ec == make_error_code(Errc::kBadSpec) || ec == make_error_code(Errc::kInvalidArgument) ||
         ec == make_error_code(Errc::kNotFound);
}

[[noreturn]] void RaiseOs(int err, const std::string& message) {
  // OSError(errno, strerror) sets .errno and .strerror.
  PyErr_SetObject(g_io_error, py::make_tuple(err, message).ptr());
  throw py::error_already_set();
}

}  // namespace

void AddExceptions(py::module_& m) {
  g_spec_error = PyErr_NewExceptionWithDoc(
      "vstack.SpecError",
      "A stack spec, option or image format the library refuses; the message is the CLI's, with "
      "its suggestion (\"did you mean dedup?\").",
      PyExc_ValueError, nullptr);
  g_io_error = PyErr_NewExceptionWithDoc(
      "vstack.IoError",
      "An I/O error of the stack: .errno is the OS error, or the errno a vstack error maps to "
      "(corruption: EIO, read-only: EROFS, no space: ENOSPC...).",
      PyExc_OSError, nullptr);
  if (g_spec_error == nullptr || g_io_error == nullptr) throw py::error_already_set();
  m.attr("SpecError") = py::handle(g_spec_error);
  m.attr("IoError") = py::handle(g_io_error);
}

void Raise(const Error& e) {
  if (e.code.category() == vstack_category() && IsRefusal(e.code)) {
    PyErr_SetString(g_spec_error, e.ToString().c_str());
    throw py::error_already_set();
  }
  RaiseOs(nbd::ErrnoFor(e.code), e.ToString());
}

void RaiseIo(std::error_code ec, const std::string& what, uint32_t block, uint64_t size) {
  if (ec == make_error_code(Errc::kCancelled)) {
    throw py::value_error("I/O operation on a closed device");
  }
  if (ec == make_error_code(Errc::kOutOfRange)) {
    throw py::value_error(what + ": beyond the end of the device (" + std::to_string(size) +
                          " bytes)");
  }
  if (ec == make_error_code(Errc::kUnaligned)) {
    throw py::value_error(what + ": offset and length must be multiples of the block size (" +
                          std::to_string(block) + " bytes)");
  }
  if (ec == make_error_code(Errc::kInvalidArgument) ||
      ec == make_error_code(Errc::kBadBufferAlignment)) {
    throw py::value_error(what + ": " + ec.message());
  }
  RaiseOs(nbd::ErrnoFor(ec), what + ": " + ec.message());
}

uint64_t NonNegative(int64_t v, const char* what) {
  if (v < 0) throw py::value_error(std::string(what) + " must not be negative");
  return static_cast<uint64_t>(v);
}

bool IsBool(py::handle v) {
  if (PyBool_Check(v.ptr())) return true;
  const std::string_view type = Py_TYPE(v.ptr())->tp_name;
  return type == "numpy.bool_" || type == "numpy.bool";  // numpy 1 and numpy 2
}

bool Flag(py::handle v, const char* what) {
  if (!IsBool(v)) {
    throw py::type_error(std::string(what) + ": expected a bool, not " + Py_TYPE(v.ptr())->tp_name);
  }
  return PyObject_IsTrue(v.ptr()) == 1;
}

uint64_t ByteCount(py::handle v, const char* what) {
  // A bool is an int to Python, but True as an offset is a mistake, not byte 1: refused, as
  // numpy refuses it as an index (numpy's own bool included).
  if (IsBool(v)) {
    throw py::type_error(std::string(what) + ": expected an int, not " + Py_TYPE(v.ptr())->tp_name);
  }
  // PyNumber_Index: ints, and objects that are integers (numpy.int64); a float or a str is a
  // TypeError, as in Python's own I/O.
  if (!PyIndex_Check(v.ptr())) {
    throw py::type_error(std::string(what) + ": expected an int, not " + Py_TYPE(v.ptr())->tp_name);
  }
  PyObject* index = PyNumber_Index(v.ptr());
  if (index == nullptr) throw py::error_already_set();  // raised by the object's __index__

  auto number = py::reinterpret_steal<py::int_>(index);
  if (number < py::int_(0)) {
    throw py::value_error(std::string(what) + " must not be negative (got " +
                          std::string(py::str(number)) + ")");
  }
  const unsigned long long value = PyLong_AsUnsignedLongLong(number.ptr());
  if (value == static_cast<unsigned long long>(-1) && PyErr_Occurred() != nullptr) {
    PyErr_Clear();  // OverflowError: more than 64 bits
    throw py::value_error(std::string(what) + " must be at most 2**64-1 (got " +
                          std::string(py::str(number)) + ")");
  }
  return value;
}

std::optional<std::string> FsPath(py::handle v) {
  PyObject* path = PyOS_FSPath(v.ptr());  // os.fspath(): the str (or bytes) it stands for
  if (path == nullptr) {
    PyErr_Clear();
    return std::nullopt;
  }
  py::detail::make_caster<std::string> text;
  if (!text.load(py::reinterpret_steal<py::object>(path), false)) return std::nullopt;
  std::string value = py::detail::cast_op<std::string&&>(std::move(text));
  if (value.find('\0') != std::string::npos) throw py::value_error("embedded null byte");
  return value;
}

py::object FromJson(const std::string& json) {
  return py::module_::import("json").attr("loads")(json);
}

}  // namespace vstack::python
