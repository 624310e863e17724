// MetaStore: the persistent metadata of a remapping layer (dedup, zstd). Tables of fixed-size
// entries (a map, reference counts, ...) live in checksummed 4 KiB pages (table_page.h), and a
// write-ahead journal records entry changes, after the A/B superblock (superblock.h):
//
//   [superblock A][superblock B][journal][table 0 pages][table 1 pages]...[data, 1 MiB aligned]
//
// Write path. The layer changes its in-memory state and records each persistent change with
// Set(table, index, entry); EndGroup() closes an atomic unit (one grain's remap together with
// the reference counts it changes). Nothing is written until Commit():
//   1. flush the device below, so the data every recorded change points at is durable;
//   2. append the records to the journal as checksummed transactions written with FUA, split
//      only between groups;
//   3. when the journal is half full, Checkpoint(): read each table page that journaled records
//      touch, apply them in order, write it back, flush, then write the superblock with
//      checkpoint_seq past them; the journal restarts at its beginning.
// Table pages therefore only ever hold journaled state. Records carry absolute values, so
// replaying them over any mix of old and new pages is idempotent and yields the state of the
// last durable transaction. Load() reads the journal from checkpoint_seq up to the first
// transaction that is missing or torn (a bad transaction that is followed by a valid later one
// is corruption and fails the load), then every table page, then applies the journal. A table
// page with a bad checksum is a checkpoint write that a crash tore (sector by sector) if the
// journal rewrites at least one of its entries: it is loaded without the entries the journal
// rewrites. Otherwise it is corruption and fails the load.
//
// Threading: Set, EndGroup, TakePending and RestorePending are called with the layer's own
// mutex held (the store does not lock them). Commit, Checkpoint and Close need the commit lock
// (LockCommits()), which serialises them. Metadata I/O uses one queue of the device below that
// the store opens for itself and drives synchronously: a commit blocks its caller, as fdatasync
// does. The device below must therefore be thread-safe.
#ifndef VSTACK_BLOCKDEV_METASTORE_META_STORE_H_
#define VSTACK_BLOCKDEV_METASTORE_META_STORE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "blockdev/metastore/journaled_records.h"
#include "blockdev/metastore/superblock.h"
#include "lib/aligned_buffer.h"
#include "lib/block_device.h"
#include "lib/clock.h"
#include "lib/progress.h"
#include "lib/sync_io.h"

namespace vstack {

// Recorded changes not yet committed: serialized records and the ends of their atomic groups.
struct MetaBatch {
  std::vector<uint8_t> records;
  std::vector<size_t> group_ends;  // byte offsets into `records`, increasing
  bool empty() const { return records.empty(); }
};

// Called by Load for every non-zero entry of every table page, then for every journaled record
// in commit order (zero values included). Returns an error to fail the load, e.g. for an entry
// that points outside the device; the message should name the table and index.
using EntrySink = std::function<Status(uint32_t table, uint64_t index, const uint8_t* entry)>;

// The largest journal a store accepts (a forged superblock cannot make replay read more).
inline constexpr uint64_t kMaxJournalBytes = uint64_t{64} << 20;

class MetaStore {
 public:
  struct Counters {
    uint64_t commits = 0;            // Commit calls that wrote at least one transaction
    uint64_t transactions = 0;       // journal transactions written
    uint64_t journal_bytes_written = 0;
    uint64_t checkpoints = 0;
    uint64_t pages_written = 0;      // table pages written by checkpoints
    uint64_t replayed_transactions = 0;  // by Load
    // Time commits and checkpoints waited for durability below: their flushes and FUA writes
    // (a device without FUA serves a FUA write as a write and a flush), in nanoseconds.
    uint64_t durable_wait_ns = 0;
  };

  // Lays out superblocks, journal and tables (each table given by entries and entry_size) from
  // offset 0; data_offset is the first 1 MiB boundary after them. generation 1, checkpoint_seq 1.
  // The journal is at least 64 KiB and at most kMaxJournalBytes; `journal_bytes` 0: none, the
  // tables follow the superblocks (a layer that keeps its tables in place itself, crc32c).
  static Superblock Plan(std::string magic, std::vector<TableDesc> tables, uint64_t journal_bytes,
                         std::vector<uint8_t> payload);

  // Writes the layout of `sb` to `lower`: zeroes the journal and the tables (write-zeroes, which
  // unmaps on sparse devices), then both superblock slots. Gives `sb` a random volume id.
  static Result<std::unique_ptr<MetaStore>> Format(BlockDevice& lower, Superblock sb,
                                                   std::string who);
  // Attaches to metadata whose superblock was read with ReadSuperblock. Call Load() next.
  static Result<std::unique_ptr<MetaStore>> Attach(BlockDevice& lower, Superblock sb,
                                                   bool read_only, std::string who);
  ~MetaStore();

  const Superblock& superblock() const { return sb_; }
  // Bytes of the device below before the data area: superblocks, journal, tables.
  uint64_t metadata_bytes() const { return sb_.data_offset; }
  bool read_only() const { return read_only_; }

  // Loads the tables and replays the journal through `sink` (see EntrySink). Call once.
  Status Load(const EntrySink& sink);

  // Records that entry `index` of `table` now holds `entry` (entry_size bytes).
  void Set(uint32_t table, uint64_t index, const void* entry);
  // The same record, appended to `batch` (a layer that builds its batches itself).
  void Record(MetaBatch* batch, uint32_t table, uint64_t index, const void* entry) const;
  // Ends the current atomic group of records.
  void EndGroup();
  size_t pending_bytes() const { return pending_.records.size(); }
  // Takes the recorded changes for a commit (the last group is closed if open).
  MetaBatch TakePending();
  // Puts back changes a failed Commit did not journal, ahead of anything recorded since.
  void RestorePending(MetaBatch batch);

  // Serialises Commit, Checkpoint and Close. Held across the commit's I/O: an IoMutex
  // (lib/progress.h).
  std::unique_lock<IoMutex> LockCommits() { return std::unique_lock(commit_mu_); }
  // Steps 1-3 above. On error, `batch` keeps the records that were not journaled.
  // REQUIRES: the commit lock.
  Status Commit(MetaBatch* batch);
  // Applies every journaled record to the table pages and restarts the journal. A page whose
  // write fails may be torn (a failed write may land in part): the journal is kept, and the
  // next checkpoint rebuilds that page from it rather than refusing its checksum.
  // REQUIRES: the commit lock.
  Status Checkpoint();
  // Checkpoints and releases the store's queue of the device below (which may then be closed).
  // REQUIRES: the commit lock and nothing pending (commit first).
  Status Close();
  // Discards the byte ranges {offset, length} of the device below (space the layer freed with a
  // durable commit) on the store's queue: submitted together, in batches of up to 256, and
  // reaped before it returns. Returns the bytes discarded; a failed discard only leaves its
  // bytes where they were. REQUIRES: the commit lock.
  uint64_t Discard(std::span<const std::pair<uint64_t, uint64_t>> ranges);
  // Writes the superblock again as its next generation, with `payload` in place of the
  // layer's fields (a layer migrating an image of an older version of its format).
  // REQUIRES: the commit lock; not read-only.
  Status RewritePayload(std::vector<uint8_t> payload);
  // Releases the store's queue of the device below; the next metadata I/O opens a new one.
  // For `vstack check`, which repairs the device below next (BlockDevice::Check).
  // REQUIRES: the commit lock.
  void ReleaseQueue() { io_.reset(); }

  Counters counters() const;  // REQUIRES: the commit lock, or no concurrent commit
  uint64_t journal_used() const { return journal_pos_; }

 private:
  MetaStore(BlockDevice& lower, Superblock sb, bool read_only, std::string who);

  SyncIo& io();
  // Runs `flush_or_fua_write` and adds its time to counters_.durable_wait_ns.
  template <typename F>
  auto TimeDurableWait(F&& flush_or_fua_write) {
    const uint64_t start = NowNs();
    auto result = flush_or_fua_write();
    counters_.durable_wait_ns += NowNs() - start;
    return result;
  }
  Status WriteTransaction(const uint8_t* payload, size_t bytes);
  // Reads the journal from checkpoint_seq into journaled_ (validated, not applied).
  Status ReadJournal();
  // The (table, index) of every journaled record, sorted, without duplicates.
  std::vector<std::pair<uint32_t, uint64_t>> JournaledEntries() const;
  // True if a valid transaction with a sequence number above `seq` starts after `pos`.
  Result<bool> ValidTransactionAfter(uint64_t pos, uint64_t seq);
  Status CheckRecords(const uint8_t* p, size_t n, uint64_t seq, uint64_t offset) const;
  size_t RecordSize(uint32_t table) const { return 7 + sb_.tables[table].entry_size; }

  BlockDevice& lower_;
  Superblock sb_;
  const bool read_only_;
  const std::string who_;
  std::unique_ptr<SyncIo> io_;
  AlignedBuffer txn_;  // a transaction's blocks, reused; guarded by commit_mu_

  MetaBatch pending_;  // guarded by the layer's mutex

  IoMutex commit_mu_;
  uint64_t journal_pos_ = 0;       // next transaction's offset in the journal; guarded by commit_mu_
  uint64_t next_seq_ = 1;          // guarded by commit_mu_
  JournaledRecords journaled_;  // journaled records not yet in the tables; guarded by commit_mu_
  // (table, page) of pages that may be torn: found so by Load (a power cut), or whose checkpoint
  // write failed (it may have landed in part). The next checkpoint rewrites them whole.
  std::set<std::pair<uint32_t, uint64_t>> torn_pages_;
  Counters counters_;
};


}  // namespace vstack

#endif  // VSTACK_BLOCKDEV_METASTORE_META_STORE_H_
