// null: reads return zeros, writes are dropped, every request completes inside Submit. It
// measures the pure software cost of whatever is stacked on it.
//
// Spec: null:SIZE[,block=512|4096][,fill=on|off]
// fill=off skips zero-filling read buffers, to time the request path alone.
#ifndef VSTACK_BLOCKDEV_NULL_NULL_DEVICE_H_
#define VSTACK_BLOCKDEV_NULL_NULL_DEVICE_H_

#include "lib/block_device.h"

namespace vstack {

class NullDevice final : public BlockDevice {
 public:
  NullDevice(uint64_t size, uint32_t block, bool fill_reads, bool read_only);

  std::string Describe() const override;
  Status MapExtents(uint64_t offset, uint64_t length, std::vector<Extent>* out) override;
  bool fresh() const override { return true; }  // it holds nothing
  bool fill_reads() const { return fill_reads_; }

 protected:
  Result<std::unique_ptr<IoQueue>> DoOpenQueue() override;

 private:
  bool fill_reads_;
};

}  // namespace vstack

#endif  // VSTACK_BLOCKDEV_NULL_NULL_DEVICE_H_
