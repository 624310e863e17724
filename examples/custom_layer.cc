// Example 2: a layer written outside vstack's tree, registered under the name "buckets" and
// used in a spec together with built-in layers. It forwards every request unchanged and counts
// the requests that touch each 4 KiB bucket of the device (a request spanning three buckets
// counts in all three), then prints the busiest buckets. It keeps the data below as they are,
// so it derives from ForwardingLayer and inherits everything but one hook of its queue.
//
//   custom_layer [SPEC_BELOW]      (default: zstd+memory:64M; the example opens buckets+SPEC)
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <vstack/forwarding_layer.h>
#include <vstack/registry.h>
#include <vstack/sync_io.h>

namespace {

constexpr uint64_t kBucket = 4096;

class BucketsDevice final : public vstack::ForwardingLayer {
 public:
  explicit BucketsDevice(vstack::DevicePtr lower)
      : ForwardingLayer("buckets", std::move(lower)),
        counts_((geometry().size_bytes + kBucket - 1) / kBucket) {}

  void Count(const vstack::IoRequest& req) {
    if (req.length == 0) return;  // flush
    for (uint64_t b = req.offset / kBucket; b <= (req.offset + req.length - 1) / kBucket; ++b) {
      counts_[b].fetch_add(1, std::memory_order_relaxed);
    }
  }
  // The `n` busiest buckets: (bucket, requests).
  std::vector<std::pair<uint64_t, uint64_t>> Busiest(size_t n) const {
    std::vector<std::pair<uint64_t, uint64_t>> all;
    for (uint64_t b = 0; b < counts_.size(); ++b) {
      if (uint64_t c = counts_[b].load()) all.emplace_back(b, c);
    }
    std::sort(all.begin(), all.end(), [](auto& x, auto& y) {
      return x.second != y.second ? x.second > y.second : x.first < y.first;
    });
    all.resize(std::min(n, all.size()));
    return all;
  }

 protected:
  std::unique_ptr<vstack::ForwardingQueue> NewQueue(
      std::unique_ptr<vstack::IoQueue> lower) override;

 private:
  std::vector<std::atomic<uint64_t>> counts_;  // shared by every queue
};

// One per thread: counts each request as it is accepted, then forwards it as it is.
class BucketsQueue final : public vstack::ForwardingQueue {
 public:
  BucketsQueue(BucketsDevice& device, std::unique_ptr<vstack::IoQueue> lower)
      : ForwardingQueue(device, std::move(lower)), device_(device) {}

 protected:
  void Accept(vstack::IoRequest& req) override {
    device_.Count(req);
    Forward(req);
  }

 private:
  BucketsDevice& device_;
};

std::unique_ptr<vstack::ForwardingQueue> BucketsDevice::NewQueue(
    std::unique_ptr<vstack::IoQueue> lower) {
  return std::make_unique<BucketsQueue>(*this, std::move(lower));
}

vstack::ComponentInfo BucketsComponent() {
  return vstack::LayerComponent(
      "buckets", "counts requests per 4 KiB bucket (vstack/examples/custom_layer.cc)", {},
      [](vstack::DevicePtr lower, const vstack::OptionValues&,
         const vstack::OpenOptions&) -> vstack::Result<vstack::DevicePtr> {
        return vstack::MakeDevice<BucketsDevice>(std::move(lower));
      });
}

// Registration, exactly as the built-in layers do it.
VSTACK_REGISTER_COMPONENT(buckets, BucketsComponent());

}  // namespace

int main(int argc, char** argv) {
  const std::string spec = std::string("buckets+") + (argc > 1 ? argv[1] : "zstd+memory:64M");
  auto device = vstack::Open(spec);
  if (!device) {
    std::fprintf(stderr, "custom_layer: %s\n", device.error().ToString().c_str());
    return 1;
  }
  std::printf("opened %s\n", spec.c_str());
  for (const vstack::BlockDevice* d = device->get(); d; d = d->lower()) {
    std::printf("  %s\n", d->Describe().c_str());
  }
  {
    vstack::SyncIo io(**device);
    std::vector<std::byte> block(kBucket, std::byte{0x5a});
    // A hot 16 KiB region written 8 times, and a cold sweep over 1 MiB.
    for (int round = 0; round < 8; ++round) {
      for (uint64_t off = 0; off < 16384; off += kBucket) {
        if (auto ec = io.Write(off + (1 << 20), block)) {
          std::fprintf(stderr, "custom_layer: write: %s\n", ec.message().c_str());
          return 1;
        }
      }
    }
    std::vector<std::byte> big(64 << 10);
    for (uint64_t off = 0; off < (1 << 20); off += big.size()) {
      if (auto ec = io.Read(off, big)) {
        std::fprintf(stderr, "custom_layer: read: %s\n", ec.message().c_str());
        return 1;
      }
    }
    if (auto ec = io.Flush()) return 1;
  }
  auto& buckets = static_cast<BucketsDevice&>(**device);
  std::printf("busiest 4 KiB buckets (bucket: requests):\n");
  for (auto [bucket, count] : buckets.Busiest(5)) {
    std::printf("  %6llu (offset %8llu): %llu\n", static_cast<unsigned long long>(bucket),
                static_cast<unsigned long long>(bucket * kBucket),
                static_cast<unsigned long long>(count));
  }
  return 0;
}
