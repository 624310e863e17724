#include "nbd/nbd_export.h"

#include <algorithm>
#include <cerrno>

#include "lib/registry.h"

namespace vstack::nbd {
namespace {

uint32_t FloorPowerOfTwo(uint64_t v) {
  uint32_t p = 1;
  while (p <= v / 2 && p < (1u << 31)) p <<= 1;
  return p;
}

}  // namespace

int ErrnoFor(std::error_code ec) {
  if (!ec) return 0;
  if (ec.category() == std::system_category() || ec.category() == std::generic_category()) {
    return ec.value() > 0 ? ec.value() : EIO;
  }
  if (ec == make_error_code(Errc::kCancelled)) return ESHUTDOWN;
  const std::error_condition c = ec.default_error_condition();
  if (c.category() == std::generic_category() && c.value() > 0) return c.value();
  return EIO;
}

Result<std::unique_ptr<NbdExport>> NbdExport::Open(const std::string& spec_or_path,
                                                   bool read_only) {
  OpenOptions options;
  options.read_only = read_only;
  std::string spec;
  VSTACK_ASSIGN_OR_RETURN(DevicePtr device, OpenImage(spec_or_path, options, &spec));
  return std::make_unique<NbdExport>(std::move(spec), std::move(device));
}

NbdExport::NbdExport(std::string spec, DevicePtr device)
    : io_(std::move(spec), std::move(device)) {}

NbdExport::~NbdExport() = default;

BlockSizes NbdExport::block_sizes() const {
  const Geometry& g = device().geometry();
  BlockSizes b;
  b.minimum = g.logical_block;
  // NBD wants a power of two between 512 bytes and 32 MiB, at least the minimum.
  const uint64_t physical = std::max<uint64_t>(g.physical_block, g.logical_block);
  b.preferred = std::clamp<uint32_t>(FloorPowerOfTwo(physical), std::max(512u, b.minimum),
                                     kMaxRequestBytes);
  b.maximum = kMaxRequestBytes / b.minimum * b.minimum;
  return b;
}

ExportFlags NbdExport::flags() const {
  const BlockDevice& d = device();
  ExportFlags f;
  f.writable = d.Has(kCapWrite);
  f.flush = d.Has(kCapFlush);
  // Without native FUA the queue emulates it with a flush after the request.
  f.fua = f.writable && (d.Has(kCapFua) || d.Has(kCapFlush));
  f.trim = f.writable && d.Has(kCapDiscard);
  // Without native write-zeroes the queue writes zeros; FAST_ZERO then fails at once with
  // kNotSupported, which is exactly what a client asking for a fast zero wants to know.
  f.zero = f.writable;
  f.fast_zero = f.writable;
  f.extents = d.Has(kCapExtents);
  // All connections share one device; a flush on any queue makes every completed write
  // durable, and reads see every completed write (docs/design.md), which is what multi-conn
  // promises. A stack that allows one queue at a time can only serve one connection.
  f.multi_conn = parallel();
  return f;
}

std::error_code NbdExport::Read(void* buf, uint32_t count, uint64_t offset) {
  return io_.Read(offset, {static_cast<std::byte*>(buf), count});
}

std::error_code NbdExport::Write(const void* buf, uint32_t count, uint64_t offset,
                                 IoFlags flags) {
  return io_.Write(offset, {static_cast<const std::byte*>(buf), count}, flags);
}

std::error_code NbdExport::Flush() { return io_.Flush(); }

std::error_code NbdExport::Trim(uint32_t count, uint64_t offset, IoFlags flags) {
  return io_.Discard(offset, count, flags);
}

std::error_code NbdExport::Zero(uint32_t count, uint64_t offset, IoFlags flags) {
  return io_.WriteZeroes(offset, count, flags);
}

Status NbdExport::Extents(uint32_t count, uint64_t offset, std::vector<Extent>* out) {
  if (offset >= size()) {
    return MakeError(Errc::kOutOfRange, "block status at offset " + std::to_string(offset) +
                                            " is beyond the end (" + std::to_string(size()) + ")");
  }
  const uint64_t length = std::min<uint64_t>({count, kExtentWindow, size() - offset});
  if (length == 0) return MakeError(Errc::kInvalidArgument, "block status of zero length");
  return device().MapExtents(offset, length, out);
}

}  // namespace vstack::nbd
