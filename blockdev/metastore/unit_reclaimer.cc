#include "blockdev/metastore/unit_reclaimer.h"

namespace vstack {

bool UnitReclaimer::Unpin(uint64_t unit) {
  uint32_t* n = pins_.Find(unit);
  if (n == nullptr) return false;
  if (--*n > 0) return false;
  pins_.Erase(unit);
  return deferred_.Erase(unit);
}

void UnitReclaimer::Committed(uint64_t epoch, std::vector<uint64_t>* out) {
  std::vector<uint64_t> due;
  released_.ForEach([&](uint64_t unit, uint64_t released) {
    if (released <= epoch) due.push_back(unit);
  });
  for (uint64_t unit : due) {
    released_.Erase(unit);
    if (pins_.Contains(unit)) {
      deferred_.Insert(unit);
    } else {
      out->push_back(unit);
    }
  }
}

}  // namespace vstack
