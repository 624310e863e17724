#include "lib/errors.h"

namespace vstack {
namespace {

class VstackCategory final : public std::error_category {
 public:
  const char* name() const noexcept override { return "vstack"; }

  std::string message(int code) const override {
    switch (static_cast<Errc>(code)) {
      case Errc::kOk: return "success";
      case Errc::kInvalidArgument: return "invalid argument";
      case Errc::kOutOfRange: return "request extends beyond the end of the device";
      case Errc::kUnaligned: return "offset or length is not a multiple of the logical block size";
      case Errc::kBadBufferAlignment:
        return "buffer address or length is not aligned to the device's memory alignment";
      case Errc::kNotSupported: return "operation not supported by this device";
      case Errc::kReadOnly: return "device is read-only";
      case Errc::kCorruption: return "on-disk data or metadata is corrupt";
      case Errc::kChecksumMismatch: return "checksum mismatch";
      case Errc::kNoSpace: return "no space left in the layer";
      case Errc::kIo: return "I/O error";
      case Errc::kBusy: return "resource busy; retry";
      case Errc::kCancelled: return "request cancelled";
      case Errc::kNotFound: return "not found";
      case Errc::kBadSpec: return "invalid stack spec";
    }
    return "unknown vstack error " + std::to_string(code);
  }

  std::error_condition default_error_condition(int code) const noexcept override {
    switch (static_cast<Errc>(code)) {
      case Errc::kInvalidArgument:
      case Errc::kBadSpec:
      case Errc::kUnaligned:
      case Errc::kBadBufferAlignment: return std::errc::invalid_argument;
      case Errc::kOutOfRange: return std::errc::result_out_of_range;
      case Errc::kNotSupported: return std::errc::operation_not_supported;
      case Errc::kReadOnly: return std::errc::read_only_file_system;
      case Errc::kNoSpace: return std::errc::no_space_on_device;
      case Errc::kCorruption:
      case Errc::kChecksumMismatch:
      case Errc::kIo: return std::errc::io_error;
      case Errc::kBusy: return std::errc::resource_unavailable_try_again;
      case Errc::kCancelled: return std::errc::operation_canceled;
      case Errc::kNotFound: return std::errc::no_such_file_or_directory;
      default: return std::error_condition(code, *this);
    }
  }
};

}  // namespace

const std::error_category& vstack_category() noexcept {
  static const VstackCategory category;
  return category;
}

std::string Error::ToString() const {
  if (message.empty()) return code.message();
  return message;
}

Error MakeError(std::error_code code, std::string message) {
  return Error{code, std::move(message)};
}

Error Annotate(Error inner, const std::string& context) {
  inner.message = context + ": " + inner.ToString();
  return inner;
}

}  // namespace vstack
