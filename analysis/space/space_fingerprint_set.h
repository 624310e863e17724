// The set of distinct fingerprints of one dedup domain in the exact scan of `vstack space`
// (space_scan.h): shared by the worker threads, sharded by fingerprint so they rarely contend,
// each shard an open-addressing table (16 bytes a slot, at most half full).
#ifndef VSTACK_ANALYSIS_SPACE_FINGERPRINT_SET_H_
#define VSTACK_ANALYSIS_SPACE_FINGERPRINT_SET_H_

#include <array>
#include <cstdint>
#include <mutex>
#include <vector>

#include "blockdev/dedup/fingerprint.h"

namespace vstack {

class FingerprintSet {
 public:
  // True if `fp` was not in the set (it is now). Thread-safe.
  bool Insert(const Fingerprint& fp);
  // Distinct fingerprints held. Not safe while another thread inserts.
  uint64_t size() const;

 private:
  // Linear probing on fp.lo; the all-zero fingerprint marks an empty slot and is kept aside.
  struct Shard {
    std::mutex mu;
    std::vector<Fingerprint> slots;
    uint64_t count = 0;
    bool has_zero = false;
    bool Insert(const Fingerprint& fp);
    void Grow();
  };
  std::array<Shard, 64> shards_;
};

}  // namespace vstack

#endif  // VSTACK_ANALYSIS_SPACE_FINGERPRINT_SET_H_
