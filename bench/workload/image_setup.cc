#include "bench/workload/image_setup.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "bench/workload/rng.h"
#include "bench/workload/runner.h"

namespace vstack::bench {

std::string DefaultScratchParent() {
  const char* t = std::getenv("TMPDIR");
  return t && *t ? t : "/var/tmp";
}

Result<ScratchDir> ScratchDir::Create(const std::string& parent) {
  std::string tmpl = parent + "/vstack-bench.XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) {
    const int err = errno;
    return MakeError(SystemError(err), "cannot create a scratch directory in '" + parent +
                                           "': " + std::strerror(err));
  }
  return ScratchDir(tmpl);
}

ScratchDir::~ScratchDir() {
  if (path_.empty()) return;
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

Status RemoveFile(const std::string& path) {
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    const int err = errno;
    return MakeError(SystemError(err), "cannot remove '" + path + "': " + std::strerror(err));
  }
  return OkStatus();
}

Status CopySparse(const std::string& src, const std::string& dst) {
  auto fail = [](const std::string& what, const std::string& path) {
    const int err = errno;
    return MakeError(SystemError(err), what + " '" + path + "': " + std::strerror(err));
  };
  const int in = ::open(src.c_str(), O_RDONLY | O_CLOEXEC);
  if (in < 0) return fail("cannot open", src);
  const int out = ::open(dst.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (out < 0) {
    Error e = fail("cannot create", dst);
    ::close(in);
    return e;
  }
  Status status;
  const off_t size = ::lseek(in, 0, SEEK_END);
  std::vector<char> buf(1 << 20);
  off_t pos = 0;
  while (status && pos < size) {
    off_t data = ::lseek(in, pos, SEEK_DATA);
    if (data < 0) break;  // ENXIO: only a hole is left
    off_t hole = ::lseek(in, data, SEEK_HOLE);
    if (hole < 0) hole = size;
    for (off_t at = data; at < hole && status;) {
      const size_t n = static_cast<size_t>(std::min<off_t>(hole - at, off_t(buf.size())));
      const ssize_t got = ::pread(in, buf.data(), n, at);
      if (got <= 0) {
        status = got < 0 ? fail("cannot read", src) : MakeError(Errc::kIo, "short read of " + src);
        break;
      }
      if (::pwrite(out, buf.data(), size_t(got), at) != got) status = fail("cannot write", dst);
      at += got;
    }
    pos = hole;
  }
  if (status && ::ftruncate(out, size) != 0) status = fail("cannot resize", dst);
  ::close(in);
  if (::close(out) != 0 && status) status = fail("cannot close", dst);
  return status;
}

Status FillDevice(BlockDevice& device, const WorkloadKnobs& k, const std::atomic<bool>* stop) {
  const uint64_t region = RegionBytes(k, device);
  WorkloadKnobs fill = k;
  fill.target_size = region;
  fill.pattern = AccessPattern::kSequential;
  fill.distribution = Distribution::kUniform;
  fill.write_pct = 100;
  fill.flush_interval = 0;
  fill.dedupe_pct = 0;
  fill.threads = 1;
  fill.queue_depth = 4;
  fill.warmup_s = 0;
  fill.seed = Mix64(k.seed ^ 0xF111F111F111F111ull);
  while (fill.block_size * 2 <= (1u << 20) && region % (uint64_t(fill.block_size) * 2) == 0) {
    fill.block_size *= 2;
  }
  fill.io_count = region / fill.block_size;
  RunControl control;
  control.stop = stop;
  VSTACK_ASSIGN_OR_RETURN(RunResult r, RunWorkload(device, fill, control));
  if (!r.error.empty()) return MakeError(Errc::kIo, "filling the device: " + r.error);
  if (r.interrupted) return MakeError(Errc::kCancelled, "interrupted while filling the device");
  return OkStatus();
}

}  // namespace vstack::bench
