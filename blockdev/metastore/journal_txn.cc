// The metadata journal's transaction format (journal_txn.h): encoding, parsing, and the
// bounded read of a transaction found in the journal.
#include "blockdev/metastore/journal_txn.h"

#include <algorithm>
#include <cstring>

#include "blockdev/metastore/crc32c.h"
#include "lib/aligned_buffer.h"
#include "lib/endian.h"

namespace vstack {
namespace {

constexpr uint32_t kTxnMagic = 0x314A5356;  // "VSJ1"
constexpr size_t kJournalPagesPerChunk = 256;  // journal blocks read per batch (1 MiB)

// The checksum of a transaction's first `bytes` bytes (at least its header); continue it over
// the rest with Crc32cExtend.
uint32_t TxnCrc(const uint8_t* txn, size_t bytes, uint64_t volume_id) {
  uint8_t seed[8];
  StoreLE64(seed, volume_id);
  uint32_t crc = Crc32c(seed, sizeof seed);
  crc = Crc32cExtend(crc, txn, 4);
  const uint8_t zero[4] = {};
  crc = Crc32cExtend(crc, zero, 4);
  return Crc32cExtend(crc, txn + 8, bytes - 8);
}

}  // namespace

uint64_t TxnBlocks(uint64_t payload) {
  return (kTxnHeader + payload + kMetaPageSize - 1) / kMetaPageSize;
}

bool ParseHeader(const uint8_t* block, uint64_t volume_id, TxnHeader* h) {
  if (LoadLE32(block) != kTxnMagic || LoadLE64(block + 16) != volume_id) return false;
  h->seq = LoadLE64(block + 8);
  h->blocks = LoadLE32(block + 24);
  h->payload = LoadLE32(block + 28);
  return true;
}

Result<bool> ReadTransaction(SyncIo& io, uint64_t offset, uint64_t room, const TxnHeader& h,
                             uint64_t volume_id, std::vector<uint8_t>* payload,
                             const std::string& who) {
  const uint64_t blocks = h.blocks;
  if (blocks == 0 || blocks != TxnBlocks(h.payload) || blocks > room / kMetaPageSize) return false;
  const uint64_t bytes = blocks * kMetaPageSize;
  AlignedBuffer chunk(std::min<uint64_t>(bytes, kJournalPagesPerChunk * kMetaPageSize));
  const auto* c = reinterpret_cast<const uint8_t*>(chunk.data());
  uint32_t crc = 0, stored = 0;
  payload->clear();
  for (uint64_t at = 0; at < bytes; at += chunk.size()) {
    const uint64_t n = std::min<uint64_t>(chunk.size(), bytes - at);
    if (std::error_code ec = io.Read(offset + at, chunk.span().first(n))) {
      return MakeError(ec, who + ": cannot read the journal at offset " +
                               std::to_string(offset + at) + ": " + ec.message());
    }
    if (at == 0) {
      stored = LoadLE32(c + 4);
      crc = TxnCrc(c, n, volume_id);
    } else {
      crc = Crc32cExtend(crc, c, n);
    }
    if (at == 0 && n == bytes) {  // the usual case: one chunk, kept as read
      payload->assign(c + kTxnHeader, c + kTxnHeader + h.payload);
    }
  }
  if (crc != stored) return false;
  if (bytes <= chunk.size()) return true;
  // Valid and larger than a chunk (a forged header with a matching checksum is bounded by the
  // journal, itself at most kMaxJournalBytes): now read what it holds.
  payload->resize(h.payload);
  for (uint64_t done = 0; done < h.payload;) {
    const uint64_t first = kTxnHeader + done;  // byte of the transaction
    const uint64_t from = first / kMetaPageSize * kMetaPageSize;
    const uint64_t n = std::min<uint64_t>(chunk.size(), bytes - from);
    if (std::error_code ec = io.Read(offset + from, chunk.span().first(n))) {
      return MakeError(ec, who + ": cannot read the journal at offset " +
                               std::to_string(offset + from) + ": " + ec.message());
    }
    const uint64_t take = std::min<uint64_t>(h.payload - done, from + n - first);
    std::memcpy(payload->data() + done, c + (first - from), take);
    done += take;
  }
  return true;
}

void EncodeTransaction(const uint8_t* payload, size_t bytes, uint64_t seq, uint64_t volume_id,
                       std::span<std::byte> txn) {
  auto* t = reinterpret_cast<uint8_t*>(txn.data());
  std::memset(t + kTxnHeader + bytes, 0, txn.size() - kTxnHeader - bytes);  // the padding
  StoreLE32(t, kTxnMagic);
  StoreLE64(t + 8, seq);
  StoreLE64(t + 16, volume_id);
  StoreLE32(t + 24, static_cast<uint32_t>(txn.size() / kMetaPageSize));
  StoreLE32(t + 28, static_cast<uint32_t>(bytes));
  std::memcpy(t + kTxnHeader, payload, bytes);
  StoreLE32(t + 4, TxnCrc(t, txn.size(), volume_id));
}

}  // namespace vstack
