// nbdkit-vstack-plugin.so: serves one vstack stack through nbdkit (docs/layers/nbd.md).
//
//   nbdkit vstack spec=vhd+file:/var/tmp/d.vhd           (installed in nbdkit's plugindir)
//   nbdkit /path/to/build/nbdkit-vstack-plugin.so memory:1G   (spec= is the magic key)
//
// Every callback is a thin mapping onto one NbdExport (nbd/nbd_export.h), which owns the
// stack, the per-thread queues and the NBD semantics. The stack is opened in config_complete,
// so a bad spec is reported before nbdkit starts listening and the thread model can follow the
// stack: parallel when it is thread_safe, one connection at a time otherwise.
//
// Forking: unless run with -f, nbdkit forks into the background after get_ready, and the parent
// leaves with exit(). The export is therefore held by a plain pointer (no static destructor
// closes it in the parent), and the child reopens the stack in after_fork so that nothing a
// layer set up at open (threads, locks) is lost across fork.
#define NBDKIT_API_VERSION 2
#include <dirent.h>
#include <fcntl.h>
#include <nbdkit-plugin.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "lib/registry.h"
#include "nbd/nbd_export.h"
#include "tools/nbd/serve_report.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif

#define THREAD_MODEL NBDKIT_THREAD_MODEL_PARALLEL

#ifndef VSTACK_VERSION
#define VSTACK_VERSION "0.0.0"
#endif

namespace vstack::nbd {
namespace {

struct PluginConfig {
  std::string spec;        // spec=
  bool read_only = false;  // readonly=
  std::string stats_path;  // stats=
  std::string uri;         // uri=: set by `vstack serve`, which wants a ready line and a summary
  std::string cwd;         // where relative paths in the spec are resolved
};

PluginConfig g_config;
// Deliberately a plain pointer: see "Forking" above. Deleted in vstack_cleanup.
NbdExport* g_export = nullptr;
pid_t g_ready_pid = 0;
std::chrono::steady_clock::time_point g_started;

// An error line: "vstack serve: MESSAGE" on stderr under `vstack serve` (which sets uri=), else
// nbdkit's own error line (nbdkit run by hand).
void ErrorLine(const std::string& message) {
  if (!g_config.uri.empty()) {
    std::fprintf(stderr, "vstack serve: %s\n", message.c_str());
  } else {
    nbdkit_error("%s", message.c_str());
  }
}

int Fail(const Error& e) {
  ErrorLine(e.ToString());
  return -1;
}

// Reports a failed data request: the message goes to the server log, the errno to the client.
int FailRequest(const char* what, uint64_t offset, uint32_t count, std::error_code ec,
                uint32_t flags = 0) {
  const int err = ErrnoFor(ec);
  if ((flags & NBDKIT_FLAG_FAST_ZERO) && (err == ENOTSUP || err == EOPNOTSUPP)) {
    // A client probing for fast zeroes; not a problem worth an error line.
    nbdkit_debug("fast zero at offset %" PRIu64 " not supported: %s", offset,
                 ec.message().c_str());
  } else {
    ErrorLine(std::string(what) + " at offset " + std::to_string(offset) + " length " +
              std::to_string(count) + " of " + g_export->spec() + ": " + ec.message());
  }
  nbdkit_set_error(err);
  return -1;
}

IoFlags ToIoFlags(uint32_t flags) {
  IoFlags f = 0;
  if (flags & NBDKIT_FLAG_FUA) f |= kIoFua;
  if (flags & NBDKIT_FLAG_MAY_TRIM) f |= kIoMayUnmap;
  if (flags & NBDKIT_FLAG_FAST_ZERO) f |= kIoFastZero;
  return f;
}

int OpenExport() {
  auto opened = NbdExport::Open(g_config.spec, g_config.read_only);
  if (!opened) {
    Fail(opened.error());
    const std::error_code ec = opened.error().code;
    const bool not_writable = ec == std::errc::permission_denied ||
                              ec == std::errc::read_only_file_system ||
                              ec == std::errc::operation_not_permitted;
    if (not_writable && !g_config.read_only) {
      ErrorLine(std::string("the stack cannot be opened for writing; to serve it read-only, "
                            "add ") +
                (g_config.uri.empty() ? "readonly=on" : "--read-only to vstack serve"));
    }
    return -1;
  }
  g_export = opened->release();
  if (!g_config.stats_path.empty()) {  // the stats file reports latency: keep it (lib/stats.h)
    for (BlockDevice* d = &g_export->device(); d != nullptr; d = d->lower()) {
      d->SetStatsMode(StatsMode::kLatency);
    }
  }
  return 0;
}

// --- loading --------------------------------------------------------------------------------

#if defined(__SANITIZE_ADDRESS__)
// Sanitizer builds only (`vstack serve` preloads the ASan runtime into nbdkit): once nbdkit has
// translated any error message (strerror, dlerror), its exit deadlocks in libp11-kit's
// destructor under the preloaded runtime (glibc's locale lock is left inconsistent). Leave
// right after the leak check instead, with the status nbdkit gave exit(). Registered when the
// plugin loads, this handler runs before the ones registered earlier, _dl_fini among them.
void ExitAfterLeakCheck(int status, void*) {
  __lsan_do_leak_check();
  std::fflush(nullptr);
  _exit(status);
}
void Load() { on_exit(&ExitAfterLeakCheck, nullptr); }
#else
void Load() {}
#endif

// --- stopping with clients connected -------------------------------------------------------
//
// nbdkit (1.32, Debian 12) stops on SIGINT, SIGTERM or SIGQUIT only once every client has
// disconnected: a connection waiting for its next request (an idle qemu-io or nbdsh, a VM) is
// never woken, so Ctrl-C left the server running, and the stack open, for as long as that
// client stayed. A busy connection ends by itself (each worker finishes the request it has
// read, answers it, and stops). So the plugin chains nbdkit's handlers for these signals and,
// once nbdkit has noted the stop, looks at the client connections every kStopPollMs: one whose
// receive queue was empty at kQuietPolls looks in a row (no request on its way: the client is
// waiting) has its read side shut down, and ends as if its client had hung up, between two
// requests; nbdkit then stops and the plugin closes the stack as usual. The quiet looks keep
// a request that is still arriving (a large write, streamed) from being cut in two.

constexpr int kStopPollMs = 100;
constexpr int kQuietPolls = 3;
int g_stop_pipe[2] = {-1, -1};
constexpr int kStopSignals[3] = {SIGINT, SIGTERM, SIGQUIT};
struct sigaction g_nbdkit_stop_handler[3];

void OnStopSignal(int sig) {
  const int saved = errno;
  for (int i = 0; i < 3; ++i) {
    if (kStopSignals[i] == sig) g_nbdkit_stop_handler[i].sa_handler(sig);  // nbdkit's: quit
  }
  const char c = 0;
  if (::write(g_stop_pipe[1], &c, 1) < 0) {
    // The pipe is full: a stop is pending already.
  }
  errno = saved;
}

// A socket's local address, as a key: the path of a Unix socket, the family and port of a TCP
// one (a listener bound to every address has accepted connections on one of them).
std::string LocalAddress(int fd) {
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) return "";
  switch (a.ss_family) {
    case AF_UNIX: {
      const auto* u = reinterpret_cast<const sockaddr_un*>(&a);
      const size_t offset = offsetof(sockaddr_un, sun_path);
      const size_t n = len > offset ? len - offset : 0;
      return n == 0 ? "" : "unix:" + std::string(u->sun_path, ::strnlen(u->sun_path, n));
    }
    case AF_INET:
      return "inet:" + std::to_string(ntohs(reinterpret_cast<const sockaddr_in*>(&a)->sin_port));
    case AF_INET6:
      return "inet6:" + std::to_string(ntohs(reinterpret_cast<const sockaddr_in6*>(&a)->sin6_port));
    default:
      return "";
  }
}

// The connections nbdkit accepted: the stream sockets of this process whose local address is
// that of one of its listening sockets (never a socket the stack opened itself, such as a Ceph
// client's), by descriptor, each with the bytes waiting in its receive queue.
std::vector<std::pair<int, int>> ClientConnections() {
  std::vector<std::string> listening;
  std::vector<std::pair<int, std::string>> accepted;
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return {};
  while (const dirent* e = ::readdir(dir)) {
    char* end = nullptr;
    const long n = std::strtol(e->d_name, &end, 10);
    const int fd = static_cast<int>(n);
    if (end == e->d_name || *end != '\0' || fd == ::dirfd(dir)) continue;
    struct stat st;
    int type = 0, accepts = 0;
    socklen_t len = sizeof type;
    if (::fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    if (::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_STREAM) continue;
    len = sizeof accepts;
    if (::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &accepts, &len) != 0) continue;
    std::string address = LocalAddress(fd);
    if (address.empty()) continue;
    if (accepts) {
      listening.push_back(std::move(address));
    } else {
      accepted.emplace_back(fd, std::move(address));
    }
  }
  ::closedir(dir);
  std::vector<std::pair<int, int>> out;
  for (const auto& [fd, address] : accepted) {
    if (std::find(listening.begin(), listening.end(), address) == listening.end()) continue;
    int pending = 0;
    if (::ioctl(fd, FIONREAD, &pending) != 0) continue;
    out.emplace_back(fd, pending);
  }
  return out;
}

// After a stop: ends each client connection that stays quiet (above) until none is left.
void EndQuietConnections() {
  std::map<int, int> quiet;  // descriptor -> looks in a row with nothing pending
  for (;;) {
    const std::vector<std::pair<int, int>> connections = ClientConnections();
    if (connections.empty()) return;
    std::map<int, int> next;
    for (const auto& [fd, pending] : connections) {
      const int looks = pending == 0 ? quiet[fd] + 1 : 0;
      if (looks == kQuietPolls) {
        nbdkit_debug("stopping: ending the idle connection on fd %d", fd);
        ::shutdown(fd, SHUT_RD);
      }
      next[fd] = looks;
    }
    quiet = std::move(next);
    std::this_thread::sleep_for(std::chrono::milliseconds(kStopPollMs));
  }
}

// Chains nbdkit's stop handlers (installed before after_fork) and starts the thread that ends
// idle connections once one has run. Leaves nbdkit alone if it has not installed them.
void WatchForStop() {
  if (::pipe2(g_stop_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
    nbdkit_debug("pipe2: %m");
    return;
  }
  for (int i = 0; i < 3; ++i) {
    if (::sigaction(kStopSignals[i], nullptr, &g_nbdkit_stop_handler[i]) != 0 ||
        (g_nbdkit_stop_handler[i].sa_flags & SA_SIGINFO) ||
        g_nbdkit_stop_handler[i].sa_handler == SIG_DFL ||
        g_nbdkit_stop_handler[i].sa_handler == SIG_IGN) {
      nbdkit_debug("signal %d has no nbdkit handler to chain: idle connections stay open",
                   kStopSignals[i]);
      return;
    }
  }
  std::thread([] {
    pthread_setname_np(pthread_self(), "vstack-stop");  // tests/nbd/server_process.cc skips it
    struct pollfd p = {g_stop_pipe[0], POLLIN, 0};
    while (::poll(&p, 1, -1) < 0 && errno == EINTR) {
    }
    EndQuietConnections();
  }).detach();
  for (int i = 0; i < 3; ++i) {
    struct sigaction sa = g_nbdkit_stop_handler[i];
    sa.sa_handler = &OnStopSignal;
    ::sigaction(kStopSignals[i], &sa, nullptr);
  }
}

// --- configuration ----------------------------------------------------------------------

void DumpPlugin() {
  std::string names;
  for (const ComponentInfo* c : Registry::Global().All()) {
    names += (names.empty() ? "" : ",") + c->name;
  }
  std::printf("vstack_version=%s\nvstack_components=%s\n", VSTACK_VERSION, names.c_str());
}

int Config(const char* key, const char* value) {
  const std::string k = key;
  if (k == "spec") {
    g_config.spec = value;
  } else if (k == "readonly") {
    const int b = nbdkit_parse_bool(value);
    if (b == -1) return -1;
    g_config.read_only = b == 1;
  } else if (k == "stats") {
    g_config.stats_path = value;
  } else if (k == "uri") {
    g_config.uri = value;
  } else {
    nbdkit_error("unknown parameter '%s'; the vstack plugin takes spec=, readonly=, stats= and "
                 "uri=",
                 key);
    return -1;
  }
  return 0;
}

int ConfigComplete() {
  if (g_config.spec.empty()) {
    nbdkit_error("missing spec=: name the stack to serve, e.g. "
                 "nbdkit vstack spec=vhd+file:/var/tmp/d.vhd (see vstack layers)");
    return -1;
  }
  if (char* cwd = get_current_dir_name()) {
    g_config.cwd = cwd;
    std::free(cwd);
  }
  if (!g_config.stats_path.empty()) {
    // Written when the server stops: a path it cannot write is refused now, not after the
    // whole session (whose statistics were then lost).
    const bool existed = ::access(g_config.stats_path.c_str(), F_OK) == 0;
    const int fd = ::open(g_config.stats_path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
      const int err = errno;
      ErrorLine((g_config.uri.empty() ? "stats=" : "--stats ") + g_config.stats_path +
                ": cannot write it: " + std::strerror(err));
      return -1;
    }
    ::close(fd);
    if (!existed) ::unlink(g_config.stats_path.c_str());
  }
  return OpenExport();
}

int ThreadModel() {
  if (g_export != nullptr && !g_export->parallel()) {
    return NBDKIT_THREAD_MODEL_SERIALIZE_CONNECTIONS;
  }
  return NBDKIT_THREAD_MODEL_PARALLEL;
}

int GetReady() {
  g_ready_pid = getpid();
  return 0;
}

int AfterFork() {
  if (getpid() != g_ready_pid) {
    // Forked into the background: reopen here, from the directory the spec was written in.
    const Status closed = g_export->Close();
    delete g_export;
    g_export = nullptr;
    if (!closed) return Fail(closed.error());
    if (!g_config.cwd.empty() && chdir(g_config.cwd.c_str()) != 0) {
      ErrorLine("cannot return to " + g_config.cwd +
                " to reopen the stack: " + std::strerror(errno));
      return -1;
    }
    const int r = OpenExport();
    if (chdir("/") != 0) nbdkit_debug("chdir /: %m");
    if (r != 0) return r;
  }
  g_started = std::chrono::steady_clock::now();
  WatchForStop();
  if (!g_config.uri.empty()) {
    std::fprintf(stderr, "vstack serve: serving %s (%s) at %s; stop with Ctrl-C or SIGTERM\n",
                 g_export->spec().c_str(), g_export->device().Describe().c_str(),
                 g_config.uri.c_str());
  }
  return 0;
}

// The Unix socket `vstack serve --socket PATH` listens on (from its uri=), or "".
std::string SocketPath() {
  const std::string prefix = "nbd+unix:///?socket=";
  return g_config.uri.rfind(prefix, 0) == 0 ? g_config.uri.substr(prefix.size()) : "";
}

void Cleanup() {
  if (g_export == nullptr) return;
  // A clean stop leaves no socket file behind (nbdkit does not remove it).
  if (const std::string socket = SocketPath(); !socket.empty() && ::unlink(socket.c_str()) != 0) {
    nbdkit_debug("unlink %s: %m", socket.c_str());
  }
  const Status closed = g_export->Close();
  if (!closed) Fail(closed.error());
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - g_started).count();
  if (!g_config.uri.empty()) {
    std::fprintf(stderr, "%s",
                 ServeSummaryText(g_export->spec(), g_export->device(), seconds).c_str());
  }
  bool stats_ok = true;
  if (!g_config.stats_path.empty()) {
    const std::string json =
        ServeSummaryJson(g_export->spec(), g_export->device(), seconds).dump(2) + "\n";
    std::FILE* out = std::fopen(g_config.stats_path.c_str(), "w");
    stats_ok = out != nullptr && std::fwrite(json.data(), 1, json.size(), out) == json.size();
    int err = errno;
    if (out != nullptr && std::fclose(out) != 0 && stats_ok) {
      stats_ok = false;
      err = errno;
    }
    if (!stats_ok) {
      ErrorLine("cannot write stats to " + g_config.stats_path + ": " +
                std::strerror(err != 0 ? err : EIO));
    }
  }
  delete g_export;
  g_export = nullptr;
  // A failed final flush may have lost data: say so in the exit status, not only in the log.
  if (!closed || !stats_ok) std::exit(EXIT_FAILURE);
}

// --- connections and negotiation ------------------------------------------------------------

void* OpenConnection(int readonly) { return g_export; }

void CloseConnection(void* handle) {
  // On a stack that takes one queue at a time, the next connection needs this one's queue.
  g_export->ReleaseThreadQueue();
}

int64_t GetSize(void* handle) { return static_cast<int64_t>(g_export->size()); }

const char* ExportDescription(void* handle) { return g_export->spec().c_str(); }

int BlockSize(void* handle, uint32_t* minimum, uint32_t* preferred, uint32_t* maximum) {
  const BlockSizes b = g_export->block_sizes();
  *minimum = b.minimum;
  *preferred = b.preferred;
  *maximum = b.maximum;
  return 0;
}

int CanWrite(void* handle) { return g_export->flags().writable; }
int CanFlush(void* handle) { return g_export->flags().flush; }
int CanTrim(void* handle) { return g_export->flags().trim; }
int CanZero(void* handle) { return g_export->flags().zero; }
int CanFastZero(void* handle) { return g_export->flags().fast_zero; }
int CanExtents(void* handle) { return g_export->flags().extents; }
int CanMultiConn(void* handle) { return g_export->flags().multi_conn; }
int CanFua(void* handle) { return g_export->flags().fua ? NBDKIT_FUA_NATIVE : NBDKIT_FUA_NONE; }
int CanCache(void* handle) { return NBDKIT_CACHE_NONE; }
int IsRotational(void* handle) { return 0; }

// --- data -----------------------------------------------------------------------------------

int Pread(void* handle, void* buf, uint32_t count, uint64_t offset, uint32_t flags) {
  const std::error_code ec = g_export->Read(buf, count, offset);
  return ec ? FailRequest("read", offset, count, ec) : 0;
}

int Pwrite(void* handle, const void* buf, uint32_t count, uint64_t offset, uint32_t flags) {
  const std::error_code ec = g_export->Write(buf, count, offset, ToIoFlags(flags));
  return ec ? FailRequest("write", offset, count, ec) : 0;
}

int Flush(void* handle, uint32_t flags) {
  const std::error_code ec = g_export->Flush();
  return ec ? FailRequest("flush", 0, 0, ec) : 0;
}

int Trim(void* handle, uint32_t count, uint64_t offset, uint32_t flags) {
  const std::error_code ec = g_export->Trim(count, offset, ToIoFlags(flags));
  return ec ? FailRequest("trim", offset, count, ec) : 0;
}

int Zero(void* handle, uint32_t count, uint64_t offset, uint32_t flags) {
  const std::error_code ec = g_export->Zero(count, offset, ToIoFlags(flags));
  return ec ? FailRequest("write-zeroes", offset, count, ec, flags) : 0;
}

int Extents(void* handle, uint32_t count, uint64_t offset, uint32_t flags,
            struct nbdkit_extents* extents) {
  thread_local std::vector<Extent> found;
  found.clear();
  const Status s = g_export->Extents(count, offset, &found);
  if (!s) return FailRequest("block status", offset, count, s.error().code);
  for (const Extent& e : found) {
    const uint32_t type = ((e.flags & kExtentHole) ? NBDKIT_EXTENT_HOLE : 0) |
                          ((e.flags & kExtentZero) ? NBDKIT_EXTENT_ZERO : 0);
    if (nbdkit_add_extent(extents, e.offset, e.length, type) == -1) return -1;
    if (flags & NBDKIT_FLAG_REQ_ONE) break;
  }
  return 0;
}

nbdkit_plugin MakePlugin() {
  nbdkit_plugin p = nbdkit_plugin();
  p.name = "vstack";
  p.longname = "vstack block-device stack";
  p.version = VSTACK_VERSION;
  p.description =
      "Serves a vstack stack (backends, formats and transform layers written as one spec, e.g. "
      "dedup+zstd+vhd+file:/var/tmp/d.vhd) over NBD.";
  p.config_help =
      "spec=SPEC       (required) the stack, or an image file whose format is probed\n"
      "readonly=on     open the stack read-only (clients cannot write)\n"
      "stats=FILE      write per-layer request statistics as JSON at shutdown\n"
      "uri=URI         print a ready line with URI, and a per-layer summary at shutdown";
  p.magic_config_key = "spec";
  p.load = Load;
  p.dump_plugin = DumpPlugin;
  p.config = Config;
  p.config_complete = ConfigComplete;
  p.thread_model = ThreadModel;
  p.get_ready = GetReady;
  p.after_fork = AfterFork;
  p.cleanup = Cleanup;
  p.open = OpenConnection;
  p.close = CloseConnection;
  p.get_size = GetSize;
  p.export_description = ExportDescription;
  p.block_size = BlockSize;
  p.can_write = CanWrite;
  p.can_flush = CanFlush;
  p.can_trim = CanTrim;
  p.can_zero = CanZero;
  p.can_fast_zero = CanFastZero;
  p.can_extents = CanExtents;
  p.can_multi_conn = CanMultiConn;
  p.can_fua = CanFua;
  p.can_cache = CanCache;
  p.is_rotational = IsRotational;
  p.pread = Pread;
  p.pwrite = Pwrite;
  p.flush = Flush;
  p.trim = Trim;
  p.zero = Zero;
  p.extents = Extents;
  return p;
}

nbdkit_plugin plugin = MakePlugin();

}  // namespace
}  // namespace vstack::nbd

using vstack::nbd::plugin;
NBDKIT_REGISTER_PLUGIN(plugin)
