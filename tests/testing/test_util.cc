#include "tests/testing/test_util.h"

#include <fcntl.h>
#include <malloc.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include "tests/testing/tools.h"

namespace vstack::testing {

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string tmpl = std::string(base && *base ? base : "/var/tmp") + "/vstack-test-XXXXXX";
  char* p = ::mkdtemp(tmpl.data());
  if (p == nullptr) {
    ADD_FAILURE() << "mkdtemp failed: " << std::strerror(errno);
    return;
  }
  path_ = p;
}

TempDir::~TempDir() {
  std::error_code ec;
  if (!path_.empty()) std::filesystem::remove_all(path_, ec);
}

void Rng::Fill(void* data, size_t len) {
  unsigned char* p = static_cast<unsigned char*>(data);
  size_t i = 0;
  for (; i + 8 <= len; i += 8) {
    uint64_t v = Next();
    std::memcpy(p + i, &v, 8);
  }
  if (i < len) {
    uint64_t v = Next();
    std::memcpy(p + i, &v, len - i);
  }
}

AlignedBuffer RandomBuffer(Rng& rng, size_t len, size_t alignment) {
  AlignedBuffer b(len, alignment);
  rng.Fill(b.data(), len);
  return b;
}

namespace {

struct CallCounts {
  std::map<IoRequest*, int> calls;
};

void CountCall(IoRequest& r) { ++static_cast<CallCounts*>(r.user_data)->calls[&r]; }

}  // namespace

size_t RunBatch(IoQueue& queue, std::vector<IoRequest>& reqs) {
  CallCounts counter;
  std::vector<IoRequest*> ptrs;
  for (IoRequest& r : reqs) {
    r.on_complete = &CountCall;
    r.user_data = &counter;
    ptrs.push_back(&r);
  }
  queue.Submit(ptrs);
  while (counter.calls.size() < reqs.size() && queue.in_flight() > 0) queue.Poll(1);
  queue.Poll(0);
  size_t total = 0;
  for (auto& [req, n] : counter.calls) {
    EXPECT_EQ(n, 1) << "request completed " << n << " times";
    total += static_cast<size_t>(n);
  }
  EXPECT_EQ(counter.calls.size(), reqs.size()) << "some requests never completed";
  return total;
}

SmallFilesystem::SmallFilesystem(const std::string& dir, const std::string& size) : dir_(dir) {
  std::filesystem::create_directories(dir_);
  mounted_ =
      RunCommand("mount -t tmpfs -o size=" + size + " vstack-enospc " + dir_).status == 0;
}

SmallFilesystem::~SmallFilesystem() {
  if (mounted_) RunCommand("umount " + dir_);
}

CommandResult RunCommand(const std::string& command) {
  CommandResult r;
  FILE* p = ::popen((command + " 2>&1").c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  const int w = ::pclose(p);
  r.status = WIFEXITED(w) ? WEXITSTATUS(w) : -1;
  return r;
}

CommandResult RunVstack(const std::string& args) {
  std::string command = VSTACK_CLI;  // appended, not `+`: g++ 12 warns falsely on the temporary
  command.append(" ").append(args);
  return RunCommand(command);
}

bool HaveProgram(const std::string& program) {
  return RunCommand("command -v " + program + " >/dev/null").status == 0;
}

bool ToolsRequired() {
  auto is = [](const char* name, const char* value) {
    const char* v = std::getenv(name);
    return v != nullptr && std::strcmp(v, value) == 0;
  };
  return is("CI", "true") || is("VSTACK_REQUIRE_TOOLS", "1");
}

uint64_t ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  uint64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

void ResetPeakResident() {
  // Freed memory the allocator still holds would be reused without raising the peak (tests
  // run before this one in the same process): give it back first.
  malloc_trim(0);
  std::ofstream("/proc/self/clear_refs") << "5";  // Linux >= 4.0: VmHWM := current RSS
}

uint64_t PeakResidentBytes() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stoull(line.substr(6)) * 1024;  // "N kB"
  }
  return 0;
}

void WriteFile(const std::string& path, uint64_t size, unsigned char byte) {
  int fd = ::open(path.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0644);
  ASSERT_GE(fd, 0) << path << ": " << std::strerror(errno);
  std::vector<unsigned char> buf(1 << 20, byte);
  for (uint64_t done = 0; done < size;) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(buf.size(), size - done));
    ASSERT_EQ(::write(fd, buf.data(), n), static_cast<ssize_t>(n));
    done += n;
  }
  ::close(fd);
}

}  // namespace vstack::testing
