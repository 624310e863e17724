#include "blockdev/metastore/unit_reclaimer.h"

namespace vstack {

bool UnitReclaimer::Unpin(uint64_t unit) {
  auto it = pins_.find(unit);
  if (it == pins_.end()) return false;
  if (--it->second > 0) return false;
  pins_.erase(it);
  return deferred_.erase(unit) != 0;
}

void UnitReclaimer::Committed(uint64_t epoch, std::vector<uint64_t>* out) {
  for (auto it = released_.begin(); it != released_.end();) {
    if (it->second > epoch) {
      ++it;
      continue;
    }
    const uint64_t unit = it->first;
    it = released_.erase(it);
    if (pins_.count(unit)) {
      deferred_.insert(unit);
    } else {
      out->push_back(unit);
    }
  }
}

}  // namespace vstack
