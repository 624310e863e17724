#include "blockdev/file/image_lock.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <utility>

namespace vstack {
namespace {

// qemu's lock layout (block/file-posix.c): one byte per permission at each base.
constexpr off_t kUsesBase = 100;     // RAW_LOCK_PERM_BASE: "this open uses permission i"
constexpr off_t kUnsharesBase = 200;  // RAW_LOCK_SHARED_BASE: "this open does not share i"
constexpr int kPermissions = 4;       // BLK_PERM_CONSISTENT_READ, WRITE, WRITE_UNCHANGED, RESIZE
constexpr unsigned kRead = 1u << 0, kWrite = 1u << 1, kResize = 1u << 3;
constexpr const char* kVerbs[kPermissions] = {"read", "write", "write (unchanged)", "resize"};

struct flock Byte(short type, off_t offset) {
  struct flock fl;
  std::memset(&fl, 0, sizeof fl);
  fl.l_type = type;
  fl.l_whence = SEEK_SET;
  fl.l_start = offset;
  fl.l_len = 1;
  return fl;
}

int ReadLock(int fd, off_t offset) {
  struct flock fl = Byte(F_RDLCK, offset);
  return ::fcntl(fd, F_OFD_SETLK, &fl) == 0 ? 0 : errno;
}

// 0 when no other open file description holds `offset`, EWOULDBLOCK when one does, else errno.
int Probe(int fd, off_t offset) {
  struct flock fl = Byte(F_WRLCK, offset);
  if (::fcntl(fd, F_OFD_GETLK, &fl) != 0) return errno;
  return fl.l_type == F_UNLCK ? 0 : EWOULDBLOCK;
}

// The files this process holds locked, by descriptor: a conflict with one of them is this
// process's own (another open of the same file, not closed yet: a Device a Python session
// still holds), not another process's.
using FileId = std::pair<dev_t, ino_t>;
struct Held {
  std::mutex mu;
  std::map<int, FileId> files;  // guarded by mu
};
Held& HeldHere() {
  static Held* held = new Held;  // immortal: devices may close during static destruction
  return *held;
}

bool IdOf(int fd, FileId* id) {
  struct stat st;
  if (::fstat(fd, &st) != 0) return false;
  *id = {st.st_dev, st.st_ino};
  return true;
}

// True if another descriptor of this process holds locks on the file `fd` is open on.
bool LockedHere(int fd) {
  FileId id;
  if (!IdOf(fd, &id)) return false;
  Held& held = HeldHere();
  std::lock_guard lock(held.mu);
  for (const auto& [other, other_id] : held.files) {
    if (other != fd && other_id == id) return true;
  }
  return false;
}

Error Failure(int err, const std::string& what, bool here, bool writable) {
  if (err == EWOULDBLOCK || err == EAGAIN || err == EACCES) {
    // A read-only open is what qemu-img's -U is for: the commands that only read take it.
    const std::string anyway = writable ? "pass lock=off to override"
                                        : "to read it anyway, pass -U (--force-share; lock=off "
                                          "in a stack spec), as with qemu-img";
    if (here) {
      return MakeError(SystemError(EWOULDBLOCK),
                       "in use by this process: another open of it, not closed yet, " + what +
                           " (qemu and vstack take these locks); close that one first, or " +
                           anyway);
    }
    return MakeError(SystemError(EWOULDBLOCK), "in use by another process, which " + what +
                                                   " (qemu and vstack take these locks); " + anyway);
  }
  return MakeError(SystemError(err), std::string("cannot lock: ") + std::strerror(err));
}

}  // namespace

Status LockImageFile(int fd, bool writable) {
  const unsigned uses = writable ? (kRead | kWrite | kResize) : kRead;
  const unsigned unshares = kWrite | kResize;
  for (int i = 0; i < kPermissions; ++i) {
    int err = 0;
    if (uses & (1u << i)) err = ReadLock(fd, kUsesBase + i);
    if (err == 0 && (unshares & (1u << i))) err = ReadLock(fd, kUnsharesBase + i);
    if (err != 0) {
      const bool here = LockedHere(fd);
      UnlockImageFile(fd);
      return Failure(err, std::string("holds the image's locks"), here, writable);
    }
  }
  // Our own locks are never reported to us (they belong to this open file description).
  for (int i = 0; i < kPermissions; ++i) {
    int err = 0;
    std::string what;
    if (uses & (1u << i)) {
      err = Probe(fd, kUnsharesBase + i);
      what = std::string("does not let others ") + kVerbs[i] + " it";
    }
    if (err == 0 && (unshares & (1u << i))) {
      err = Probe(fd, kUsesBase + i);
      what = std::string("has it open to ") + kVerbs[i];
    }
    if (err != 0) {
      const bool here = LockedHere(fd);
      UnlockImageFile(fd);
      return Failure(err, what, here, writable);
    }
  }
  if (FileId id; IdOf(fd, &id)) {
    Held& held = HeldHere();
    std::lock_guard lock(held.mu);
    held.files[fd] = id;
  }
  return OkStatus();
}

void UnlockImageFile(int fd) {
  struct flock fl = Byte(F_UNLCK, kUsesBase);
  fl.l_len = kUnsharesBase + kPermissions - kUsesBase;
  ::fcntl(fd, F_OFD_SETLK, &fl);
  Held& held = HeldHere();
  std::lock_guard lock(held.mu);
  held.files.erase(fd);
}

}  // namespace vstack
