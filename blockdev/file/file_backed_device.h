// What the `file` and `uring` backends share: opening a regular file or a block device with the
// spec's options, its geometry, allocation map (SEEK_DATA/SEEK_HOLE), and the synchronous
// fallbacks (full-length pread/pwrite loops, discard, write-zeroes).
//
// Spec options common to both:
//   PATH                 regular file or block device
//   direct=on|off        O_DIRECT; buffers and offsets must then meet the device's alignment
//   create=on|off        create the file if it does not exist (needs size=)
//   excl=on|off          with create=on: refuse a file (or symlink) that exists already
//                        (O_EXCL), so the device is the file this open created
//   size=N               size of a new file; an existing smaller file is extended (by its first
//                        write: an open that only reads leaves it as it was), never shrunk
//   block=512|4096       logical block size presented above (default: 512, or the DIO alignment)
//   lock=on|off          take the advisory locks qemu takes (image_lock.h): a writer excludes
//                        every other open, vstack's or qemu's; read-only opens share
//
// Geometry: the size is the file size rounded up to the logical block; reads past the end of
// the file return zeros, as qemu's file driver does. A writable regular file is resizable
// (BlockDevice::Resize), which is how VHD grows its image file.
#ifndef VSTACK_BLOCKDEV_FILE_FILE_BACKED_DEVICE_H_
#define VSTACK_BLOCKDEV_FILE_FILE_BACKED_DEVICE_H_

#include <sys/uio.h>

#include <atomic>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "lib/block_device.h"
#include "lib/registry.h"

namespace vstack {

struct FileOpenParams {
  std::string path;
  bool direct = false;
  bool create = false;
  bool exclusive = false;  // O_EXCL: only a file this open creates
  uint64_t size = 0;  // 0 = keep the existing size
  uint32_t block = 0;  // 0 = automatic
  bool lock = true;
  bool read_only = false;
};

// The option list shared by file and uring, and its parsing.
std::vector<OptionInfo> FileOptionInfos();
Result<FileOpenParams> ParseFileParams(const OptionValues& values, const OpenOptions& open);

// A file that the open of a backend made, or that existed and that the open made larger (size=,
// now or at the first write): undone by BlockDevice::open_undo.
struct FileChange {
  std::string path;
  // The file, as fstat saw it: only this file is undone, never one put at the path since.
  uint64_t dev = 0;
  uint64_t ino = 0;
  bool created = false;      // made by this open (O_CREAT)
  uint64_t size_before = 0;  // else: its size before the open
};

// An open backing file: its descriptor, geometry and capabilities.
struct OpenedFile {
  int fd = -1;
  Geometry geometry;
  Capabilities caps = 0;
  bool is_block_device = false;
  // This open created the file, or found it empty and gave it its size: nothing was on it.
  bool created = false;
  // The file that this open made (O_CREAT), or that existed and that size= makes larger:
  // BlockDevice::open_undo.
  std::optional<FileChange> change;
  // size= of a file with contents: the device has that size now, the file gets it at the first
  // write-type request (reads past its end are zeros meanwhile). 0: nothing pending.
  uint64_t extend_on_first_write = 0;
};
// Opens the backing file for `params` (create, size, lock); `kind` prefixes error messages.
Result<OpenedFile> OpenBackingFile(const std::string& kind, const FileOpenParams& params);

class FileBackedDevice : public BlockDevice {
 public:
  ~FileBackedDevice() override;

  std::string Describe() const override;
  void Properties(PropertyList& out) const override;
  Status MapExtents(uint64_t offset, uint64_t length, std::vector<Extent>* out) override;
  bool fresh() const override { return created_; }
  std::function<void()> open_undo() const override;

  int fd() const { return fd_; }
  bool is_block_device() const { return is_block_device_; }
  const std::string& path() const { return path_; }
  bool direct() const { return direct_; }

  // Synchronous operations, thread-safe. Reads past end of file fill zeros; short transfers
  // are retried; more than IOV_MAX iovecs are split.
  std::error_code ReadSync(uint64_t offset, const iovec* iov, uint32_t iovcnt) const;
  std::error_code WriteSync(uint64_t offset, const iovec* iov, uint32_t iovcnt, bool fua) const;
  std::error_code FlushSync() const;
  std::error_code DiscardSync(uint64_t offset, uint64_t length) const;
  std::error_code WriteZeroesSync(uint64_t offset, uint64_t length, IoFlags flags) const;
  // Runs any validated request synchronously with the calls above.
  std::error_code RunSync(const IoRequest& r) const;
  // The queues call this before a write-type request (write, write-zeroes, discard): the first
  // one gives the file the size= it was opened with (OpenedFile::extend_on_first_write), so an
  // open that only read (a stack that refused the file) leaves the file as it was. One load
  // afterwards.
  std::error_code BeforeWrite() {
    return extend_to_.load(std::memory_order_acquire) == 0 ? NoError() : ExtendNow();
  }

 protected:
  // Takes ownership of `file.fd`.
  FileBackedDevice(std::string kind, const OpenedFile& file, const FileOpenParams& params);
  // Releases the advisory lock; the descriptor closes with the object.
  Status DoClose() override;
  // Regular files only (kCapResizable): growing just widens the addressable range, shrinking
  // truncates the file.
  Status DoResize(uint64_t size) override;

 private:
  std::error_code WriteZeroBuffers(uint64_t offset, uint64_t length) const;
  std::error_code ExtendNow();

  int fd_;
  std::string path_;
  bool direct_;
  bool is_block_device_;
  const bool created_;
  const std::optional<FileChange> change_;
  std::mutex extend_mu_;
  std::atomic<uint64_t> extend_to_;  // 0, or the size the file takes at the first write

  // The last run of data MapExtents found, [begin, end) of the file, with the count of
  // hole-making calls (punches, zeroed ranges, truncations) when it was looked up: it holds
  // while that count is unchanged. A caller that maps a long stretch of data piece by piece
  // (convert, compare, an NBD client's block-status requests, a VHDX's blocks) then pays one
  // SEEK_HOLE for the run, not one per piece, each of which walks from the piece to the next
  // hole (on tmpfs a scan of the page cache: mapping N pieces of data cost N^2).
  struct DataRun {
    uint64_t begin = 0, end = 0, holes_made = 0;
  };
  // The end of the remembered run holding `pos`, if it still holds; 0 if none does.
  uint64_t RememberedRunEnd(uint64_t pos, uint64_t holes_made) const;
  void RememberRun(uint64_t begin, uint64_t end, uint64_t holes_made);
  // Bumped after every call that can turn data into a hole.
  void MadeHoles() const { holes_made_.fetch_add(1, std::memory_order_release); }

  mutable std::mutex run_mu_;
  DataRun run_;  // guarded by run_mu_
  mutable std::atomic<uint64_t> holes_made_{0};
};


}  // namespace vstack

#endif  // VSTACK_BLOCKDEV_FILE_FILE_BACKED_DEVICE_H_
