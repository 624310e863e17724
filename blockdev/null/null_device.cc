#include "blockdev/null/null_device.h"

#include "lib/iovec.h"
#include "lib/registry.h"
#include "lib/size.h"

namespace vstack {
namespace {

class NullQueue final : public IoQueue {
 public:
  explicit NullQueue(NullDevice& device) : IoQueue(device), fill_(device.fill_reads()) {}

 protected:
  void DoSubmit(std::span<IoRequest* const> batch) override {
    for (IoRequest* r : batch) {
      if (r->op == Op::kRead && fill_) ZeroIov(r->iov, r->iovcnt, 0, r->length);
      Complete(*r);
    }
  }

 private:
  bool fill_;
};

}  // namespace

NullDevice::NullDevice(uint64_t size, uint32_t block, bool fill_reads, bool read_only)
    : BlockDevice("null",
                  Geometry{.size_bytes = size, .logical_block = block, .physical_block = block},
                  read_only ? (kCapRead | kCapFlush | kCapExtents | kCapThreadSafe)
                            : (kCapRead | kCapWrite | kCapFlush | kCapDiscard | kCapWriteZeroes |
                               kCapFua | kCapDiscardZeroes | kCapFastZeroes | kCapExtents |
                               kCapThreadSafe)),
      fill_reads_(fill_reads) {}

std::string NullDevice::Describe() const {
  return "null " + FormatSize(geometry().size_bytes) + " (reads zeros, drops writes)";
}

Status NullDevice::MapExtents(uint64_t offset, uint64_t length, std::vector<Extent>* out) {
  VSTACK_RETURN_IF_ERROR(CheckRange(offset, length));
  AppendExtent(out, offset, length, kExtentHole | kExtentZero);
  return OkStatus();
}

Result<std::unique_ptr<IoQueue>> NullDevice::DoOpenQueue() {
  return std::unique_ptr<IoQueue>(new NullQueue(*this));
}

namespace {

ComponentInfo NullComponent() {
  auto open_null = [](const OptionValues& o, const OpenOptions& open) -> Result<DevicePtr> {
    VSTACK_ASSIGN_OR_RETURN(uint32_t block, o.LogicalBlock("block"));
    VSTACK_ASSIGN_OR_RETURN(uint64_t size, o.PositionalSize(block));
    VSTACK_ASSIGN_OR_RETURN(bool fill, o.Bool("fill"));
    return MakeDevice<NullDevice>(size, block, fill, open.read_only);
  };
  return BackendComponent(
      "null", "reads zeros, drops writes: measures pure software overhead", "SIZE",
      {{"block", "logical block size: 512 or 4096", "512"},
       {"fill", "zero-fill read buffers (off times the request path alone)", "on"}},
      open_null);
}

}  // namespace

VSTACK_REGISTER_COMPONENT(null, NullComponent());

}  // namespace vstack
