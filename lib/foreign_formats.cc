#include "lib/foreign_formats.h"

#include <algorithm>
#include <cstring>

#include "lib/aligned_buffer.h"
#include "lib/sync_io.h"

namespace vstack {

const std::vector<ProbeSignature>& ForeignFormatSignatures() {
  using namespace std::string_literals;
  // Where qemu's drivers look (block/qcow2.c, qed.c, vmdk.c, vdi.c, parallels.c and crypto's
  // LUKS header); all within the first 512 bytes.
  static const std::vector<ProbeSignature> kSignatures = {
      {0, "QFI\xfb"s, "qcow2"},  // qcow (version 1) shares the magic
      {0, "QED\0"s, "QED"},
      {0, "KDMV"s, "VMDK"},                   // a sparse extent
      {0, "COWD"s, "VMDK"},                   // an ESX sparse extent
      {0, "# Disk DescriptorFile"s, "VMDK"},  // a descriptor
      {64, "\x7f\x10\xda\xbe"s, "VDI"},       // 0xbeda107f, little-endian
      {0, "WithoutFreeSpace"s, "Parallels"},
      {0, "WithouFreSpacExt"s, "Parallels"},
      {0, "LUKS\xba\xbe"s, "LUKS"},
  };
  return kSignatures;
}

const ProbeSignature* FindForeignFormat(BlockDevice& device) {
  const uint64_t size = device.size_bytes();
  const Geometry& g = device.geometry();
  const size_t length = std::max<size_t>(512, g.logical_block);
  if (size < length) return nullptr;
  AlignedBuffer first(length, std::max<size_t>(g.mem_alignment, 4096));
  SyncIo io(device);
  if (io.Read(0, first.span())) return nullptr;
  const char* bytes = reinterpret_cast<const char*>(first.data());
  for (const ProbeSignature& s : ForeignFormatSignatures()) {
    const auto at = static_cast<size_t>(s.offset);
    if (at + s.bytes.size() <= length &&
        std::memcmp(bytes + at, s.bytes.data(), s.bytes.size()) == 0) {
      return &s;
    }
  }
  return nullptr;
}

}  // namespace vstack
