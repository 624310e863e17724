#include "blockdev/file/file_backed_device.h"

#include <fcntl.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <linux/stat.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

#include "blockdev/file/image_lock.h"
#include "lib/aligned_buffer.h"
#include "lib/iovec.h"
#include "lib/size.h"

namespace vstack {

std::vector<OptionInfo> FileOptionInfos() {
  return {
      {"direct", "O_DIRECT: bypass the page cache (buffers must be aligned)", "off"},
      {"create", "create the file if missing (needs size=)", "off"},
      {"excl", "with create=on: fail if the file exists (O_EXCL)", "off"},
      {"size", "size of a new file; a smaller existing file is extended", ""},
      {"block", "logical block size presented: 512 or 4096 (default: automatic)", ""},
      {"lock", "advisory locks qemu honours: a writer excludes every other open", "on"},
  };
}

Result<FileOpenParams> ParseFileParams(const OptionValues& o, const OpenOptions& open) {
  FileOpenParams p;
  p.path = o.positional();
  p.read_only = open.read_only;
  VSTACK_ASSIGN_OR_RETURN(p.direct, o.Bool("direct"));
  VSTACK_ASSIGN_OR_RETURN(p.create, o.Bool("create"));
  VSTACK_ASSIGN_OR_RETURN(p.exclusive, o.Bool("excl"));
  if (p.exclusive && !p.create) {
    return MakeError(Errc::kInvalidArgument, o.component() + ": excl=on needs create=on");
  }
  VSTACK_ASSIGN_OR_RETURN(p.lock, o.Bool("lock"));
  if (open.force_share) {
    if (!open.read_only) {
      return MakeError(Errc::kInvalidArgument,
                       o.component() + ": force-share (-U) is for read-only opens only");
    }
    p.lock = false;
  }
  if (o.Has("size")) {
    VSTACK_ASSIGN_OR_RETURN(p.size, o.Size("size"));
    if (p.size == 0) return MakeError(Errc::kInvalidArgument, o.component() + ": size must be > 0");
  }
  if (o.Has("block")) {
    VSTACK_ASSIGN_OR_RETURN(p.block, o.LogicalBlock("block"));
  }
  if (p.create && p.read_only) {
    return MakeError(Errc::kInvalidArgument, o.component() + ": create=on needs a writable open");
  }
  return p;
}

namespace {

constexpr size_t kMapSeeksCounter = 0;  // its counter (DeclareCounters in the constructor)

std::string FsName(int fd) {
  struct statfs sfs;
  if (fstatfs(fd, &sfs) != 0) return "unknown";
  switch (sfs.f_type) {
    case 0xEF53: return "ext4";
    case 0x01021994: return "tmpfs";
    case 0x58465342: return "xfs";
    case 0x9123683E: return "btrfs";
    default: {
      char buf[32];
      std::snprintf(buf, sizeof buf, "0x%lx", static_cast<unsigned long>(sfs.f_type));
      return buf;
    }
  }
}

// Why O_CREAT of `path` failed with `err`, where that is a missing directory: ENOENT says only
// "No such file or directory", which reads as the file that create= is there to make.
std::string MissingDirectory(const std::string& path, int err) {
  if (err != ENOENT) return "";
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return "";
  const std::string dir = slash == 0 ? "/" : path.substr(0, slash);
  struct stat st;
  if (::stat(dir.c_str(), &st) == 0 || errno != ENOENT) return "";
  return " (directory '" + dir + "' does not exist)";
}

// Undoes `file`, which the backend made or made larger in an open that then failed above it
// (closed by now), if its path still names that file (never one another process put there
// meanwhile): removes a file it made; gives one that existed its size before, if larger (what
// a layer below the one that failed wrote past the old end goes with it: an empty file's
// format).
void UndoFileChange(const FileChange& file) {
  struct stat st;
  const auto same = [&] {
    return static_cast<uint64_t>(st.st_dev) == file.dev &&
           static_cast<uint64_t>(st.st_ino) == file.ino;
  };
  if (file.created) {
    if (::lstat(file.path.c_str(), &st) == 0 && same()) ::unlink(file.path.c_str());
    return;
  }
  const int fd = ::open(file.path.c_str(), O_WRONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) return;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && same() &&
      static_cast<uint64_t>(st.st_size) > file.size_before) {
    [[maybe_unused]] const int rc = ::ftruncate(fd, static_cast<off_t>(file.size_before));
  }
  ::close(fd);
}

}  // namespace

Result<OpenedFile> OpenBackingFile(const std::string& kind, const FileOpenParams& p) {
  const std::string where = kind + ": '" + p.path + "'";
  int flags = O_CLOEXEC | (p.read_only ? O_RDONLY : O_RDWR);
  if (p.direct) flags |= O_DIRECT;
  // create=on makes the file only if it is missing (excl=on: it must be missing), and removes
  // it again if the open fails after that: a failed command leaves nothing behind.
  const bool exclusive = p.create && p.exclusive;
  // A FIFO's open blocks until a writer comes (`vstack info FIFO` hung): refuse what is neither
  // a file nor a block device before opening it.
  struct stat pre;
  if (!exclusive && ::stat(p.path.c_str(), &pre) == 0 && !S_ISREG(pre.st_mode) &&
      !S_ISBLK(pre.st_mode)) {
    return MakeError(make_error_code(Errc::kInvalidArgument),
                     where + ": not a regular file or block device");
  }
  int fd = exclusive ? -1 : ::open(p.path.c_str(), flags, 0644);
  bool creating = false, created = false;
  if (exclusive || (fd < 0 && errno == ENOENT && p.create)) {
    creating = true;
    fd = ::open(p.path.c_str(), flags | O_CREAT | O_EXCL, 0644);
    created = fd >= 0;
  }
  if (fd < 0 && errno == EINVAL && p.direct) {
    // Find out whether O_DIRECT is the reason (Linux creates the file before it refuses it).
    int plain = ::open(p.path.c_str(), flags & ~O_DIRECT, 0644);
    if (plain >= 0) {
      std::string fs = FsName(plain);
      ::close(plain);
      if (creating) ::unlink(p.path.c_str());
      return MakeError(SystemError(EINVAL),
                       where + ": O_DIRECT is not supported on this filesystem (" + fs + ")");
    }
  }
  if (fd < 0) {
    const int err = errno;
    if (creating) {
      return MakeError(SystemError(err), kind + ": cannot create '" + p.path + "': " +
                                             std::strerror(err) + MissingDirectory(p.path, err));
    }
    std::string mode = p.read_only ? "reading" : "reading and writing";
    return MakeError(SystemError(err), kind + ": cannot open '" + p.path + "' for " + mode + ": " +
                                           std::strerror(err));
  }
  // The size of an existing file before this open extended it (ftruncate below), if it did.
  std::optional<uint64_t> extended_from;
  auto fail = [&](std::error_code ec, const std::string& msg) -> Error {
    if (created) ::unlink(p.path.c_str());
    if (extended_from) {
      // Best effort: the open fails with its own error either way.
      [[maybe_unused]] const int rc = ::ftruncate(fd, static_cast<off_t>(*extended_from));
    }
    ::close(fd);
    return MakeError(ec, where + ": " + msg);
  };
  if (p.lock) {
    if (Status locked = LockImageFile(fd, !p.read_only); !locked) {
      return fail(locked.error().code, locked.error().message);
    }
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) return fail(SystemError(errno), "fstat failed");

  OpenedFile out;
  out.is_block_device = S_ISBLK(st.st_mode);
  out.created = created || (S_ISREG(st.st_mode) && st.st_size == 0 && p.size != 0);
  if (created) out.change = FileChange{p.path, st.st_dev, st.st_ino, true, 0};
  if (!out.is_block_device && !S_ISREG(st.st_mode)) {
    return fail(make_error_code(Errc::kInvalidArgument), "not a regular file or block device");
  }

  uint64_t size = 0;
  uint32_t logical = 512, physical = 4096, mem_align = 1;
  if (out.is_block_device) {
    int lbs = 512;
    unsigned int pbs = 4096;
    if (::ioctl(fd, BLKGETSIZE64, &size) != 0) return fail(SystemError(errno), "BLKGETSIZE64 failed");
    if (::ioctl(fd, BLKSSZGET, &lbs) == 0) logical = static_cast<uint32_t>(lbs);
    if (::ioctl(fd, BLKPBSZGET, &pbs) == 0) physical = pbs;
    if (p.direct) mem_align = logical;
  } else {
    size = static_cast<uint64_t>(st.st_size);
    physical = static_cast<uint32_t>(std::max<long>(512, st.st_blksize));
    if (p.direct) {
      logical = 512;
      mem_align = 512;
#ifdef STATX_DIOALIGN
      struct statx sx;
      if (::statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &sx) == 0 &&
          (sx.stx_mask & STATX_DIOALIGN) && sx.stx_dio_offset_align != 0) {
        logical = std::max<uint32_t>(512, sx.stx_dio_offset_align);
        mem_align = std::max<uint32_t>(sx.stx_dio_mem_align, 1);
      }
#endif
    }
    if (p.size != 0 && size < p.size) {
      if (p.read_only) return fail(make_error_code(Errc::kInvalidArgument), "size= needs a writable open");
      if (!created) out.change = FileChange{p.path, st.st_dev, st.st_ino, false, size};
      if (size != 0) {
        // A file with contents grows with the first write, not now: a stack that reads it
        // and refuses it (a VHD whose footer would no longer end the file) leaves it as it was.
        out.extend_on_first_write = p.size;
      } else if (::ftruncate(fd, static_cast<off_t>(p.size)) != 0) {
        return fail(SystemError(errno), "cannot extend to " + FormatSize(p.size) + ": " +
                                            std::strerror(errno));
      } else {
        extended_from = size;
      }
      size = p.size;
    } else if (p.size != 0 && size > p.size && p.create) {
      return fail(make_error_code(Errc::kInvalidArgument),
                  "exists with size " + std::to_string(size) + " > size=" +
                      std::to_string(p.size) + "; refusing to shrink it");
    }
  }
  if (p.block != 0) {
    if (p.block < logical) {
      return fail(make_error_code(Errc::kInvalidArgument),
                  "block=" + std::to_string(p.block) + " is below the device's " +
                      std::to_string(logical) + "-byte direct I/O alignment");
    }
    logical = p.block;
  }
  if (size == 0) {
    return fail(make_error_code(Errc::kInvalidArgument),
                "is empty; give size= (with create=on for a new file)");
  }
  size = (size + logical - 1) / logical * logical;

  out.fd = fd;
  out.geometry = Geometry{.size_bytes = size,
                          .logical_block = logical,
                          .physical_block = std::max(physical, logical),
                          .mem_alignment = mem_align};
  Capabilities caps = kCapRead | kCapFlush | kCapPersistent | kCapThreadSafe;
  if (!p.read_only) {
    caps |= kCapWrite | kCapFua | kCapDiscard | kCapWriteZeroes;
    if (!out.is_block_device) caps |= kCapDiscardZeroes | kCapFastZeroes;
  }
  if (!out.is_block_device) caps |= kCapExtents | kCapResizable;
  out.caps = caps;
  return out;
}

FileBackedDevice::FileBackedDevice(std::string kind, const OpenedFile& file,
                                   const FileOpenParams& params)
    : BlockDevice(std::move(kind), file.geometry, file.caps),
      fd_(file.fd),
      path_(params.path),
      direct_(params.direct),
      is_block_device_(file.is_block_device),
      created_(file.created),
      change_(file.change),
      extend_to_(file.extend_on_first_write) {
  DeclareCounters({"map_seeks"});
}

std::function<void()> FileBackedDevice::open_undo() const {
  if (!change_) return {};
  return [change = *change_] { UndoFileChange(change); };
}

std::error_code FileBackedDevice::ExtendNow() {
  std::lock_guard lock(extend_mu_);
  const uint64_t size = extend_to_.load(std::memory_order_relaxed);
  if (size == 0) return NoError();
  struct stat st;
  if (::fstat(fd_, &st) != 0) return SystemError(errno);
  if (static_cast<uint64_t>(st.st_size) < size && ::ftruncate(fd_, static_cast<off_t>(size)) != 0) {
    return SystemError(errno);
  }
  extend_to_.store(0, std::memory_order_release);
  return NoError();
}

FileBackedDevice::~FileBackedDevice() {
  UnlockImageFile(fd_);  // a device destroyed without Close()
  ::close(fd_);
}

Status FileBackedDevice::DoClose() {
  // Release the lock now: an io_uring ring that registered this file drops its reference
  // asynchronously, which would otherwise keep the lock for a while after we are gone.
  UnlockImageFile(fd_);
  return OkStatus();
}

std::string FileBackedDevice::Describe() const {
  std::string s = kind() + " " + path_ + " (" + (is_block_device_ ? "block device" : "regular file");
  s += ", " + FormatSize(size_bytes());
  if (direct_) s += ", O_DIRECT";
  if (read_only()) s += ", read-only";
  return s + ")";
}

void FileBackedDevice::Properties(PropertyList& out) const {
  out.push_back({"path", path_, ""});
  out.push_back({"file_type", std::string(is_block_device_ ? "block device" : "regular file"), ""});
  out.push_back({"direct", direct_, ""});
  if (!is_block_device_) {
    struct stat st;
    if (::fstat(fd_, &st) == 0) {
      out.push_back({"file_size", static_cast<uint64_t>(st.st_size), "bytes"});
      out.push_back({"allocated", static_cast<uint64_t>(st.st_blocks) * 512, "bytes"});
    }
    out.push_back({"filesystem", FsName(fd_), ""});
  }
}

Status FileBackedDevice::DoResize(uint64_t size) {
  // Growing only widens the addressable range: the file's length follows the data written
  // past its end (see BlockDevice::Resize). Shrinking truncates.
  if (size >= size_bytes()) return OkStatus();
  {
    std::lock_guard lock(extend_mu_);
    extend_to_.store(0, std::memory_order_relaxed);  // the size is set here
  }
  const int rc = ::ftruncate(fd_, static_cast<off_t>(size));
  MadeHoles();
  if (rc != 0) {
    const int err = errno;
    return MakeError(SystemError(err), kind() + ": cannot truncate '" + path_ + "' to " +
                                           std::to_string(size) + ": " + std::strerror(err));
  }
  return OkStatus();
}

Status FileBackedDevice::MapExtents(uint64_t offset, uint64_t length, std::vector<Extent>* out) {
  VSTACK_RETURN_IF_ERROR(CheckRange(offset, length));
  if (is_block_device_) return BlockDevice::MapExtents(offset, length, out);
  const uint64_t end = offset + length;
  uint64_t pos = offset;
  while (pos < end) {
    // Read before the seeks: a hole made while they run bumps it after, so the run they find
    // is not taken for one that still holds.
    const uint64_t made = holes_made_.load(std::memory_order_acquire);
    uint64_t data = pos;
    uint64_t hole = RememberedRunEnd(pos, made);
    if (hole == 0) {
      CountShared(kMapSeeksCounter, 2);
      off_t d = ::lseek(fd_, static_cast<off_t>(pos), SEEK_DATA);
      if (d < 0) {
        if (errno != ENXIO) return MakeError(SystemError(errno), "lseek(SEEK_DATA) failed");
        d = static_cast<off_t>(end);  // only a hole (or EOF) from here
      }
      data = static_cast<uint64_t>(d);
      if (data >= end) {
        AppendExtent(out, pos, end - pos, kExtentHole | kExtentZero);
        break;
      }
      off_t h = ::lseek(fd_, d, SEEK_HOLE);
      if (h < 0) return MakeError(SystemError(errno), "lseek(SEEK_HOLE) failed");
      hole = static_cast<uint64_t>(h);
      RememberRun(data, hole, made);
    }
    AppendExtent(out, pos, data - pos, kExtentHole | kExtentZero);
    // Holes are reported at filesystem-block granularity; keep extents on logical blocks.
    const uint64_t h = std::min(hole, end);
    AppendExtent(out, data, h - data, 0);
    pos = h;
  }
  return OkStatus();
}

uint64_t FileBackedDevice::RememberedRunEnd(uint64_t pos, uint64_t holes_made) const {
  std::lock_guard lock(run_mu_);
  const bool holds = run_.holes_made == holes_made && run_.begin <= pos && pos < run_.end;
  return holds ? run_.end : 0;
}

void FileBackedDevice::RememberRun(uint64_t begin, uint64_t end, uint64_t holes_made) {
  std::lock_guard lock(run_mu_);
  run_ = DataRun{begin, end, holes_made};
}

std::error_code FileBackedDevice::ReadSync(uint64_t offset, const iovec* iov, uint32_t iovcnt) const {
  const uint64_t total = IovLength(iov, iovcnt);
  uint64_t done = 0;
  std::vector<iovec> rest;
  while (done < total) {
    rest.clear();
    IovSlice(iov, iovcnt, done, total - done, &rest);
    const int cnt = static_cast<int>(std::min<size_t>(rest.size(), IOV_MAX));
    ssize_t n = ::preadv(fd_, rest.data(), cnt, static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return SystemError(errno);
    }
    if (n == 0) {  // end of file: the rest reads as zeros
      ZeroIov(iov, iovcnt, done, total - done);
      break;
    }
    done += static_cast<uint64_t>(n);
  }
  return {};
}

std::error_code FileBackedDevice::WriteSync(uint64_t offset, const iovec* iov, uint32_t iovcnt,
                                            bool fua) const {
  const uint64_t total = IovLength(iov, iovcnt);
  uint64_t done = 0;
  std::vector<iovec> rest;
  while (done < total) {
    rest.clear();
    IovSlice(iov, iovcnt, done, total - done, &rest);
    const int cnt = static_cast<int>(std::min<size_t>(rest.size(), IOV_MAX));
    ssize_t n = ::pwritev2(fd_, rest.data(), cnt, static_cast<off_t>(offset + done),
                           fua ? RWF_DSYNC : 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return SystemError(errno);
    }
    if (n == 0) return SystemError(EIO);
    done += static_cast<uint64_t>(n);
  }
  return {};
}

std::error_code FileBackedDevice::FlushSync() const {
  if (::fdatasync(fd_) != 0) return SystemError(errno);
  return {};
}

std::error_code FileBackedDevice::WriteZeroBuffers(uint64_t offset, uint64_t length) const {
  const uint64_t chunk = std::min<uint64_t>(length, 1 << 20);
  AlignedBuffer zeros(chunk, std::max<uint32_t>(geometry().mem_alignment, 4096));
  for (uint64_t done = 0; done < length; done += chunk) {
    iovec v{zeros.data(), static_cast<size_t>(std::min(chunk, length - done))};
    if (std::error_code ec = WriteSync(offset + done, &v, 1, false)) return ec;
  }
  return {};
}

std::error_code FileBackedDevice::DiscardSync(uint64_t offset, uint64_t length) const {
  if (is_block_device_) {
    uint64_t range[2] = {offset, length};
    if (::ioctl(fd_, BLKDISCARD, range) != 0) return SystemError(errno);
    return {};
  }
  if (::fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(offset),
                  static_cast<off_t>(length)) == 0) {
    MadeHoles();
    return {};
  }
  if (errno != EOPNOTSUPP) return SystemError(errno);
  return WriteZeroBuffers(offset, length);  // we promised discard_zeroes
}

std::error_code FileBackedDevice::RunSync(const IoRequest& r) const {
  switch (r.op) {
    case Op::kRead: return ReadSync(r.offset, r.iov, r.iovcnt);
    case Op::kWrite: return WriteSync(r.offset, r.iov, r.iovcnt, r.flags & kIoFua);
    case Op::kFlush: return FlushSync();
    case Op::kDiscard: return DiscardSync(r.offset, r.length);
    case Op::kWriteZeroes: return WriteZeroesSync(r.offset, r.length, r.flags);
  }
  return make_error_code(Errc::kInvalidArgument);
}

std::error_code FileBackedDevice::WriteZeroesSync(uint64_t offset, uint64_t length,
                                                  IoFlags flags) const {
  std::error_code ec;
  if ((flags & kIoMayUnmap) && !is_block_device_ &&
      ::fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(offset),
                  static_cast<off_t>(length)) == 0) {
    ec = {};  // may unmap: a hole, which reads as zeros and takes no space (as qemu does)
  } else if (::fallocate(fd_, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE,
                         static_cast<off_t>(offset), static_cast<off_t>(length)) == 0) {
    ec = {};
  } else if (errno == EOPNOTSUPP && !is_block_device_ &&
             ::fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                         static_cast<off_t>(offset), static_cast<off_t>(length)) == 0) {
    ec = {};  // tmpfs has no ZERO_RANGE, but a hole reads as zeros
    // Without kIoMayUnmap the range must stay allocated (a layer reserving its metadata
    // space, so that a full filesystem cannot fail its later writes there).
    if (!(flags & kIoMayUnmap) &&
        ::fallocate(fd_, FALLOC_FL_KEEP_SIZE, static_cast<off_t>(offset),
                    static_cast<off_t>(length)) != 0 &&
        errno != EOPNOTSUPP) {
      ec = SystemError(errno);
    }
  } else if (errno == EOPNOTSUPP) {
    if (flags & kIoFastZero) return make_error_code(Errc::kNotSupported);
    ec = WriteZeroBuffers(offset, length);
  } else {
    ec = SystemError(errno);
  }
  if (!is_block_device_) MadeHoles();  // a punch, or a zeroed range the filesystem may map as one
  if (!ec && (flags & kIoFua)) ec = FlushSync();
  return ec;
}

}  // namespace vstack
