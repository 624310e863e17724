#include "bench/workload/host_ready.h"

#include <fcntl.h>
#include <unistd.h>

#include <charconv>

namespace vstack::bench {
namespace {

// Skips blanks, then reads one unsigned decimal; false if there is none.
bool NextNumber(std::string_view& text, uint64_t& value) {
  size_t i = 0;
  while (i < text.size() && (text[i] == ' ' || text[i] == '\t')) ++i;
  const char* begin = text.data() + i;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(begin, end, value);
  if (ec != std::errc() || ptr == begin) return false;
  text.remove_prefix(static_cast<size_t>(ptr - text.data()));
  return true;
}

}  // namespace

std::optional<SchedStat> ParseSchedStat(std::string_view text) {
  SchedStat s;
  if (!NextNumber(text, s.on_cpu_ns) || !NextNumber(text, s.run_queue_ns) ||
      !NextNumber(text, s.timeslices)) {
    return std::nullopt;
  }
  for (char c : text) {
    if (c != ' ' && c != '\t' && c != '\n') return std::nullopt;
  }
  if (s.on_cpu_ns == 0 && s.run_queue_ns == 0 && s.timeslices == 0) return std::nullopt;
  return s;
}

std::string ReadProcFile(const std::string& path) {
  // POSIX reads: libstdc++'s filebuf throws on a read error (ESRCH from the file of a thread
  // that exited between the open and the read), which would end the whole run.
  std::string text;
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return text;
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0) text.append(buf, static_cast<size_t>(n));
  close(fd);
  if (n < 0) text.clear();
  return text;
}

std::optional<SchedStat> ReadSchedStat(const std::string& path) {
  const std::string text = ReadProcFile(path);
  if (text.empty()) return std::nullopt;
  return ParseSchedStat(text);
}

std::string ThreadSchedStatPath(int tid) {
  return "/proc/self/task/" + std::to_string(tid) + "/schedstat";
}

void SchedSnapshot::Add(int tid, const std::optional<SchedStat>& s, bool required) {
  if (s) {
    threads[tid] = *s;
  } else if (required) {
    complete = false;
  }
}

double HostReady::Pct() const {
  if (!measured || threads == 0 || wall_s <= 0) return -1;
  return double(run_queue_ns) / 1e9 / (double(threads) * wall_s) * 100;
}

HostReady HostReadyBetween(const SchedSnapshot& before, const SchedSnapshot& after, double wall_s) {
  HostReady h;
  h.wall_s = wall_s;
  if (!before.complete || !after.complete || after.threads.empty()) return h;
  h.measured = true;
  for (const auto& [tid, s] : after.threads) {
    auto it = before.threads.find(tid);
    const bool counts_from_zero =
        it == before.threads.end() || it->second.run_queue_ns > s.run_queue_ns;
    h.run_queue_ns += s.run_queue_ns - (counts_from_zero ? 0 : it->second.run_queue_ns);
    ++h.threads;
  }
  return h;
}

}  // namespace vstack::bench
