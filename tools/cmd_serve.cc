// vstack serve [--socket PATH | --port N] [--read-only] [--threads N] [--stats FILE] SPEC|FILE:
// serves a stack over NBD so that fio, qemu-img, qemu-io and nbdcopy can drive it.
//
// The server is nbdkit with the vstack plugin (tools/nbd/, docs/layers/nbd.md). This command
// builds nbdkit's command line and becomes nbdkit (exec), in the foreground: the pid the user
// started is the server, and SIGINT/SIGTERM reach nbdkit, which finishes the requests in
// flight, flushes and closes the stack, prints a per-layer summary and exits.
#include <dlfcn.h>
#include <link.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "lib/spec_check.h"
#include "tools/command.h"

#ifndef VSTACK_NBDKIT_PLUGIN_FILE
#define VSTACK_NBDKIT_PLUGIN_FILE "nbdkit-vstack-plugin.so"
#endif

namespace vstack::cli {
namespace {

struct ServeArgs {
  std::string target;
  std::string socket;
  int port = 0;
  bool read_only = false;
  int threads = 0;
  std::string stats;
};

// The plugin to load: $VSTACK_NBDKIT_PLUGIN, else the one built next to this binary, else the
// short name, which nbdkit looks up in its plugindir (where ./dev.sh installs it).
std::string PluginPath() {
  if (const char* env = std::getenv("VSTACK_NBDKIT_PLUGIN"); env && *env) return env;
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const auto sibling = exe.parent_path() / VSTACK_NBDKIT_PLUGIN_FILE;
    if (std::filesystem::exists(sibling, ec)) return sibling.string();
  }
  return "vstack";
}

#if defined(__SANITIZE_ADDRESS__)
// A sanitizer build's plugin needs the ASan runtime loaded first into nbdkit, which is not
// built with it: preload the runtime this binary uses.
int FindAsanRuntime(struct dl_phdr_info* info, size_t, void* out) {
  const char* name = info->dlpi_name;
  if (name && std::strstr(name, "/libasan.so")) {
    *static_cast<std::string*>(out) = name;
    return 1;
  }
  return 0;
}

void PreloadSanitizerRuntime() {
  std::string runtime;
  dl_iterate_phdr(&FindAsanRuntime, &runtime);
  if (runtime.empty()) return;
  const char* old = std::getenv("LD_PRELOAD");
  const std::string preload = old && *old ? runtime + ":" + old : runtime;
  setenv("LD_PRELOAD", preload.c_str(), 1);
}
#else
void PreloadSanitizerRuntime() {}
#endif

// nbdkit refuses to start on an existing socket file. Remove one that nobody listens on (left
// by a server that was killed); refuse if a server is still there or the path is not a socket.
// A path nbdkit could not bind is refused here, in vstack's words: a Unix socket's path is at
// most 107 bytes, in a directory that exists.
void ClaimSocketPath(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) {
    Fail("serve", "--socket path is too long (" + std::to_string(path.size()) + " bytes; at most " +
                      std::to_string(sizeof(addr.sun_path) - 1) + "): " + path);
  }
  const std::string parent = std::filesystem::path(path).parent_path().string();
  struct stat st;
  if (::stat(parent.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    Fail("serve", "--socket " + path + ": directory " + parent + " does not exist");
  }
  if (::lstat(path.c_str(), &st) != 0) return;
  if (!S_ISSOCK(st.st_mode)) {
    Fail("serve", "--socket " + path + " exists and is not a socket; choose another path");
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const bool listening =
      fd >= 0 && ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0;
  if (fd >= 0) ::close(fd);
  if (listening) Fail("serve", "a server is already listening on " + path);
  if (::unlink(path.c_str()) != 0) {
    Fail("serve", "cannot remove the stale socket " + path + ": " + std::strerror(errno));
  }
}

[[noreturn]] void Serve(const ServeArgs& a) {
  // nbdkit's plugin opens the stack; a mistyped name is a usage error here, before it starts.
  if (Status names = CheckSpecNames(a.target); !names) Fail("serve", names.error());
  std::vector<std::string> argv = {"nbdkit", "--foreground"};
  std::string uri;
  if (!a.socket.empty()) {
    const std::string path = std::filesystem::absolute(a.socket).string();
    ClaimSocketPath(path);
    argv.insert(argv.end(), {"--unix", path});
    uri = "nbd+unix:///?socket=" + path;
  } else {
    const int port = a.port ? a.port : 10809;
    argv.insert(argv.end(), {"--port", std::to_string(port), "--ipaddr", "127.0.0.1"});
    uri = "nbd://127.0.0.1:" + std::to_string(port);
  }
  if (a.read_only) argv.push_back("--readonly");
  if (a.threads) argv.insert(argv.end(), {"--threads", std::to_string(a.threads)});
  argv.push_back(PluginPath());
  argv.push_back("spec=" + a.target);
  if (a.read_only) argv.push_back("readonly=on");
  if (!a.stats.empty()) argv.push_back("stats=" + std::filesystem::absolute(a.stats).string());
  argv.push_back("uri=" + uri);

  PreloadSanitizerRuntime();
  std::vector<char*> cargv;
  for (std::string& s : argv) cargv.push_back(s.data());
  cargv.push_back(nullptr);
  std::fflush(nullptr);
  ::execvp(cargv[0], cargv.data());
  Fail("serve", std::string("cannot run nbdkit: ") + std::strerror(errno) +
                    " (install the nbdkit package; ./dev.sh does)");
}

}  // namespace

void AddServeCommand(CLI::App& app) {
  auto args = std::make_shared<ServeArgs>();
  CLI::App* cmd = app.add_subcommand(
      "serve",
      "Serve a stack over NBD (nbdkit + the vstack plugin) for fio, qemu-img, qemu-io, nbdcopy");
  cmd->add_option("target", args->target, "stack spec (e.g. vhd+file:d.vhd) or image file")
      ->required();
  auto* socket =
      cmd->add_option("--socket", args->socket, "listen on this Unix socket (nbd+unix:///?socket=PATH)");
  cmd->add_option("--port", args->port, "listen on 127.0.0.1:PORT (default 10809)")
      ->check(CLI::Range(1, 65535))
      ->excludes(socket);
  cmd->add_flag("--read-only", args->read_only, "open the stack read-only; clients cannot write");
  cmd->add_option("--threads", args->threads,
                  "requests served in parallel per connection (nbdkit --threads; default 16)")
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--stats", args->stats,
                  "write per-layer request statistics as JSON to FILE when the server stops");
  cmd->footer(
      "Clients: qemu-img info nbd+unix:///?socket=PATH; fio --ioengine=nbd "
      "--uri=nbd+unix:///?socket=PATH; nbdcopy, nbdinfo. Stop with Ctrl-C or SIGTERM: requests "
      "in flight finish, the stack is flushed and closed. See docs/layers/nbd.md.");
  cmd->callback([args] { Serve(*args); });
}

}  // namespace vstack::cli
