// A new image file, made the way `vstack create` and `vstack convert` make one: an existing
// file at the path is refused unless `overwrite` is given, and then it is replaced only when the
// new image is complete (written under a temporary name next to it and renamed over it by
// Commit()), so that an error on the way leaves the existing file as it was. A file replaced
// keeps its permission bits and owner; a file in use (another process holds its lock, as a
// qemu guest does) is not replaced.
//
//   auto image = vstack::NewImageFile::Create("disk.vhd", "vhd", 1 << 30, "subformat=fixed");
//   ... write through image->device() ...
//   vstack::Status s = image->Commit();
#ifndef VSTACK_IMAGETOOLS_NEW_IMAGE_FILE_H_
#define VSTACK_IMAGETOOLS_NEW_IMAGE_FILE_H_

#include <sys/types.h>

#include <string>
#include <string_view>

#include "lib/block_device.h"
#include "lib/errors.h"
#include "lib/export.h"

VSTACK_PUBLIC_BEGIN
namespace vstack {

class NewImageFile {
 public:
  // Creates an image of `format` ("raw", or a registered format with a create hook: "vhd",
  // "vhdx"), virtual size `size` and create options `options` ("k=v,k=v", as CreateImage), and
  // opens it for reading and writing. Errors: the path holds a NUL byte
  // (Errc::kInvalidArgument, RefuseNul in lib/spec.h), the path exists (EEXIST, saying to pass
  // overwrite), or exists and is not a regular file (with `overwrite`, only files are
  // replaced), or is in use by another process (its lock, EWOULDBLOCK); a differencing image
  // whose backing chain holds the file it replaces (a loop,
  // Errc::kInvalidArgument); CreateImage's errors (Errc::kInvalidArgument or kNotFound for a bad
  // format or option); the open's.
  static Result<NewImageFile> Create(const std::string& path, std::string_view format,
                                     uint64_t size, std::string_view options = "",
                                     bool overwrite = false);
  NewImageFile(NewImageFile&& other) noexcept;
  NewImageFile& operator=(NewImageFile&&) = delete;
  // An image not committed is closed and removed (an existing file it would replace stays).
  ~NewImageFile();

  // The new image, open for reading and writing until Commit().
  BlockDevice& device() { return *device_; }
  // Where the image is written: the path, or the temporary file that replaces it on Commit().
  const std::string& write_path() const { return temp_.empty() ? path_ : temp_; }
  // Closes the image (flushing it) and puts it in place. After an error the image is removed.
  Status Commit();

 private:
  NewImageFile(std::string path, std::string temp, DevicePtr device);
  void Discard();

  std::string path_, temp_;
  DevicePtr device_;
  // Replacing a file: its descriptor, holding its write lock until the new one takes its place,
  // and its permission bits and owner, which the new file takes.
  int replaced_fd_ = -1;
  mode_t mode_ = 0644;
  uid_t uid_ = 0;
  gid_t gid_ = 0;
};

}  // namespace vstack
VSTACK_PUBLIC_END

#endif  // VSTACK_IMAGETOOLS_NEW_IMAGE_FILE_H_
