// Helpers for the VHDX tests: images on memory devices and the raw BAT of an image file.
#ifndef VSTACK_TESTS_FORMATS_VHDX_TEST_UTIL_H_
#define VSTACK_TESTS_FORMATS_VHDX_TEST_UTIL_H_

#include <string>
#include <vector>

#include "formats/vhdx/vhdx_create.h"
#include "lib/block_device.h"

namespace vstack::testing {

// Create parameters from "k=v,k=v" (the create_options of `vhdx`).
vhdx::CreateParams VhdxParams(uint64_t size, const std::string& options = "");

// A VHDX written onto a memory device of `device_size` bytes (0: exactly the image's size),
// opened with the vhdx layer.
Result<DevicePtr> MemoryVhdx(uint64_t size, const std::string& options = "",
                             uint64_t device_size = 0);

// Where the BAT entry of payload block `block` is in the image file's bytes.
uint64_t VhdxBatEntryOffset(const std::vector<unsigned char>& file, uint64_t block);
// The BAT entry of payload block `block` in the image file's bytes (current BAT on disk).
uint64_t VhdxBatEntry(const std::vector<unsigned char>& file, uint64_t block);

}  // namespace vstack::testing

#endif  // VSTACK_TESTS_FORMATS_VHDX_TEST_UTIL_H_
