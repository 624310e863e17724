// qemu_bench_driver: the access pattern of `qemu-img bench`, run through a vstack stack, for a
// like-for-like comparison (bench/vhd_vs_qemu.sh, docs/benchmarks.md):
//
//   qemu_bench_driver [-c COUNT] [-d DEPTH] [-s SIZE] [-S STEP] [-o OFFSET] [-w]
//                     [--pattern=BYTE] SPEC|FILE
//
// COUNT requests of SIZE bytes, DEPTH in flight on one queue, at OFFSET, OFFSET+STEP, ...
// wrapping at the end of the disk (STEP defaults to SIZE), writes with -w (buffers filled with
// BYTE), reads otherwise; defaults as qemu-img bench (75000, 64, 4K). It prints qemu's line,
// "Run completed in N seconds.", and then one line of JSON with the IOPS and the counters of
// every layer, to explain the difference. Like qemu-img bench it does not flush inside the
// timed run; the image is closed (and flushed) after it.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "lib/aligned_buffer.h"
#include "lib/registry.h"
#include "lib/size.h"

namespace {

struct Args {
  uint64_t count = 75000, depth = 64, size = 4096, step = 0, offset = 0;
  bool write = false;
  int pattern = 0;
  std::string target;
};

[[noreturn]] void Usage(const std::string& why) {
  std::fprintf(stderr,
               "qemu_bench_driver: %s\nusage: qemu_bench_driver [-c COUNT] [-d DEPTH] "
               "[-s SIZE] [-S STEP] [-o OFFSET] [-w] [--pattern=BYTE] SPEC|FILE\n",
               why.c_str());
  std::exit(2);
}

uint64_t SizeArg(const char* text) {
  auto v = vstack::ParseSize(text);
  if (!v) Usage(v.error().message);
  return *v;
}

Args Parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) Usage("missing value after " + s);
      return argv[++i];
    };
    if (s == "-c")
      a.count = SizeArg(next());
    else if (s == "-d")
      a.depth = SizeArg(next());
    else if (s == "-s")
      a.size = SizeArg(next());
    else if (s == "-S")
      a.step = SizeArg(next());
    else if (s == "-o")
      a.offset = SizeArg(next());
    else if (s == "-w")
      a.write = true;
    else if (s.rfind("--pattern=", 0) == 0)
      a.pattern = std::atoi(s.c_str() + 10);
    else if (!s.empty() && s[0] == '-')
      Usage("unknown option " + s);
    else
      a.target = s;
  }
  if (a.target.empty()) Usage("missing SPEC|FILE");
  if (a.step == 0) a.step = a.size;
  if (a.depth == 0 || a.count == 0 || a.size == 0) Usage("-c, -d and -s must be positive");
  return a;
}

struct Bench {
  Args args;
  vstack::IoQueue* queue = nullptr;
  uint64_t disk = 0, next = 0, issued = 0, done = 0;
  std::error_code error;

  struct Slot {
    vstack::IoRequest req;
    iovec iov;
    Bench* bench;
  };

  uint64_t NextOffset() {
    if (next + args.size > disk) next = 0;
    const uint64_t at = next;
    next += args.step;
    return at;
  }

  void Issue(Slot& s) {
    s.req.op = args.write ? vstack::Op::kWrite : vstack::Op::kRead;
    s.req.offset = NextOffset();
    s.req.length = args.size;
    s.req.iov = &s.iov;
    s.req.iovcnt = 1;
    ++issued;
    queue->Submit(s.req);
  }

  static void OnComplete(vstack::IoRequest& r) {
    Slot& s = *static_cast<Slot*>(r.user_data);
    Bench& b = *s.bench;
    ++b.done;
    if (r.status && !b.error) b.error = r.status;
    if (b.issued < b.args.count && !b.error) b.Issue(s);
  }
};

}  // namespace

int main(int argc, char** argv) {
  Bench b;
  b.args = Parse(argc, argv);
  vstack::OpenOptions open;
  open.read_only = !b.args.write;
  std::string spec;
  auto dev = vstack::OpenImage(b.args.target, open, &spec);
  if (!dev) Usage(dev.error().ToString());
  auto q = (*dev)->OpenQueue();
  if (!q) Usage(q.error().ToString());
  b.queue = q->get();
  b.disk = (*dev)->geometry().size_bytes;
  b.next = b.args.offset;
  const size_t align = std::max<size_t>((*dev)->geometry().mem_alignment, 4096);
  vstack::AlignedBuffer buffers(b.args.size * b.args.depth, align);
  std::memset(buffers.data(), b.args.pattern, buffers.size());
  std::vector<Bench::Slot> slots(b.args.depth);
  std::vector<iovec> all;
  for (size_t i = 0; i < slots.size(); ++i) {
    slots[i].bench = &b;
    slots[i].iov = iovec{buffers.data() + i * b.args.size, b.args.size};
    slots[i].req.user_data = &slots[i];
    slots[i].req.on_complete = &Bench::OnComplete;
    all.push_back(slots[i].iov);
  }
  (*q)->RegisterBuffers(all);
  std::printf(
      "Sending %llu %s requests, %llu bytes each, %llu in parallel (starting at offset "
      "%llu, step size %llu) through %s\n",
      static_cast<unsigned long long>(b.args.count), b.args.write ? "write" : "read",
      static_cast<unsigned long long>(b.args.size), static_cast<unsigned long long>(b.args.depth),
      static_cast<unsigned long long>(b.args.offset), static_cast<unsigned long long>(b.args.step),
      spec.c_str());
  const auto start = std::chrono::steady_clock::now();
  for (auto& s : slots) {
    if (b.issued < b.args.count) b.Issue(s);
  }
  (*q)->WaitIdle();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (b.error) {
    std::fprintf(stderr, "qemu_bench_driver: I/O error: %s\n", b.error.message().c_str());
    return 1;
  }
  std::printf("Run completed in %.3f seconds.\n", seconds);
  std::string counters;
  for (vstack::BlockDevice* d = dev->get(); d != nullptr; d = d->lower()) {
    const vstack::LayerStats st = d->Stats();
    for (size_t i = 0; i < st.counter_names.size(); ++i) {
      counters += (counters.empty() ? "\"" : ", \"") + d->kind() + "." + st.counter_names[i] +
                  "\": " + std::to_string(st.counters[i]);
    }
  }
  std::printf("{\"spec\": \"%s\", \"seconds\": %.6f, \"iops\": %.0f, \"counters\": {%s}}\n",
              spec.c_str(), seconds, static_cast<double>(b.args.count) / seconds, counters.c_str());
  q->reset();
  auto closed = (*dev)->Close();
  if (!closed) {
    std::fprintf(stderr, "qemu_bench_driver: %s\n", closed.error().ToString().c_str());
    return 1;
  }
  return 0;
}
