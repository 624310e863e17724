// vstack convert [-p] [-f FMT] [-O raw|vhd|vpc] [-o OPTIONS] [--overwrite] SRC DST: copies the
// virtual disk of SRC into a new image DST, like qemu-img convert. SRC is a file (its format
// probed, or named by -f) or a stack spec; DST is a new file of format -O (default raw), created
// with -o OPTIONS (an existing file only with --overwrite), or an existing stack spec at least
// as large as SRC.
//
// Ranges SRC reports as zero (MapExtents) are not read; ranges that read as zeros are not
// written into a new DST (they stay holes: unallocated blocks of a dynamic VHD, holes of a raw
// file), at 4 KiB granularity; into an existing DST they become write-zeroes. Eight chunks
// are in flight at a time.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <optional>

#include "lib/aligned_buffer.h"
#include "lib/iovec.h"
#include "lib/registry.h"
#include "lib/size.h"
#include "lib/sync_io.h"
#include "tools/command.h"
#include "tools/image_args.h"
#include "tools/progress.h"

namespace vstack::cli {
namespace {

struct ConvertArgs {
  bool progress = false;
  bool overwrite = false;
  std::string src_format;
  std::string format;
  std::string options;
  std::string src;
  std::string dst;
};

constexpr uint64_t kZeroGrain = 4096;
constexpr int kDepth = 8;

// Copies src[0, size) to dst through their own queues, `kDepth` chunks at a time.
class Copier {
 public:
  Copier(BlockDevice& src, BlockDevice& dst, bool dst_is_new, Progress& progress)
      : src_(src), dst_(dst), dst_is_new_(dst_is_new), progress_(progress) {
    const uint64_t opt =
        std::max<uint64_t>(dst.geometry().optimal_transfer, src.geometry().optimal_transfer);
    chunk_ = std::clamp<uint64_t>(opt, 2 << 20, 8 << 20);
  }

  Status Run() {
    VSTACK_ASSIGN_OR_RETURN(src_q_, src_.OpenQueue());
    VSTACK_ASSIGN_OR_RETURN(dst_q_, dst_.OpenQueue());
    size_ = src_.geometry().size_bytes;
    const size_t align =
        std::max<size_t>({src_.geometry().mem_alignment, dst_.geometry().mem_alignment, 4096});
    slots_.resize(kDepth);
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
    if (error_) return *error_;
    IoRequest flush;
    flush.op = Op::kFlush;
    if (std::error_code ec = Execute(*dst_q_, flush)) {
      return MakeError(ec, "flushing the destination failed: " + ec.message());
    }
    src_q_.reset();
    dst_q_.reset();
    return OkStatus();
  }

  uint64_t written() const { return written_; }

 private:
  struct Slot {
    Copier* copier = nullptr;
    uint64_t offset = 0, length = 0;
    AlignedBuffer buf;
    iovec iov{};
    IoRequest read;
    std::vector<IoRequest> writes;
    std::vector<iovec> write_iov;
    size_t pending = 0;
  };

  void Fail(Error e) {
    if (!error_) error_ = std::move(e);
  }

  void StartNext(Slot& s) {
    while (!error_ && next_ < size_) {
      s.offset = next_;
      s.length = std::min(chunk_, size_ - next_);
      next_ += s.length;
      std::vector<Extent> ext;
      Status mapped = src_.MapExtents(s.offset, s.length, &ext);
      const bool all_zero = mapped && std::all_of(ext.begin(), ext.end(), [](const Extent& e) {
                              return (e.flags & kExtentZero) != 0;
                            });
      if (all_zero && dst_is_new_) {  // nothing to read or write: skip it here, iteratively
        copied_ += s.length;
        progress_.Set(copied_);
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
    s.iov = iovec{s.buf.data(), s.length};
    s.read = IoRequest{};
    s.read.op = Op::kRead;
    s.read.offset = s.offset;
    s.read.length = s.length;
    s.read.iov = &s.iov;
    s.read.iovcnt = 1;
    s.read.user_data = &s;
    s.read.on_complete = [](IoRequest& r) {
      Slot& slot = *static_cast<Slot*>(r.user_data);
      Copier& c = *slot.copier;
      if (r.status) {
        c.Fail(MakeError(r.status, "reading the source at offset " + std::to_string(slot.offset) +
                                       " failed: " + r.status.message()));
        c.Done(slot);
        return;
      }
      c.WriteChunk(slot);
    };
    src_q_->Submit(s.read);
  }

  // Writes the non-zero 4 KiB runs of the chunk (and zeroes the rest of an existing DST).
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
      if (!zero || !dst_is_new_) {
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
                                           " failed: " + r.status.message()));
          }
          if (--slot.pending == 0) c.Done(slot);
        };
        s.writes.push_back(w);
        if (!zero) written_ += w.length;
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
    copied_ += s.length;
    progress_.Set(copied_);
    StartNext(s);
  }

  BlockDevice& src_;
  BlockDevice& dst_;
  const bool dst_is_new_;
  Progress& progress_;
  std::unique_ptr<IoQueue> src_q_, dst_q_;
  std::vector<Slot> slots_;
  uint64_t chunk_ = 2 << 20;
  uint64_t size_ = 0, next_ = 0, copied_ = 0, written_ = 0;
  int active_ = 0;
  std::optional<Error> error_;
};

}  // namespace

void AddConvertCommand(CLI::App& app) {
  auto args = std::make_shared<ConvertArgs>();
  CLI::App* cmd = app.add_subcommand(
      "convert", "Copy an image into a new one of another format (qemu-img convert style)");
  cmd->add_flag("-p,--progress", args->progress, "show a progress bar");
  cmd->add_option("-f,--format", args->src_format,
                  "format of SRC: raw, vhd or vpc (default: probed from the file)");
  cmd->add_option("-O,--output-format", args->format,
                  "format of DST: raw (default), vhd (or vpc, qemu's name)");
  cmd->add_option("-o,--options", args->options, "create options for DST, e.g. subformat=fixed");
  cmd->add_flag("--overwrite", args->overwrite, "replace DST if it is an existing file");
  cmd->add_option("src", args->src, "source image file or stack spec")->required();
  cmd->add_option("dst", args->dst, "destination: a new file, or an existing stack spec")
      ->required();
  cmd->callback([args] {
    auto src_spec = ImageSpec(args->src, args->src_format);
    if (!src_spec) FailUsage("convert", src_spec.error().message);
    OpenOptions ro;
    ro.read_only = true;
    auto src = OpenImage(*src_spec, ro);
    if (!src) Fail("convert", src.error().ToString());
    const uint64_t size = (*src)->geometry().size_bytes;
    const bool dst_is_spec = IsStackSpec(args->dst);
    if (dst_is_spec && (!args->format.empty() || !args->options.empty() || args->overwrite)) {
      FailUsage("convert", "-O, -o and --overwrite make a new file; '" + args->dst +
                               "' is a stack spec, which is written as it is");
    }
    std::optional<Destination> file;
    if (!dst_is_spec) {
      std::error_code ec;
      if (std::filesystem::equivalent(args->src, args->dst, ec)) {
        Fail("convert", "SRC and DST are the same file '" + args->dst + "'");
      }
      auto claimed = Destination::Claim(args->dst, args->overwrite);
      if (!claimed) Fail("convert", claimed.error().message);
      file.emplace(std::move(*claimed));
      Status s = CreateImage(FormatName(args->format.empty() ? "raw" : args->format),
                             file->write_path(), size, args->options);
      if (!s && IsCreateUsageError(s.error())) {
        FailUsage("convert", s.error().message);  // an unknown format or -o option
      }
      if (!s) Fail("convert", s.error().ToString());
    }
    // A destination this command created is opened by its format's name, not probed: a probed
    // raw file refuses data that would make it look like another format (docs/stack-spec.md).
    auto dst_spec = file
                        ? ImageSpec(file->write_path(), args->format.empty() ? "raw" : args->format)
                        : Result<std::string>(args->dst);
    if (!dst_spec) Fail("convert", dst_spec.error().ToString());
    auto dst = file ? Open(*dst_spec) : OpenImage(args->dst);
    if (!dst) Fail("convert", dst.error().ToString());
    if ((*dst)->geometry().size_bytes < size) {
      Fail("convert",
           fmt::format("the destination ({} bytes) is smaller than the source ({} bytes)",
                       (*dst)->geometry().size_bytes, size));
    }
    Progress bar("convert", size, args->progress);
    Copier copier(**src, **dst, !dst_is_spec, bar);
    Status s = copier.Run();
    bar.Finish();
    if (!s) Fail("convert", s.error().ToString());
    Status closed = (*dst)->Close();
    if (!closed) Fail("convert", closed.error().ToString());
    if (file) {
      if (Status s = file->Commit(); !s) Fail("convert", s.error().message);
    }
  });
}

}  // namespace vstack::cli
