#include "blockdev/grainmap/mapped_layer.h"

namespace vstack {

void AppendJournalProperties(MetaStore* store, PropertyList& out) {
  if (!store) return;
  auto lock = store->LockCommits();
  const MetaStore::Counters c = store->counters();
  out.push_back({"journal_bytes", store->superblock().journal_bytes, "bytes"});
  out.push_back({"journal_used_bytes", store->journal_used(), "bytes"});
  out.push_back({"replayed_transactions", c.replayed_transactions, ""});
  out.push_back({"checkpoints", c.checkpoints, ""});
}

Result<std::unique_ptr<MetaStore>> FormatUnlessReadOnly(BlockDevice& lower, const Superblock& sb,
                                                         bool read_only, const char* layer) {
  if (read_only) return std::unique_ptr<MetaStore>();
  return MetaStore::Format(lower, sb, layer);
}

}  // namespace vstack
