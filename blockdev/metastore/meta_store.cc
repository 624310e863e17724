#include "blockdev/metastore/meta_store.h"

#include <algorithm>
#include <cstring>

#include "blockdev/metastore/crc32c.h"
#include "blockdev/metastore/journal_txn.h"
#include "blockdev/metastore/table_page.h"
#include "lib/aligned_buffer.h"
#include "lib/endian.h"
#include "lib/entropy.h"
#include "lib/iovec.h"
#include "lib/plural.h"

namespace vstack {
namespace {

constexpr uint64_t kDataAlign = 1 << 20;
constexpr size_t kPagesPerChunk = 256;  // table pages read or written per batch (1 MiB)

uint64_t RoundUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

}  // namespace

uint64_t MetaStore::Discard(std::span<const std::pair<uint64_t, uint64_t>> ranges) {
  constexpr size_t kBatch = 256;
  IoQueue* queue = io().queue();
  if (queue == nullptr) return 0;
  uint64_t done = 0;
  std::vector<IoRequest> reqs;
  for (size_t i = 0; i < ranges.size(); i += kBatch) {
    reqs.assign(std::min(kBatch, ranges.size() - i), IoRequest{});
    for (size_t k = 0; k < reqs.size(); ++k) {
      reqs[k].op = Op::kDiscard;
      reqs[k].offset = ranges[i + k].first;
      reqs[k].length = ranges[i + k].second;
    }
    (void)RunRequests(*queue, reqs);
    for (const IoRequest& r : reqs) done += r.status ? 0 : r.length;
  }
  return done;
}

Superblock MetaStore::Plan(std::string magic, std::vector<TableDesc> tables,
                           uint64_t journal_bytes, std::vector<uint8_t> payload) {
  Superblock sb;
  sb.magic = std::move(magic);
  sb.generation = 1;
  sb.checkpoint_seq = 1;
  sb.journal_offset = kSuperblockBytes;
  if (journal_bytes != 0) {
    sb.journal_bytes = RoundUp(
        std::clamp<uint64_t>(journal_bytes, 16 * kMetaPageSize, kMaxJournalBytes), kMetaPageSize);
  }
  uint64_t pos = sb.journal_offset + sb.journal_bytes;
  for (TableDesc& t : tables) {
    t.offset = pos;
    pos += t.bytes();
  }
  sb.tables = std::move(tables);
  sb.data_offset = RoundUp(pos, kDataAlign);
  sb.payload = std::move(payload);
  return sb;
}

MetaStore::MetaStore(BlockDevice& lower, Superblock sb, bool read_only, std::string who)
    : lower_(lower),
      sb_(std::move(sb)),
      read_only_(read_only),
      who_(std::move(who)),
      journaled_(sb_.tables) {
  next_seq_ = sb_.checkpoint_seq;
}

MetaStore::~MetaStore() = default;

SyncIo& MetaStore::io() {
  if (!io_) io_ = std::make_unique<SyncIo>(lower_);
  return *io_;
}

Result<std::unique_ptr<MetaStore>> MetaStore::Format(BlockDevice& lower, Superblock sb,
                                                     std::string who) {
  VSTACK_RETURN_IF_ERROR(ValidateLayout(sb, lower.geometry().size_bytes, who));
  sb.volume_id = RandomBits64() ^ 0x5653544B00000000ull;
  std::unique_ptr<MetaStore> store(new MetaStore(lower, sb, false, who));
  SyncIo& io = store->io();
  if (IoQueue* q = io.queue(); q == nullptr) {
    return Annotate(io.open_error(), who + ": cannot open a queue of the device below");
  }
  VSTACK_RETURN_IF_ERROR(FormatMetadata(io, sb, who));
  store->sb_ = sb;
  return store;
}

Result<std::unique_ptr<MetaStore>> MetaStore::Attach(BlockDevice& lower, Superblock sb,
                                                     bool read_only, std::string who) {
  VSTACK_RETURN_IF_ERROR(ValidateLayout(sb, lower.geometry().size_bytes, who));
  if (sb.journal_bytes < 16 * kMetaPageSize || sb.journal_bytes > kMaxJournalBytes) {
    return MakeError(Errc::kCorruption, who + ": superblock: journal size " +
                                            std::to_string(sb.journal_bytes) + " is outside " +
                                            std::to_string(16 * kMetaPageSize) + ".." +
                                            std::to_string(kMaxJournalBytes));
  }
  return std::unique_ptr<MetaStore>(new MetaStore(lower, std::move(sb), read_only, std::move(who)));
}

// ---------------------------------------------------------------------------------------------
// Loading

Status MetaStore::Load(const EntrySink& sink) {
  // The journal first: the entries it rewrites decide whether a table page with a bad checksum
  // is a checkpoint write torn by a crash (which the replay repairs) or corruption.
  VSTACK_RETURN_IF_ERROR(ReadJournal());
  std::vector<std::pair<uint32_t, uint64_t>> journaled;  // (table, index), sorted; on demand
  for (uint32_t t = 0; t < sb_.tables.size(); ++t) {
    const TableDesc& d = sb_.tables[t];
    const uint32_t per = d.per_page();
    VSTACK_RETURN_IF_ERROR(ReadTablePages(
        io(), sb_, t, who_,
        [&](uint64_t page_no, const uint8_t* page, const Status& page_ok) -> Status {
          // A checkpoint overwrites pages in place, so a crash may tear one (sector by sector:
          // each entry is old or new, one that straddles a sector may be neither). Every entry
          // the checkpoint changed is in the journal, which it had not yet retired: such a
          // page is loaded without those entries, and the replay below sets them. A bad page
          // that the journal does not rewrite is corruption.
          if (!page_ok) {
            if (!journaled_.Touches(t, page_no)) return page_ok;
            if (journaled.empty()) journaled = JournaledEntries();
            torn_pages_.emplace(t, page_no);
          }
          const uint8_t* e = page + kTablePageHeader;
          for (uint32_t k = 0; k < per; ++k, e += d.entry_size) {
            const uint64_t index = page_no * per + k;
            if (index >= d.entries) break;
            if (IsZero(e, d.entry_size)) continue;
            if (!page_ok && std::binary_search(journaled.begin(), journaled.end(),
                                               std::make_pair(t, index))) {
              continue;
            }
            VSTACK_RETURN_IF_ERROR(sink(t, index, e));
          }
          return OkStatus();
        }));
  }
  // The journal, in commit order, over the tables.
  Status status;
  journaled_.ForEach([&](uint32_t table, uint64_t index, const uint8_t* entry) {
    if (status) status = sink(table, index, entry);
  });
  return status;
}

std::vector<std::pair<uint32_t, uint64_t>> MetaStore::JournaledEntries() const {
  std::vector<std::pair<uint32_t, uint64_t>> out;
  journaled_.ForEach([&](uint32_t table, uint64_t index, const uint8_t*) {
    out.emplace_back(table, index);
  });
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

Status MetaStore::CheckRecords(const uint8_t* p, size_t n, uint64_t seq, uint64_t offset) const {
  size_t at = 0;
  uint64_t k = 0;
  while (at < n) {
    // Built only for an error: a transaction may hold hundreds of thousands of records.
    auto where = [&] {
      return who_ + ": journal transaction " + std::to_string(seq) + " at offset " +
             std::to_string(offset) + ", record " + std::to_string(k) + ": ";
    };
    const uint32_t table = p[at];
    if (table >= sb_.tables.size()) {
      return MakeError(Errc::kCorruption,
                       where() + "table " + std::to_string(table) + " does not exist");
    }
    if (n - at < RecordSize(table)) return MakeError(Errc::kCorruption, where() + "truncated");
    const uint64_t index = LoadLE48(p + at + 1);
    if (index >= sb_.tables[table].entries) {
      return MakeError(Errc::kCorruption,
                       where() + "entry " + std::to_string(index) + " is beyond table " +
                           std::to_string(table) + " (" +
                           Counted(sb_.tables[table].entries, "entry", "entries") + ")");
    }
    at += RecordSize(table);
    ++k;
  }
  return OkStatus();
}

Result<bool> MetaStore::ValidTransactionAfter(uint64_t pos, uint64_t seq) {
  SyncIo& io = this->io();
  // The rest of the journal is read in chunks and every 4 KiB block of it looked at: a
  // transaction is written only once the one before it is durable, so a valid one with a
  // higher sequence number anywhere after `pos` means one before it was lost, not torn.
  constexpr uint64_t kChunk = uint64_t{1} << 20;
  AlignedBuffer chunk(std::min<uint64_t>(kChunk, sb_.journal_bytes));
  std::vector<uint8_t> payload;
  // Headers of later transactions that fail their checksum cost a read each; a journal that
  // holds more of them than twice its size in bytes is forged, not torn.
  uint64_t budget = 2 * sb_.journal_bytes;
  for (uint64_t base = pos + kMetaPageSize; base + kMetaPageSize <= sb_.journal_bytes;
       base += kChunk) {
    const uint64_t n = std::min(kChunk, (sb_.journal_bytes - base) / kMetaPageSize * kMetaPageSize);
    if (std::error_code ec = io.Read(sb_.journal_offset + base, chunk.span().first(n))) {
      return MakeError(ec, who_ + ": cannot read the journal: " + ec.message());
    }
    for (uint64_t off = 0; off < n; off += kMetaPageSize) {
      TxnHeader h;
      const auto* b = reinterpret_cast<const uint8_t*>(chunk.data()) + off;
      if (!ParseHeader(b, sb_.volume_id, &h) || h.seq <= seq) continue;
      const uint64_t cost = uint64_t{h.blocks} * kMetaPageSize;
      if (cost > budget) return true;  // reported as corruption by the caller
      budget -= cost;
      const uint64_t at = base + off;
      VSTACK_ASSIGN_OR_RETURN(bool valid,
                              ReadTransaction(io, sb_.journal_offset + at, sb_.journal_bytes - at,
                                              h, sb_.volume_id, &payload, who_));
      if (valid) return true;
    }
  }
  return false;
}

Status MetaStore::ReadJournal() {
  SyncIo& io = this->io();
  uint64_t pos = 0;
  uint64_t seq = sb_.checkpoint_seq;
  AlignedBuffer block(kMetaPageSize);
  std::vector<uint8_t> records;
  while (pos + kMetaPageSize <= sb_.journal_bytes) {
    const uint64_t offset = sb_.journal_offset + pos;
    if (std::error_code ec = io.Read(offset, block.span())) {
      return MakeError(ec, who_ + ": cannot read the journal at offset " + std::to_string(offset) +
                               ": " + ec.message());
    }
    TxnHeader h;
    const bool parsed =
        ParseHeader(reinterpret_cast<const uint8_t*>(block.data()), sb_.volume_id, &h);
    bool valid = parsed && h.seq == seq;
    // The slot in use is older than the journal when the other slot, the newer one, is damaged:
    // the journal restarts at its beginning only once a checkpoint's superblock is durable, so
    // a whole transaction there with a later number says where that checkpoint left replay.
    const bool newer_checkpoint =
        pos == 0 && parsed && h.seq > seq && !sb_.other_slot_problem.empty();
    if (valid || newer_checkpoint) {
      VSTACK_ASSIGN_OR_RETURN(valid, ReadTransaction(io, offset, sb_.journal_bytes - pos, h,
                                                     sb_.volume_id, &records, who_));
    }
    if (valid && newer_checkpoint) {
      sb_.other_slot_problem +=
          "; it was the newer one: the journal starts after a later "
          "checkpoint than the slot in use says (transaction " +
          std::to_string(h.seq) + ", not " + std::to_string(seq) + "), and replay starts there";
      sb_.checkpoint_seq = seq = h.seq;
    }
    if (!valid) {
      // The end of the journal: a block that holds no transaction `seq` (never written, an
      // older one, or a torn last one). A bad one with valid successors is corruption instead,
      // whatever part of it is bad (header, sequence number, volume, checksum, or all zeros).
      VSTACK_ASSIGN_OR_RETURN(bool later, ValidTransactionAfter(pos, seq));
      if (later) {
        std::string m = who_ + ": journal transaction " + std::to_string(seq) + " at offset " +
                        std::to_string(offset) +
                        " is corrupt (bad header or checksum) but later transactions exist "
                        "(or more forged headers than a journal of this size can hold)";
        if (!sb_.other_slot_problem.empty()) {
          // The likelier cause: the newer superblock is the damaged one, and the older one in
          // use points into a journal that has been written over since.
          m += "; but the other superblock slot does not decode (" + sb_.other_slot_problem +
               "), so the slot in use (generation " + std::to_string(sb_.generation) +
               ") may be the older one, whose journal has been reused since: the superblock is "
               "most likely what is damaged, not the journal";
        }
        return MakeError(Errc::kCorruption, m);
      }
      break;
    }
    const uint8_t* payload = records.data();
    VSTACK_RETURN_IF_ERROR(CheckRecords(payload, h.payload, seq, offset));
    journaled_.Append(payload, h.payload);
    pos += uint64_t{h.blocks} * kMetaPageSize;
    ++seq;
    ++counters_.replayed_transactions;
  }
  journal_pos_ = pos;
  next_seq_ = seq;
  return OkStatus();
}

// ---------------------------------------------------------------------------------------------
// Recording

void MetaStore::Set(uint32_t table, uint64_t index, const void* entry) {
  Record(&pending_, table, index, entry);
}

void MetaStore::Record(MetaBatch* batch, uint32_t table, uint64_t index, const void* entry) const {
  const uint32_t es = sb_.tables[table].entry_size;
  uint8_t head[7];
  head[0] = static_cast<uint8_t>(table);
  StoreLE48(head + 1, index);
  std::vector<uint8_t>& r = batch->records;  // appended, not zero-filled first (resize would)
  r.insert(r.end(), head, head + sizeof(head));
  const auto* e = static_cast<const uint8_t*>(entry);
  r.insert(r.end(), e, e + es);
}

void MetaStore::EndGroup() {
  const size_t end = pending_.records.size();
  if (pending_.group_ends.empty() || pending_.group_ends.back() != end) {
    pending_.group_ends.push_back(end);
  }
}

MetaBatch MetaStore::TakePending() {
  EndGroup();
  MetaBatch out;
  std::swap(out, pending_);
  if (!out.group_ends.empty() && out.group_ends.front() == 0) out.group_ends.erase(out.group_ends.begin());
  return out;
}

void MetaStore::RestorePending(MetaBatch batch) {
  if (batch.empty()) return;
  const size_t shift = batch.records.size();
  batch.records.insert(batch.records.end(), pending_.records.begin(), pending_.records.end());
  for (size_t e : pending_.group_ends) {
    if (e > 0) batch.group_ends.push_back(e + shift);
  }
  pending_ = std::move(batch);
}

// ---------------------------------------------------------------------------------------------
// Committing

Status MetaStore::WriteTransaction(const uint8_t* payload, size_t bytes) {
  const uint64_t blocks = TxnBlocks(bytes);
  if (txn_.size() < blocks * kMetaPageSize) txn_ = AlignedBuffer(blocks * kMetaPageSize);
  const std::span<std::byte> txn = txn_.span().first(blocks * kMetaPageSize);
  EncodeTransaction(payload, bytes, next_seq_, sb_.volume_id, txn);
  const uint64_t offset = sb_.journal_offset + journal_pos_;
  if (std::error_code ec = TimeDurableWait([&] { return io().Write(offset, txn, kIoFua); })) {
    return MakeError(ec, who_ + ": cannot write journal transaction " + std::to_string(next_seq_) +
                             " at offset " + std::to_string(offset) + ": " + ec.message());
  }
  journal_pos_ += txn.size();
  ++next_seq_;
  journaled_.Append(payload, bytes);
  ++counters_.transactions;
  counters_.journal_bytes_written += txn.size();
  return OkStatus();
}

Status MetaStore::Commit(MetaBatch* batch) {
  if (read_only_) return MakeError(Errc::kReadOnly, who_ + ": metadata is read-only");
  if (std::error_code ec = TimeDurableWait([&] { return io().Flush(); })) {
    return MakeError(ec, who_ + ": flush of the device below failed: " + ec.message());
  }
  if (batch->empty()) return OkStatus();
  if (batch->group_ends.empty() || batch->group_ends.back() != batch->records.size()) {
    batch->group_ends.push_back(batch->records.size());
  }
  size_t start = 0, gi = 0;
  Status status;
  while (start < batch->records.size()) {
    const uint64_t room = sb_.journal_bytes - journal_pos_;
    const uint64_t payload_room = room > kTxnHeader ? room - kTxnHeader : 0;
    size_t end = start;
    while (gi < batch->group_ends.size() && batch->group_ends[gi] - start <= payload_room) {
      end = batch->group_ends[gi++];
    }
    if (end == start) {
      if (journal_pos_ == 0) {
        status = MakeError(Errc::kNoSpace, who_ + ": one metadata change group of " +
                                               std::to_string(batch->group_ends[gi] - start) +
                                               " bytes does not fit in the journal");
        break;
      }
      status = Checkpoint();
      if (!status) break;
      continue;
    }
    status = WriteTransaction(batch->records.data() + start, end - start);
    if (!status) break;
    start = end;
  }
  // Keep what was not journaled, for the caller to restore.
  batch->records.erase(batch->records.begin(), batch->records.begin() + start);
  std::vector<size_t> rest;
  for (size_t e : batch->group_ends) {
    if (e > start) rest.push_back(e - start);
  }
  batch->group_ends = std::move(rest);
  if (!status) return status;
  ++counters_.commits;
  if (journal_pos_ * 2 >= sb_.journal_bytes) return Checkpoint();
  return OkStatus();
}

Status MetaStore::Checkpoint() {
  if (read_only_) return MakeError(Errc::kReadOnly, who_ + ": metadata is read-only");
  if (journaled_.empty() && journal_pos_ == 0) return OkStatus();
  // Every page that journaled records change, in page order, each with its records in journal
  // order (bucketed as they were journaled: no sort of the records here).
  const std::vector<JournaledRecords::Page> pages = journaled_.SortedPages();
  SyncIo& io = this->io();
  IoQueue* queue = io.queue();
  if (queue == nullptr) return Annotate(io.open_error(), who_ + ": no queue for the checkpoint");
  AlignedBuffer chunk(std::clamp<uint64_t>(pages.size(), 1, kPagesPerChunk) * kMetaPageSize);
  std::vector<IoRequest> reqs;
  std::vector<iovec> iov;
  for (size_t first = 0; first < pages.size(); first += kPagesPerChunk) {
    const std::span<const JournaledRecords::Page> run =
        std::span(pages).subspan(first, std::min(kPagesPerChunk, pages.size() - first));
    reqs.assign(run.size(), IoRequest{});
    iov.resize(run.size());
    for (size_t i = 0; i < run.size(); ++i) {
      iov[i] = iovec{chunk.data() + i * kMetaPageSize, kMetaPageSize};
      reqs[i].op = Op::kRead;
      reqs[i].offset = sb_.tables[run[i].table].offset + run[i].page * kMetaPageSize;
      reqs[i].length = kMetaPageSize;
      reqs[i].iov = &iov[i];
      reqs[i].iovcnt = 1;
    }
    if (std::error_code ec = RunRequests(*queue, reqs)) {
      return MakeError(ec, who_ + ": checkpoint: cannot read table pages: " + ec.message());
    }
    for (size_t i = 0; i < run.size(); ++i) {
      auto* page = reinterpret_cast<uint8_t*>(chunk.data()) + i * kMetaPageSize;
      const uint32_t table = run[i].table;
      const uint64_t page_no = run[i].page;
      if (!torn_pages_.contains({table, page_no})) {
        VSTACK_RETURN_IF_ERROR(
            CheckTablePage(page, sb_.volume_id, table, page_no, reqs[i].offset, who_));
      }
      const TableDesc& d = sb_.tables[table];
      journaled_.ForEachOfPage(run[i], [&](uint32_t slot, const uint8_t* entry) {
        std::memcpy(page + kTablePageHeader + slot * d.entry_size, entry, d.entry_size);
      });
      SealTablePage(page, sb_.volume_id, table, page_no);
      reqs[i].op = Op::kWrite;
    }
    if (std::error_code ec = RunRequests(*queue, reqs)) {
      // A write that fails may have landed in part (the block contract): its page may be torn
      // now, just as by a power cut, with every entry it changed still in the journal. The
      // next checkpoint rebuilds it from the journal instead of refusing it as corruption.
      for (size_t i = 0; i < run.size(); ++i) {
        if (reqs[i].status) torn_pages_.emplace(run[i].table, run[i].page);
      }
      return MakeError(ec, who_ + ": checkpoint: cannot write table pages: " + ec.message());
    }
    counters_.pages_written += run.size();
  }
  if (std::error_code ec = TimeDurableWait([&] { return io.Flush(); })) {
    return MakeError(ec, who_ + ": checkpoint: flush failed: " + ec.message());
  }
  Superblock next = sb_;
  next.checkpoint_seq = next_seq_;
  VSTACK_RETURN_IF_ERROR(TimeDurableWait([&] { return WriteNextGeneration(io, &next, who_); }));
  sb_ = std::move(next);
  journal_pos_ = 0;
  journaled_.Clear();
  torn_pages_.clear();
  ++counters_.checkpoints;
  return OkStatus();
}

Status MetaStore::RewritePayload(std::vector<uint8_t> payload) {
  Superblock next = sb_;
  next.payload = std::move(payload);
  VSTACK_RETURN_IF_ERROR(WriteNextGeneration(io(), &next, who_));
  sb_ = std::move(next);
  return OkStatus();
}

Status MetaStore::Close() {
  Status s = read_only_ ? OkStatus() : Checkpoint();
  io_.reset();
  return s;
}

MetaStore::Counters MetaStore::counters() const { return counters_; }

}  // namespace vstack
