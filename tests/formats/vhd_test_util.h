// Helpers for the VHD tests: images on memory and in files, raw byte access to image files
// (to read structures or corrupt them), and a queue-driving device wrapper.
#ifndef VSTACK_TESTS_FORMATS_VHD_TEST_UTIL_H_
#define VSTACK_TESTS_FORMATS_VHD_TEST_UTIL_H_

#include <string>
#include <vector>

#include "formats/vhd/vhd_create.h"
#include "formats/vhd/vhd_device.h"
#include "lib/block_device.h"
#include "lib/registry.h"

namespace vstack::testing {

// Create parameters from "k=v,k=v" (the create_options of `vhd`).
vhd::CreateParams VhdParams(uint64_t size, const std::string& options = "");

// A VHD written onto a memory device of `device_size` bytes (0: exactly the image's file
// size), opened with the vhd layer.
Result<DevicePtr> MemoryVhd(uint64_t size, const std::string& options = "",
                            uint64_t device_size = 0);

// Creates `path` with CreateImage("vhd", ...) and opens it as vhd+file:PATH.
Result<DevicePtr> FileVhd(const std::string& path, uint64_t size, const std::string& options = "");

// Whole-file byte access (no vstack involved).
std::vector<unsigned char> ReadAll(const std::string& path);
void WriteAll(const std::string& path, const std::vector<unsigned char>& bytes);
// Overwrites `bytes` at `offset` of the file.
void Patch(const std::string& path, uint64_t offset, const std::vector<unsigned char>& bytes);
uint64_t FileSize(const std::string& path);
uint32_t BE32(const std::vector<unsigned char>& b, uint64_t at);
uint64_t BE64(const std::vector<unsigned char>& b, uint64_t at);
void PutBE32(std::vector<unsigned char>& b, uint64_t at, uint32_t v);
void PutBE64(std::vector<unsigned char>& b, uint64_t at, uint64_t v);
// Recomputes the checksum of the footer (512 bytes) or header (1024 bytes) at `at`.
void FixFooterChecksum(std::vector<unsigned char>& b, uint64_t at);
void FixHeaderChecksum(std::vector<unsigned char>& b, uint64_t at);

// Writes / reads through a device with a fresh queue (sync).
void WriteBytes(BlockDevice& dev, uint64_t offset, const std::vector<unsigned char>& data);
std::vector<unsigned char> ReadBytes(BlockDevice& dev, uint64_t offset, uint64_t length);

// The value of the vhd layer's counter `name` (top device of the stack).
uint64_t Counter(BlockDevice& dev, const std::string& name);

}  // namespace vstack::testing

#endif  // VSTACK_TESTS_FORMATS_VHD_TEST_UTIL_H_
