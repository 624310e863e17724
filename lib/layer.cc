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
  // A request of ours completed in this poll already (a layer's DoPoll that retried deferred
  // work and finished it before calling here): Poll delivers it as soon as we return, so do not
  // block. Waiting for the queue below or for another queue would at best delay it; under the
  // simulator, whose scheduler cannot see such a completion, the wait could be the last
  // (vhdx+crc32c+dedup seed 394, docs/testing.md "Bugs found").
  if (has_completions()) wait = false;
  if (lower_->in_flight() > 0) {
    lower_->Poll(wait ? 1 : 0);
  } else {
    lower_->Poll(0);
    if (wait) WaitForProgress("a layer's requests wait for another queue");
  }
}

}  // namespace vstack
