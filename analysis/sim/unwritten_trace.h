// What a new stack's top device shows before anything is written through it, traced down the
// stack by each device's own account (BlockDevice::OriginOfUnwritten) to bytes the simulator
// knows: zeros, or the differencing VHD's parent, which it filled. The model starts from this
// (SimStack::InitialContent); nothing is read through the stack under test, so it is not its
// own oracle.
#ifndef VSTACK_ANALYSIS_SIM_UNWRITTEN_TRACE_H_
#define VSTACK_ANALYSIS_SIM_UNWRITTEN_TRACE_H_

#include <cstdint>
#include <vector>

#include "lib/block_device.h"

namespace vstack::sim {

// Bytes [offset, offset + length) of the top device: zeros, or the parent's bytes from
// `parent_offset` on.
struct ShownRun {
  uint64_t offset = 0;
  uint64_t length = 0;
  bool parent = false;
  uint64_t parent_offset = 0;
};

// The runs that cover `top`, in order, where nothing has been written through it since it was
// made. `parent`: the device whose bytes the simulator knows (a differencing VHD's parent), or
// nullptr. Fails, naming the device, where a device does not say where its bytes come from
// (kUnknown) or points outside the device it names.
Result<std::vector<ShownRun>> TraceUnwritten(const BlockDevice& top, const BlockDevice* parent);

}  // namespace vstack::sim

#endif  // VSTACK_ANALYSIS_SIM_UNWRITTEN_TRACE_H_
