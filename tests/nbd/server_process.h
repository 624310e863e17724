// Server processes for the NBD tests: `vstack serve` (or nbdkit) started with fork + exec, its
// output captured in a log file, and always reaped. A server dies with the test process
// (PR_SET_PDEATHSIG), and the destructor kills one that is still running.
#ifndef VSTACK_TESTS_NBD_SERVER_PROCESS_H_
#define VSTACK_TESTS_NBD_SERVER_PROCESS_H_

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace vstack::testing {

class ServerProcess {
 public:
  // Runs argv (argv[0] looked up on PATH) with `env` ("K=V") added to the environment and
  // stdout and stderr appended to `log_path`. `in_child`, if given, runs in the child just
  // before exec (to set resource limits or signal dispositions).
  ServerProcess(std::vector<std::string> argv, std::string log_path,
                std::vector<std::string> env = {}, std::function<void()> in_child = nullptr);
  ~ServerProcess();
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0; }
  // Waits until `socket` accepts connections; fails (showing the log) if the process exits
  // first or `timeout_s` passes. With `log_line`, waits for that text in the log instead of
  // probing with a connection (a probe is a client that hangs up during the handshake).
  ::testing::AssertionResult WaitForSocket(const std::string& socket, double timeout_s = 60,
                                           const std::string& log_line = "");
  // Sends `sig`, waits for the process to exit and reaps it. Returns its exit status, or
  // 128 + the number of the signal that killed it; -1 if it had to be killed after a timeout.
  int Stop(int sig = SIGTERM, double timeout_s = 60);
  // The same, but the signal is sent at once: Stop() first waits, for SIGTERM and SIGINT,
  // until the server has no connection threads left.
  int StopNow(int sig = SIGTERM, double timeout_s = 60);
  std::string Log() const;

 private:
  int SignalAndWait(int sig, std::chrono::steady_clock::time_point deadline);

  pid_t pid_ = -1;
  std::string log_path_;
};

// `vstack serve --socket DIR/nbd.sock EXTRA... SPEC`, waiting until it accepts connections.
// Returns nullptr (after adding a test failure with the server's log) if it did not start.
std::unique_ptr<ServerProcess> StartVstackServe(const std::string& dir, const std::string& spec,
                                                const std::vector<std::string>& extra = {});
// The socket StartVstackServe uses in `dir`, and its NBD URI.
std::string ServeSocket(const std::string& dir);
std::string ServeUri(const std::string& dir);

// The AddressSanitizer runtime this binary uses ("" without ASan). An ASan build's nbdkit plugin
// only loads into nbdkit with this runtime in LD_PRELOAD (`vstack serve` does the same).
std::string SanitizerRuntime();

// Makes this process the reaper of its orphaned descendants (a forking server's child), so
// that they can be waited for.
void BecomeSubreaper();
// Waits for a descendant that is not our direct child (reaped via BecomeSubreaper) to exit.
bool WaitForExit(pid_t pid, double timeout_s);

}  // namespace vstack::testing

#endif  // VSTACK_TESTS_NBD_SERVER_PROCESS_H_
