#include "tests/formats/vhd_test_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <fstream>

#include "formats/vhd/vhd_footer.h"
#include "lib/aligned_buffer.h"
#include "lib/spec.h"
#include "lib/sync_io.h"
#include "tests/testing/test_util.h"

namespace vstack::testing {

vhd::CreateParams VhdParams(uint64_t size, const std::string& options) {
  const ComponentInfo* c = Registry::Global().Find("vhd");
  std::vector<SpecOption> given;
  if (!options.empty()) {
    auto parts = ParseSpec("vhd:" + options);
    EXPECT_TRUE(parts.has_value()) << options;
    if (parts) given = (*parts)[0].options;
  }
  OptionValues values("vhd", "", given, &c->create_options);
  auto p = vhd::ParseCreateParams(size, values);
  EXPECT_TRUE(p.has_value()) << (p ? "" : p.error().message);
  return p ? *p : vhd::CreateParams{};
}

Result<DevicePtr> MemoryVhd(uint64_t size, const std::string& options, uint64_t device_size) {
  const vhd::CreateParams p = VhdParams(size, options);
  const uint64_t file = vhd::NewImageFileSize(p);
  VSTACK_ASSIGN_OR_RETURN(DevicePtr mem,
                          Open("memory:" + std::to_string(device_size ? device_size : file)));
  VSTACK_RETURN_IF_ERROR(vhd::WriteNewImage(*mem, p));
  return vhd::VhdDevice::Open(std::move(mem));
}

Result<DevicePtr> FileVhd(const std::string& path, uint64_t size, const std::string& options) {
  VSTACK_RETURN_IF_ERROR(CreateImage("vhd", path, size, options));
  return Open("vhd+" + FormatSpecPart(SpecPart{"file", path, {}}));
}

std::vector<unsigned char> ReadAll(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<unsigned char>(std::istreambuf_iterator<char>(f), {});
}

void WriteAll(const std::string& path, const std::vector<unsigned char>& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

void Patch(const std::string& path, uint64_t offset, const std::vector<unsigned char>& bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY);
  ASSERT_GE(fd, 0) << path;
  ASSERT_EQ(::pwrite(fd, bytes.data(), bytes.size(), static_cast<off_t>(offset)),
            static_cast<ssize_t>(bytes.size()));
  ::close(fd);
}

uint64_t FileSize(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

uint32_t BE32(const std::vector<unsigned char>& b, uint64_t at) {
  return uint32_t{b[at]} << 24 | uint32_t{b[at + 1]} << 16 | uint32_t{b[at + 2]} << 8 | b[at + 3];
}
uint64_t BE64(const std::vector<unsigned char>& b, uint64_t at) {
  return uint64_t{BE32(b, at)} << 32 | BE32(b, at + 4);
}
void PutBE32(std::vector<unsigned char>& b, uint64_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) b[at + i] = static_cast<unsigned char>(v >> (24 - 8 * i));
}
void PutBE64(std::vector<unsigned char>& b, uint64_t at, uint64_t v) {
  PutBE32(b, at, static_cast<uint32_t>(v >> 32));
  PutBE32(b, at + 4, static_cast<uint32_t>(v));
}

void FixFooterChecksum(std::vector<unsigned char>& b, uint64_t at) {
  PutBE32(b, at + 64, vhd::VhdChecksum(std::span<const uint8_t>(&b[at], 512), 64));
}
void FixHeaderChecksum(std::vector<unsigned char>& b, uint64_t at) {
  PutBE32(b, at + 36, vhd::VhdChecksum(std::span<const uint8_t>(&b[at], 1024), 36));
}

void WriteBytes(BlockDevice& dev, uint64_t offset, const std::vector<unsigned char>& data) {
  SyncIo io(dev);
  AlignedBuffer buf(data.size(), 4096);
  std::memcpy(buf.data(), data.data(), data.size());
  ASSERT_OK(io.Write(offset, buf.span()));
}

std::vector<unsigned char> ReadBytes(BlockDevice& dev, uint64_t offset, uint64_t length) {
  SyncIo io(dev);
  AlignedBuffer buf(length, 4096);
  EXPECT_OK(io.Read(offset, buf.span()));
  auto* p = reinterpret_cast<unsigned char*>(buf.data());
  return std::vector<unsigned char>(p, p + length);
}

uint64_t Counter(BlockDevice& dev, const std::string& name) { return dev.Stats().counter(name); }

}  // namespace vstack::testing
