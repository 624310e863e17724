#include "lib/layer.h"

#include "lib/progress.h"

namespace vstack {

Status Layer::DoClose() {
  Status mine = CloseLayer();
  Status below = lower_->Close();
  if (!mine) return mine;
  return below;
}

bool ForwardedChecksSuffice(const BlockDevice& upper, const BlockDevice& lower) {
  return upper.geometry().mem_alignment % lower.geometry().mem_alignment == 0;
}

void LayerQueue::DoPoll(bool wait) {
  if (lower_->in_flight() > 0) {
    lower_->Poll(wait ? 1 : 0);
  } else {
    lower_->Poll(0);
    if (wait) WaitForProgress("a layer's requests wait for another queue");
  }
}

}  // namespace vstack
