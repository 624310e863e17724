#include "imagetools/convert.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "imagetools/map.h"
#include "imagetools/new_image_file.h"
#include "lib/aligned_buffer.h"
#include "lib/extent.h"
#include "lib/iovec.h"
#include "lib/property.h"
#include "lib/registry.h"
#include "lib/sync_io.h"

namespace vstack {
namespace {

constexpr uint64_t kZeroGrain = 4096;

// Copies src[0, size) to dst through their own queues, `depth` chunks at a time.
class Copier {
 public:
  Copier(BlockDevice& src, BlockDevice& dst, const CopyOptions& options)
      : src_(src), dst_(dst), options_(options) {
    const uint64_t opt =
        std::max<uint64_t>(dst.geometry().optimal_transfer, src.geometry().optimal_transfer);
    chunk_ = std::clamp<uint64_t>(opt, 2 << 20, 8 << 20);
  }

  Result<CopyStats> Run() {
    size_ = src_.geometry().size_bytes;
    // A destination with larger sectors (a VHDX of 4 KiB sectors from a source of 512-byte
    // ones) is created rounded up to its sector: the copy covers that much, the source's bytes
    // and zeros after them, so that every write is whole sectors.
    const uint64_t block = dst_.geometry().logical_block;
    span_ = (size_ + block - 1) / block * block;
    if (dst_.geometry().size_bytes < span_) {
      return MakeError(Errc::kOutOfRange, "the destination (" +
                                              std::to_string(dst_.geometry().size_bytes) +
                                              " bytes) is smaller than the source (" +
                                              std::to_string(size_) + " bytes)");
    }
    VSTACK_ASSIGN_OR_RETURN(src_q_, src_.OpenQueue());
    VSTACK_ASSIGN_OR_RETURN(dst_q_, dst_.OpenQueue());
    const size_t align =
        std::max<size_t>({src_.geometry().mem_alignment, dst_.geometry().mem_alignment, 4096});
    slots_.resize(static_cast<size_t>(std::max(1, options_.depth)));
    for (Slot& s : slots_) {
      s.copier = this;
      s.buf = AlignedBuffer(chunk_, align);
    }
    for (Slot& s : slots_) StartNext(s);
    while (active_ > 0) {
      if (src_q_->in_flight() > 0) {
        src_q_->Poll(1);
      } else if (dst_q_->in_flight() > 0) {
        dst_q_->Poll(1);
      }
      src_q_->Poll(0);
      dst_q_->Poll(0);
    }
    src_q_->WaitIdle();
    dst_q_->WaitIdle();
    if (failed_read_) LocateFailedRead();
    CheckStop();  // asked at the last chunk's report: the copy is not reported done
    if (error_) return *error_;
    IoRequest flush;
    flush.op = Op::kFlush;
    if (std::error_code ec = Execute(*dst_q_, flush)) {
      return MakeError(ec, "flushing the destination failed: " + ec.message());
    }
    src_q_.reset();
    dst_q_.reset();
    return stats_;
  }

 private:
  struct Slot {
    Copier* copier = nullptr;
    uint64_t offset = 0, length = 0;
    uint64_t in_source = 0;  // of `length`, the bytes inside the source (the rest: zeros)
    AlignedBuffer buf;
    iovec iov{};
    IoRequest read;
    std::vector<IoRequest> writes;
    std::vector<iovec> write_iov;
    size_t pending = 0;
  };

  // The error to report: the one at the lowest offset (chunks complete out of order, and a
  // copy that failed at offset X has copied nothing reliable beyond X). `read` is the slot
  // whose chunk read failed, if that is the failure: LocateFailedRead narrows it down.
  void Fail(Error e, uint64_t offset, Slot* read = nullptr) {
    if (!error_ || offset < error_offset_) {
      error_ = std::move(e);
      error_offset_ = offset;
      failed_read_ = read;
    }
  }

  static Error ReadError(uint64_t offset, std::error_code ec) {
    return MakeError(
        ec, "reading the source at offset " + std::to_string(offset) + " failed: " + ec.message());
  }

  // The error to report is a whole chunk's failed read: names instead the lowest offset in it
  // that fails, reading the chunk again in smaller pieces. REQUIRES: the source's queue is idle.
  void LocateFailedRead() {
    Slot& s = *failed_read_;
    const FailedRead at = LowestFailedRead(*src_q_, src_.geometry(), s.offset,
                                           s.buf.span().first(s.in_source), s.read.status);
    error_ = ReadError(at.offset, at.error);
    error_offset_ = at.offset;
    failed_read_ = nullptr;
  }

  void Report() {
    if (options_.progress) options_.progress(stats_.copied, size_);
  }

  // Ends the copy with Errc::kCancelled, saying how far it got, once the caller asked it to
  // stop (CopyOptions::stop; a progress callback may ask it, so it is checked after each).
  void CheckStop() {
    if (options_.stop != nullptr && options_.stop->load() && !error_) {
      Fail(MakeError(Errc::kCancelled, "interrupted at offset " + std::to_string(next_) + " of " +
                                           std::to_string(size_)),
           UINT64_MAX);
    }
  }

  void StartNext(Slot& s) {
    // Checked at each chunk: zero chunks skipped here report progress without any I/O.
    for (CheckStop(); !error_ && next_ < span_; CheckStop()) {
      s.offset = next_;
      s.length = std::min(chunk_, span_ - next_);
      s.in_source = std::min(s.length, size_ - s.offset);
      next_ += s.length;
      std::vector<Extent> ext;
      Status mapped = src_.MapExtents(s.offset, s.in_source, &ext);
      const bool all_zero = mapped && std::all_of(ext.begin(), ext.end(), [](const Extent& e) {
                              return (e.flags & kExtentZero) != 0;
                            });
      if (all_zero && options_.dst_reads_zero) {  // nothing to read or write: skip it here
        stats_.copied += s.in_source;
        Report();
        continue;
      }
      ++active_;
      if (all_zero) {
        std::memset(s.buf.data(), 0, s.length);
        WriteChunk(s);
        return;
      }
      StartRead(s);
      return;
    }
  }

  void StartRead(Slot& s) {
    // Past the source's end (the destination's last sector), zeros.
    std::memset(s.buf.data() + s.in_source, 0, s.length - s.in_source);
    s.iov = iovec{s.buf.data(), s.in_source};
    s.read = IoRequest{};
    s.read.op = Op::kRead;
    s.read.offset = s.offset;
    s.read.length = s.in_source;
    s.read.iov = &s.iov;
    s.read.iovcnt = 1;
    s.read.user_data = &s;
    s.read.on_complete = [](IoRequest& r) {
      Slot& slot = *static_cast<Slot*>(r.user_data);
      Copier& c = *slot.copier;
      if (r.status) {
        c.Fail(ReadError(slot.offset, r.status), slot.offset, &slot);
        c.Done(slot);
        return;
      }
      c.WriteChunk(slot);
    };
    src_q_->Submit(s.read);
  }

  // Writes the non-zero 4 KiB runs of the chunk (and write-zeroes the rest, unless the
  // destination reads as zeros already).
  void WriteChunk(Slot& s) {
    s.writes.clear();
    s.write_iov.clear();
    s.writes.reserve(s.length / kZeroGrain + 1);
    s.write_iov.reserve(s.length / kZeroGrain + 1);
    for (uint64_t pos = 0; pos < s.length;) {
      const uint64_t grain = std::min(kZeroGrain, s.length - pos);
      const bool zero = IsZero(s.buf.data() + pos, grain);
      uint64_t end = pos + grain;
      while (end < s.length) {
        const uint64_t g = std::min(kZeroGrain, s.length - end);
        if (IsZero(s.buf.data() + end, g) != zero) break;
        end += g;
      }
      if (!zero || !options_.dst_reads_zero) {
        IoRequest w;
        w.op = zero ? Op::kWriteZeroes : Op::kWrite;
        w.offset = s.offset + pos;
        w.length = end - pos;
        if (!zero) {
          s.write_iov.push_back(iovec{s.buf.data() + pos, end - pos});
          w.iov = &s.write_iov.back();
          w.iovcnt = 1;
        }
        w.user_data = &s;
        w.on_complete = [](IoRequest& r) {
          Slot& slot = *static_cast<Slot*>(r.user_data);
          Copier& c = *slot.copier;
          if (r.status) {
            c.Fail(MakeError(r.status, "writing the destination at offset " +
                                           std::to_string(r.offset) +
                                           " failed: " + r.status.message()),
                   r.offset);
          }
          if (--slot.pending == 0) c.Done(slot);
        };
        s.writes.push_back(w);
        if (!zero) stats_.written += w.length;
      }
      pos = end;
    }
    if (s.writes.empty()) {
      Done(s);
      return;
    }
    s.pending = s.writes.size();
    std::vector<IoRequest*> batch;
    for (IoRequest& w : s.writes) batch.push_back(&w);
    dst_q_->Submit(batch);
  }

  void Done(Slot& s) {
    --active_;
    stats_.copied += s.in_source;
    Report();
    StartNext(s);
  }

  BlockDevice& src_;
  BlockDevice& dst_;
  const CopyOptions& options_;
  std::unique_ptr<IoQueue> src_q_, dst_q_;
  std::vector<Slot> slots_;
  uint64_t chunk_ = 2 << 20;
  uint64_t size_ = 0, next_ = 0;
  uint64_t span_ = 0;  // size_ rounded up to the destination's logical block
  CopyStats stats_;
  int active_ = 0;
  std::optional<Error> error_;
  uint64_t error_offset_ = 0;
  Slot* failed_read_ = nullptr;  // the slot whose read failed with error_, if that is error_
};

// The path of the file `device` reads in the end (the "path" property of the lowest device of
// its stack), or "" when it is not a file.
std::string BottomFile(const BlockDevice& device) {
  const BlockDevice* d = &device;
  while (d->lower() != nullptr) d = d->lower();
  PropertyList props;
  d->Properties(props);
  for (const Property& p : props) {
    if (p.key == "path" && std::holds_alternative<std::string>(p.value)) {
      return std::get<std::string>(p.value);
    }
  }
  return "";
}

}  // namespace

Result<CopyStats> CopyImage(BlockDevice& src, BlockDevice& dst, const CopyOptions& options) {
  return Copier(src, dst, options).Run();
}

Result<CopyStats> ConvertImage(BlockDevice& src, const std::string& dst,
                               const ConvertOptions& options) {
  CopyOptions copy;
  copy.progress = options.progress;
  copy.stop = options.stop;
  if (IsStackSpec(dst)) {
    if (!options.format.empty() || !options.create_options.empty() || options.overwrite) {
      return MakeError(Errc::kInvalidArgument,
                       "a format, create options and overwrite make a new file; '" + dst +
                           "' is a stack spec, which is written as it is");
    }
    VSTACK_ASSIGN_OR_RETURN(DevicePtr device, Open(dst));
    VSTACK_ASSIGN_OR_RETURN(CopyStats stats, CopyImage(src, *device, copy));
    VSTACK_RETURN_IF_ERROR(device->Close());
    return stats;
  }
  // The source's own file, however it was named (a path, a spec, a link): refused by name, not
  // by its lock, which this process holds and which would say "in use by another process".
  {
    std::error_code ec;
    const std::string own = BottomFile(src);
    if (!own.empty() && std::filesystem::equivalent(own, dst, ec)) {
      return MakeError(SystemError(EBUSY),  // not a usage error: exit 1, as for a file in use
                       "SRC and DST are the same file '" + dst + "'; convert into another file");
    }
  }
  // Replacing a parent of the source (a file of its backing chain) would orphan the source
  // and every other child of that parent.
  for (const ChainImage& level : BackingChain("", src)) {
    constexpr std::string_view kFile = "vhd+file:";
    if (!level.spec.starts_with(kFile)) continue;
    std::error_code ec;
    if (level.device != &src &&
        std::filesystem::equivalent(level.spec.substr(kFile.size()), dst, ec)) {
      return MakeError(SystemError(EBUSY), "'" + dst + "' is a parent of the source (" +
                                               "in its backing chain): replacing it " +
                                               "would break the source");
    }
  }
  const std::string format = options.format.empty() ? "raw" : options.format;
  Result<NewImageFile> created = NewImageFile::Create(dst, format, src.geometry().size_bytes,
                                                      options.create_options, options.overwrite);
  if (!created) {
    // The size is the source's, not the caller's: a format that cannot hold it is not a bad
    // request (create's Errc::kInvalidArgument or kBadSpec, a usage error on the command line),
    // but a source this format cannot take.
    Error e = std::move(created).error();
    if ((e.code == make_error_code(Errc::kInvalidArgument) ||
         e.code == make_error_code(Errc::kBadSpec)) &&
        e.message.find("option 'size'") != std::string::npos) {
      return MakeError(Errc::kNotSupported,
                       "the source (" + std::to_string(src.geometry().size_bytes) +
                           " bytes) cannot be converted to " + format + ": " + e.message);
    }
    return e;
  }
  NewImageFile file = std::move(*created);
  // A new image reads as zeros, unless it has a parent (a differencing VHD made with
  // backing_file=): then the source's zeros are written too, or the parent's data would show
  // through them.
  copy.dst_reads_zero = BackingChain(dst, file.device()).size() == 1;
  // A copy that fails leaves no new file, and a file it would have replaced as it was: the
  // error says which, so that nobody goes looking for a partial image.
  const bool replacing = file.write_path() != dst;
  const auto failed = [&](Error e) {
    if (e.code != make_error_code(Errc::kCancelled)) {
      e.message += replacing ? "; '" + dst + "' is left as it was"
                             : "; the new file '" + dst + "' was removed";
    }
    return e;
  };
  Result<CopyStats> stats = CopyImage(src, file.device(), copy);
  if (!stats) return failed(std::move(stats).error());
  if (options.stop != nullptr && options.stop->load()) {  // asked during the final flush
    return MakeError(Errc::kCancelled, "interrupted before the new file was put in place");
  }
  if (Status s = file.Commit(); !s) return failed(s.error());
  return stats;
}

}  // namespace vstack
