// The metadata journal's transaction (MetaStore, meta_store.h): one FUA write of whole 4 KiB
// blocks holding a header and a payload of records. Layout, little-endian:
//   0 u32 magic "VSJ1"  4 u32 crc32c of all its blocks with this field zero, seeded with the
//   volume id  8 u64 sequence number  16 u64 volume id  24 u32 blocks  28 u32 payload bytes
//  32 payload: records [u8 table][u48 index][entry bytes], back to back; zero padding after.
#ifndef VSTACK_BLOCKDEV_METASTORE_JOURNAL_TXN_H_
#define VSTACK_BLOCKDEV_METASTORE_JOURNAL_TXN_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "blockdev/metastore/superblock.h"
#include "lib/endian.h"
#include "lib/errors.h"
#include "lib/sync_io.h"

namespace vstack {

inline constexpr size_t kTxnHeader = 32;  // header bytes before the payload

struct TxnHeader {
  uint64_t seq = 0;
  uint32_t blocks = 0;
  uint32_t payload = 0;
};

// The 4 KiB blocks a transaction of `payload` bytes takes.
uint64_t TxnBlocks(uint64_t payload);

// A record's u48 index, read and written.
inline uint64_t LoadLE48(const uint8_t* p) {
  return uint64_t{LoadLE32(p)} | uint64_t{p[4]} << 32 | uint64_t{p[5]} << 40;
}
inline void StoreLE48(uint8_t* p, uint64_t v) {
  StoreLE32(p, static_cast<uint32_t>(v));
  p[4] = static_cast<uint8_t>(v >> 32);
  p[5] = static_cast<uint8_t>(v >> 40);
}

// Parses a header; false if it is not a transaction of this volume.
bool ParseHeader(const uint8_t* block, uint64_t volume_id, TxnHeader* h);

// Writes the transaction of `bytes` payload bytes into `txn`, exactly TxnBlocks(bytes) blocks.
void EncodeTransaction(const uint8_t* payload, size_t bytes, uint64_t seq, uint64_t volume_id,
                       std::span<std::byte> txn);

// Reads the transaction whose header `h` was found at byte `offset` of the device below, with
// `room` bytes of journal from there. False if it is torn or forged: its block count disagrees
// with its payload (a writer never pads), it runs past the journal, or its checksum fails.
// Memory stays bounded by the journal's real content: the checksum is computed chunk by chunk
// before the payload the header claims is kept. On success `payload` holds its records.
// Errors are read errors of the device below, with `who` in their words.
Result<bool> ReadTransaction(SyncIo& io, uint64_t offset, uint64_t room, const TxnHeader& h,
                             uint64_t volume_id, std::vector<uint8_t>* payload,
                             const std::string& who);

}  // namespace vstack

#endif  // VSTACK_BLOCKDEV_METASTORE_JOURNAL_TXN_H_
