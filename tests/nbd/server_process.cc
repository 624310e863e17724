#include "tests/nbd/server_process.h"

#include <fcntl.h>
#include <link.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace vstack::testing {
namespace {

using Clock = std::chrono::steady_clock;

bool CanConnect(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path) return false;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  const bool ok = ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return ok;
}

// The number of threads of process `pid` (0 once it is gone), but the vstack plugin's
// "vstack-stop", which waits for a stop signal for the server's whole life.
size_t ThreadCount(pid_t pid) {
  std::error_code ec;
  size_t n = 0;
  for (auto it = std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    std::ifstream comm(it->path() / "comm");
    std::string name;
    std::getline(comm, name);
    if (name != "vstack-stop") ++n;
  }
  return n;
}

int DecodeStatus(int w) {
  if (WIFEXITED(w)) return WEXITSTATUS(w);
  if (WIFSIGNALED(w)) return 128 + WTERMSIG(w);
  return -1;
}

}  // namespace

ServerProcess::ServerProcess(std::vector<std::string> argv, std::string log_path,
                             std::vector<std::string> env, std::function<void()> in_child)
    : log_path_(std::move(log_path)) {
  std::vector<char*> args;
  for (std::string& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  const pid_t parent = ::getpid();
  pid_ = ::fork();
  if (pid_ == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);  // the test died before we got here
    const int fd = ::open(log_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      ::close(fd);
    }
    for (std::string& e : env) ::putenv(e.data());
    if (in_child) in_child();
    ::execvp(args[0], args.data());
    std::fprintf(stderr, "exec %s: %s\n", args[0], std::strerror(errno));
    ::_exit(127);
  }
  if (pid_ < 0) ADD_FAILURE() << "fork: " << std::strerror(errno);
}

ServerProcess::~ServerProcess() {
  if (running()) Stop(SIGKILL);
}

::testing::AssertionResult ServerProcess::WaitForSocket(const std::string& socket,
                                                        double timeout_s,
                                                        const std::string& log_line) {
  const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
  while (Clock::now() < deadline) {
    if (!running()) break;
    int w = 0;
    if (::waitpid(pid_, &w, WNOHANG) == pid_) {
      pid_ = -1;
      return ::testing::AssertionFailure()
             << "server exited with status " << DecodeStatus(w) << " before listening:\n"
             << Log();
    }
    if (log_line.empty() ? CanConnect(socket) : Log().find(log_line) != std::string::npos) {
      return ::testing::AssertionSuccess();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return ::testing::AssertionFailure() << "server did not listen on " << socket << " within "
                                       << timeout_s << " s:\n"
                                       << Log();
}

int ServerProcess::Stop(int sig, double timeout_s) {
  if (!running()) return -1;
  const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
  if (sig == SIGTERM || sig == SIGINT) {
    while (ThreadCount(pid_) > 1 && Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  return SignalAndWait(sig, std::chrono::time_point_cast<Clock::duration>(deadline));
}

int ServerProcess::StopNow(int sig, double timeout_s) {
  if (!running()) return -1;
  return SignalAndWait(sig, Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                               std::chrono::duration<double>(timeout_s)));
}

int ServerProcess::SignalAndWait(int sig, std::chrono::steady_clock::time_point deadline) {
  const double timeout_s = std::chrono::duration<double>(deadline - Clock::now()).count();
  ::kill(pid_, sig);
  int w = 0;
  while (::waitpid(pid_, &w, WNOHANG) == 0) {
    if (Clock::now() > deadline) {
      ADD_FAILURE() << "server " << pid_ << " ignored signal " << sig << " for " << timeout_s
                    << " s; killing it\n"
                    << Log();
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &w, 0);
      pid_ = -1;
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  pid_ = -1;
  return DecodeStatus(w);
}

std::string ServerProcess::Log() const {
  std::ifstream in(log_path_);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string ServeSocket(const std::string& dir) { return dir + "/nbd.sock"; }
std::string ServeUri(const std::string& dir) { return "nbd+unix:///?socket=" + ServeSocket(dir); }

std::unique_ptr<ServerProcess> StartVstackServe(const std::string& dir, const std::string& spec,
                                                const std::vector<std::string>& extra) {
  std::vector<std::string> argv = {VSTACK_CLI, "serve", "--socket", ServeSocket(dir)};
  argv.insert(argv.end(), extra.begin(), extra.end());
  argv.push_back(spec);
  // A server restarted in `dir` gets a fresh log (the old one is kept as serve.log.N), so that
  // waiting for its "serving" line below cannot see the previous server's.
  const std::string log = dir + "/serve.log";
  for (int n = 1; ::access(log.c_str(), F_OK) == 0; ++n) {
    const std::string old = log + "." + std::to_string(n);
    if (::access(old.c_str(), F_OK) != 0) std::rename(log.c_str(), old.c_str());
  }
  auto server = std::make_unique<ServerProcess>(argv, log);
  // `vstack serve` prints this line once it listens (tools/nbd/nbdkit_plugin.cc).
  ::testing::AssertionResult ready =
      server->WaitForSocket(ServeSocket(dir), 60, "vstack serve: serving ");
  if (!ready) {
    ADD_FAILURE() << "vstack serve " << spec << ": " << ready.message();
    return nullptr;
  }
  return server;
}

std::string SanitizerRuntime() {
  std::string runtime;
  dl_iterate_phdr(
      [](struct dl_phdr_info* info, size_t, void* out) {
        if (info->dlpi_name && std::strstr(info->dlpi_name, "/libasan.so")) {
          *static_cast<std::string*>(out) = info->dlpi_name;
          return 1;
        }
        return 0;
      },
      &runtime);
  return runtime;
}

void BecomeSubreaper() { ::prctl(PR_SET_CHILD_SUBREAPER, 1); }

bool WaitForExit(pid_t pid, double timeout_s) {
  const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
  while (Clock::now() < deadline) {
    int w = 0;
    const pid_t r = ::waitpid(pid, &w, WNOHANG);
    if (r == pid || (r < 0 && errno == ECHILD && ::kill(pid, 0) != 0)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

}  // namespace vstack::testing
