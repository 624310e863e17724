// Error vocabulary of vstack.
//
// Data path: every request completes with a std::error_code. Errors that vstack itself detects
// use vstack::Errc (category "vstack"); errors from the operating system are passed through
// untouched as std::error_code(errno, std::system_category()).
//
// Control path (open, create, parse, configure): functions return Result<T>, which holds either
// a value or an Error = {code, message}. The message says what failed and where, e.g.
// "VHD footer checksum mismatch at offset 1073741824". No exception crosses the API.
#ifndef VSTACK_LIB_ERRORS_H_
#define VSTACK_LIB_ERRORS_H_

#include <cassert>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>
#include <variant>

#include "lib/export.h"

VSTACK_PUBLIC_BEGIN
namespace vstack {

enum class Errc {
  kOk = 0,
  kInvalidArgument = 1,  // malformed request or option
  kOutOfRange,           // request extends beyond the end of the device
  kUnaligned,            // offset or length not a multiple of the logical block size
  kBadBufferAlignment,   // buffer address or length violates the device's memory alignment
  kNotSupported,         // the device does not support this operation or flag
  kReadOnly,             // write-type request to a read-only device
  kCorruption,           // on-disk metadata is invalid, or stored data does not decode (a
                         // zstd fragment that does not decompress)
  kChecksumMismatch,     // stored checksum does not match the data
  kNoSpace,              // the layer ran out of space (the OS uses ENOSPC)
  kIo,                   // generic I/O failure with no better code
  kBusy,                 // resource temporarily exhausted; retry later
  kCancelled,            // request cancelled (device closing, interrupted run)
  kNotFound,             // named thing (file, image, pool) does not exist
  kBadSpec,              // a stack spec names an unknown layer, backend or option, gives an
                         // option a bad value, or does not parse: a usage error (exit 2)
};

const std::error_category& vstack_category() noexcept;

inline std::error_code make_error_code(Errc e) noexcept {
  return {static_cast<int>(e), vstack_category()};
}

// The OS error `err` (an errno value) as an error_code.
inline std::error_code SystemError(int err) noexcept {
  return {err, std::system_category()};
}

// Success, std::error_code{}, for the data path: a value-initialised error_code calls into
// libstdc++ (system_category() is not inline); this copies one made once.
inline const std::error_code& NoError() noexcept {
  static const std::error_code ok;
  return ok;
}

// An error with a human-readable message giving context. `code` is what callers branch on;
// `message` is what users read.
struct Error {
  std::error_code code;
  std::string message;

  // "message (code text)" or just the code text when there is no message.
  std::string ToString() const;
};

Error MakeError(std::error_code code, std::string message);
inline Error MakeError(Errc code, std::string message) {
  return MakeError(make_error_code(code), std::move(message));
}

// Wraps an error with more context: "<context>: <inner message>".
Error Annotate(Error inner, const std::string& context);

// Result<T>: a value or an Error, with a subset of std::expected's interface (has_value, value,
// error, operator*, operator->, explicit bool) so it can be swapped for std::expected later.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::in_place_index<0>, std::move(value)) {}  // NOLINT: implicit
  Result(Error error) : v_(std::in_place_index<1>, std::move(error)) {}  // NOLINT: implicit
  template <typename U>
    requires(std::is_convertible_v<U, T> && !std::is_same_v<std::decay_t<U>, T> &&
             !std::is_same_v<std::decay_t<U>, Error>)
  Result(U&& value) : v_(std::in_place_index<0>, T(std::forward<U>(value))) {}  // NOLINT

  bool has_value() const { return v_.index() == 0; }
  explicit operator bool() const { return has_value(); }

  T& value() & { assert(has_value()); return std::get<0>(v_); }
  const T& value() const& { assert(has_value()); return std::get<0>(v_); }
  T&& value() && { assert(has_value()); return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const Error& error() const& { assert(!has_value()); return std::get<1>(v_); }
  Error&& error() && { assert(!has_value()); return std::get<1>(std::move(v_)); }

 private:
  std::variant<T, Error> v_;
};

template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error) : error_(std::move(error)), ok_(false) {}  // NOLINT: implicit

  bool has_value() const { return ok_; }
  explicit operator bool() const { return ok_; }
  void value() const { assert(ok_); }
  const Error& error() const& { assert(!ok_); return error_; }
  Error&& error() && { assert(!ok_); return std::move(error_); }

 private:
  Error error_;
  bool ok_ = true;
};

using Status = Result<void>;

inline Status OkStatus() { return {}; }

}  // namespace vstack

namespace std {
template <>
struct is_error_code_enum<vstack::Errc> : true_type {};
}  // namespace std
VSTACK_PUBLIC_END

// Propagates an error from an expression returning Result<T>/Status. Use inside functions that
// return Result<U> or Status.
#define VSTACK_RETURN_IF_ERROR(expr)                 \
  do {                                               \
    auto vstack_status_ = (expr);                    \
    if (!vstack_status_) return std::move(vstack_status_).error(); \
  } while (0)

#define VSTACK_CONCAT_INNER_(a, b) a##b
#define VSTACK_CONCAT_(a, b) VSTACK_CONCAT_INNER_(a, b)
// `VSTACK_ASSIGN_OR_RETURN(auto x, Foo());` declares x from Foo()'s value or returns its error.
#define VSTACK_ASSIGN_OR_RETURN(lhs, expr) \
  VSTACK_ASSIGN_OR_RETURN_IMPL_(VSTACK_CONCAT_(vstack_result_, __LINE__), lhs, expr)
#define VSTACK_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp) return std::move(tmp).error();            \
  lhs = std::move(tmp).value()

#endif  // VSTACK_LIB_ERRORS_H_
