#include "lib/historical_bug.h"

namespace vstack {

std::atomic<bool>& HistoricalBugSwitch(HistoricalBug bug) {
  static std::atomic<bool> switches[static_cast<unsigned>(HistoricalBug::kCount)];
  return switches[static_cast<unsigned>(bug)];
}

}  // namespace vstack
