#include "imagetools/new_image_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>

#include "blockdev/file/image_lock.h"
#include "formats/vhd/vhd_chain_tools.h"
#include "lib/registry.h"
#include "lib/spec.h"

namespace vstack {

Result<NewImageFile> NewImageFile::Create(const std::string& path, std::string_view format,
                                          uint64_t size, std::string_view options, bool overwrite) {
  // Before the lstat, which would look at the path cut at the NUL.
  VSTACK_RETURN_IF_ERROR(RefuseNul(path, Errc::kInvalidArgument, "path"));
  std::string temp;
  struct stat st;
  if (::lstat(path.c_str(), &st) == 0) {
    // What is not a file is never replaced: say so first, not "add --overwrite".
    if (!S_ISREG(st.st_mode)) {
      const bool dir = S_ISDIR(st.st_mode);
      return MakeError(
          std::error_code(dir ? EISDIR : EEXIST, std::generic_category()),
          "'" + path + "' " +
              (dir ? "is a directory; name the new image's file"
                   : "exists and is not a regular file; --overwrite replaces only files"));
    }
    if (!overwrite) {
      return MakeError(std::error_code(EEXIST, std::generic_category()),
                       "'" + path + "' exists; add --overwrite to replace it");
    }
    temp = path + ".vstack-new-" + std::to_string(::getpid());
  }
  const std::string& where = temp.empty() ? path : temp;
  // Written through the descriptor that created it, never reopened by path.
  Result<DevicePtr> created = CreateAndOpenImage(format, where, size, options);
  if (!created) {
    // The new file goes beside the old one: a directory this user cannot write refuses it,
    // though the old file itself may be writable (qemu-img would write into it in place).
    // Said in those words, not as a failure to create a file the user never named.
    const std::string dir = std::filesystem::path(path).parent_path().string();
    const std::string shown = dir.empty() ? "." : dir;
    if (!temp.empty() && ::access(shown.c_str(), W_OK | X_OK) != 0) {
      const int err = errno;
      return MakeError(SystemError(err),
                       "'" + path + "' is not replaced: --overwrite writes the new image beside " +
                           "it and then renames it into its place (so that a failure leaves the " +
                           "old file as it was), and its directory '" + shown +
                           "' does not let this user create a file (" + std::strerror(err) +
                           "); it is left as it was. Write the new image into a directory you " +
                           "can write, or make this one writable");
    }
    return std::move(created).error();
  }
  NewImageFile image(path, std::move(temp), std::move(*created));
  image.mode_ = st.st_mode & 07777;
  image.uid_ = st.st_uid;
  image.gid_ = st.st_gid;
  // A differencing image replacing a file of its own parent chain would be its own ancestor.
  const auto levels = vhd::ChainLevels(image.device());
  if (levels.size() > 1) {
    if (const std::string loop = vhd::ParentLoop(path, *levels[1]); !loop.empty()) {
      return MakeError(Errc::kInvalidArgument,
                       "'" + path +
                           "' cannot replace a file of its own backing chain: the chain "
                           "would loop (" +
                           loop + "); '" + path + "' is left as it was");
    }
  }
  // The file replaced is held open with its write lock until Commit(): replacing a file a
  // guest or qemu-io has open would leave it writing into the old inode, its writes lost (as
  // `qemu-img create` does, a file in use is refused). Taken once the new image and its
  // backing chain are open, so that a chain holding the file is refused above as a loop.
  if (!image.temp_.empty()) {
    const int replaced = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    const Status locked = replaced < 0 ? MakeError(SystemError(errno), std::strerror(errno))
                                 : LockImageFile(replaced, /*writable=*/true);
    if (!locked) {
      if (replaced >= 0) ::close(replaced);
      return MakeError(locked.error().code, "'" + path + "' is not replaced: " +
                                                locked.error().message + "; it is left as it was");
    }
    image.replaced_fd_ = replaced;
  }
  return image;
}

NewImageFile::NewImageFile(std::string path, std::string temp, DevicePtr device)
    : path_(std::move(path)), temp_(std::move(temp)), device_(std::move(device)) {}

NewImageFile::NewImageFile(NewImageFile&& other) noexcept
    : path_(std::move(other.path_)),
      temp_(std::move(other.temp_)),
      device_(std::move(other.device_)),
      replaced_fd_(std::exchange(other.replaced_fd_, -1)),
      mode_(other.mode_),
      uid_(other.uid_),
      gid_(other.gid_) {}

NewImageFile::~NewImageFile() {
  Discard();
  if (replaced_fd_ >= 0) {  // the replaced file's lock goes with it
    UnlockImageFile(replaced_fd_);
    ::close(replaced_fd_);
  }
}

void NewImageFile::Discard() {
  if (!device_) return;
  (void)device_->Close();
  device_.reset();
  ::unlink(write_path().c_str());
}

Status NewImageFile::Commit() {
  if (!device_) return MakeError(Errc::kInvalidArgument, "'" + path_ + "': already committed");
  Status closed = device_->Close();
  device_.reset();
  if (!closed) {
    ::unlink(write_path().c_str());
    return closed;
  }
  if (temp_.empty()) return OkStatus();
  // The new file takes the old one's permissions and, where allowed, its owner: a private
  // (0600) image must not come back world-readable.
  if (::chmod(temp_.c_str(), mode_) != 0 ||
      (::chown(temp_.c_str(), uid_, gid_) != 0 && errno != EPERM)) {
    const int err = errno;
    ::unlink(temp_.c_str());
    return MakeError(SystemError(err), "cannot give the new '" + path_ +
                                           "' the old one's mode and owner: " + std::strerror(err));
  }
  if (::rename(temp_.c_str(), path_.c_str()) != 0) {
    const int err = errno;
    ::unlink(temp_.c_str());
    return MakeError(SystemError(err), "cannot replace '" + path_ + "': " + std::strerror(err));
  }
  return OkStatus();
}

}  // namespace vstack
