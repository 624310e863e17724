// A VHD or VHDX file opened with libvhdi, the oracle of the interop tests.
#ifndef VSTACK_TESTS_FORMATS_LIBVHDI_FILE_H_
#define VSTACK_TESTS_FORMATS_LIBVHDI_FILE_H_

#include <gtest/gtest.h>
#include <libvhdi.h>

#include <string>
#include <vector>

namespace vstack::testing {

class LibvhdiFile {
 public:
  explicit LibvhdiFile(const std::string& path) {
    libvhdi_error_t* error = nullptr;
    if (libvhdi_file_initialize(&file_, &error) != 1 ||
        libvhdi_file_open(file_, path.c_str(), LIBVHDI_OPEN_READ, &error) != 1) {
      char text[512] = {};
      libvhdi_error_sprint(error, text, sizeof text);
      error_ = text;
      libvhdi_error_free(&error);
    }
  }
  ~LibvhdiFile() {
    if (file_ == nullptr) return;
    libvhdi_file_close(file_, nullptr);
    libvhdi_file_free(&file_, nullptr);
  }
  LibvhdiFile(const LibvhdiFile&) = delete;
  LibvhdiFile& operator=(const LibvhdiFile&) = delete;

  // Empty when the file opened.
  const std::string& error() const { return error_; }
  // Attaches `parent` (opened, and kept alive by the caller) as this differencing image's
  // parent, as vhdimount does. Returns libvhdi's error, or "".
  std::string SetParent(LibvhdiFile& parent) {
    libvhdi_error_t* error = nullptr;
    if (libvhdi_file_set_parent_file(file_, parent.file_, &error) == 1) return "";
    char text[512] = {};
    libvhdi_error_sprint(error, text, sizeof text);
    libvhdi_error_free(&error);
    return text;
  }
  uint64_t MediaSize() {
    size64_t size = 0;
    libvhdi_file_get_media_size(file_, &size, nullptr);
    return size;
  }
  std::vector<unsigned char> Read(uint64_t offset, size_t length) {
    std::vector<unsigned char> out(length);
    const ssize_t n = libvhdi_file_read_buffer_at_offset(file_, out.data(), length,
                                                         static_cast<off64_t>(offset), nullptr);
    EXPECT_EQ(n, static_cast<ssize_t>(length)) << "libvhdi read at " << offset;
    return out;
  }

 private:
  libvhdi_file_t* file_ = nullptr;
  std::string error_;
};

}  // namespace vstack::testing

#endif  // VSTACK_TESTS_FORMATS_LIBVHDI_FILE_H_
