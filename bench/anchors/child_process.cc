#include "bench/anchors/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

extern char** environ;

namespace vstack::bench {

std::string ShellJoin(const std::vector<std::string>& argv) {
  std::string out;
  for (const std::string& a : argv) {
    if (!out.empty()) out += ' ';
    const bool plain = !a.empty() && a.find_first_not_of(
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_=./:,+%@") == std::string::npos;
    if (plain) {
      out += a;
    } else {
      out += '\'';
      for (char c : a) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
      out += '\'';
    }
  }
  return out;
}

Result<ChildResult> RunChild(const std::vector<std::string>& argv, const std::atomic<bool>* stop) {
  int pipefd[2];
  if (::pipe2(pipefd, O_CLOEXEC) != 0) return MakeError(SystemError(errno), "pipe failed");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipefd[1], 1);
  posix_spawn_file_actions_adddup2(&actions, pipefd[1], 2);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  const auto start = std::chrono::steady_clock::now();
  const int rc = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(pipefd[1]);
  if (rc != 0) {
    ::close(pipefd[0]);
    return MakeError(SystemError(rc), "cannot run " + argv[0] + ": " + std::strerror(rc) +
                                          (rc == ENOENT ? " (is it installed? ./dev.sh installs it)" : ""));
  }
  ChildResult r;
  char buf[4096];
  bool open = true;
  while (open) {
    pollfd p{pipefd[0], POLLIN, 0};
    const int n = ::poll(&p, 1, 50);
    if (n > 0) {
      const ssize_t got = ::read(pipefd[0], buf, sizeof buf);
      if (got > 0) {
        if (r.output.size() < (1 << 20)) r.output.append(buf, size_t(got));
      } else if (got == 0 || errno != EINTR) {
        open = false;
      }
    }
    if (!r.stopped && stop && stop->load()) {
      ::kill(pid, SIGTERM);
      r.stopped = true;
    }
  }
  ::close(pipefd[0]);
  int status = 0;
  rusage ru{};
  while (::wait4(pid, &status, 0, &ru) < 0 && errno == EINTR) {
  }
  r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.user_s = double(ru.ru_utime.tv_sec) + double(ru.ru_utime.tv_usec) * 1e-6;
  r.kernel_s = double(ru.ru_stime.tv_sec) + double(ru.ru_stime.tv_usec) * 1e-6;
  return r;
}

}  // namespace vstack::bench
