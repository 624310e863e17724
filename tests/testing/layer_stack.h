// Helpers for tests that put layers on top of a device they built themselves (a RecordingDevice
// for crash tests, a FaultDevice for ENOSPC tests), and move whole device images in and out of
// memory.
#ifndef VSTACK_TESTS_TESTING_LAYER_STACK_H_
#define VSTACK_TESTS_TESTING_LAYER_STACK_H_

#include <string_view>
#include <vector>

#include "lib/block_device.h"
#include "lib/registry.h"

namespace vstack::testing {

// Opens the layers of `layers` (a spec without its backend, e.g. "dedup:grain=16K+zstd") on top
// of `lower`, bottom layer first, exactly as Open() would on a backend.
Result<DevicePtr> OpenLayersOn(std::string_view layers, DevicePtr lower,
                               const OpenOptions& options = {});

// A memory device of image.size() bytes holding `image`.
DevicePtr MemoryWithImage(const std::vector<unsigned char>& image, uint32_t block = 512);

// Every byte of `device` (through a temporary queue).
std::vector<unsigned char> ReadAll(BlockDevice& device);

// Runs Check(kReadOnly) on every layer of the stack, top first, and returns the findings.
CheckResult CheckStack(BlockDevice& top);

}  // namespace vstack::testing

#endif  // VSTACK_TESTS_TESTING_LAYER_STACK_H_
