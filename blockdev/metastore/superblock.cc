#include "blockdev/metastore/superblock.h"

#include <cstring>

#include "blockdev/metastore/crc32c.h"
#include "blockdev/metastore/table_page.h"
#include "lib/aligned_buffer.h"
#include "lib/endian.h"
#include "lib/iovec.h"
#include "lib/plural.h"

namespace vstack {
namespace {

// Slot layout (little-endian):
//   0 magic[8]  8 u32 crc32c(slot with this field zero)  12 u32 version
//  16 u64 generation  24 u64 volume_id  32 u64 checkpoint_seq
//  40 u64 journal_offset  48 u64 journal_bytes  56 u64 data_offset
//  64 u32 table_count  68 u32 payload_bytes
//  72 tables[table_count] {u64 offset, u64 entries, u32 entry_size, u32 reserved}  (24 B each)
// 512 payload[payload_bytes]
constexpr uint32_t kVersion = 1;
constexpr size_t kTablesAt = 72;
constexpr size_t kTableDescBytes = 24;
constexpr size_t kPayloadAt = 512;
static_assert(kTablesAt + kMaxTables * kTableDescBytes <= kPayloadAt);
static_assert(kPayloadAt + kMaxPayload <= kMetaPageSize);

std::string Hex(uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

// Reads both slots into `buf` (kSuperblockBytes). A device that ends after slot A (an image
// truncated to its first 4 KiB) reads as if slot B were blank, so that a valid slot A still says
// what the device held. An error only if slot A cannot be read.
std::error_code ReadSlots(SyncIo& io, AlignedBuffer& buf) {
  std::error_code ec = io.Read(0, buf.span());
  if (ec != make_error_code(Errc::kOutOfRange)) return ec;
  std::memset(buf.data(), 0, kSuperblockBytes);
  return io.Read(0, buf.span().first(kMetaPageSize));
}

// True if slot A holds what the first write of a format can leave when a crash tears it at
// sector (512-byte) boundaries, next to a blank slot B: nothing past the slot's first 1 KiB,
// where its fields lie, and a first sector that is blank or the new one (it starts with the
// magic). A first sector of other bytes (a partition table, say) is data a format never wrote.
bool TornFirstFormat(const uint8_t* slots, std::string_view magic) {
  const uint8_t* a = slots;
  return IsZero(slots + kMetaPageSize, kMetaPageSize) && IsZero(a + 1024, kMetaPageSize - 1024) &&
         (IsZero(a, 512) || std::memcmp(a, magic.data(), 8) == 0);
}

}  // namespace

uint32_t TableDesc::per_page() const { return TablePageCapacity(entry_size); }

uint64_t TableDesc::pages() const {
  const uint32_t per = per_page();
  return per == 0 ? 0 : (entries + per - 1) / per;
}

std::vector<uint8_t> EncodeSuperblock(const Superblock& sb) {
  std::vector<uint8_t> s(kMetaPageSize, 0);
  std::memcpy(&s[0], sb.magic.data(), std::min<size_t>(8, sb.magic.size()));
  StoreLE32(&s[12], kVersion);
  StoreLE64(&s[16], sb.generation);
  StoreLE64(&s[24], sb.volume_id);
  StoreLE64(&s[32], sb.checkpoint_seq);
  StoreLE64(&s[40], sb.journal_offset);
  StoreLE64(&s[48], sb.journal_bytes);
  StoreLE64(&s[56], sb.data_offset);
  StoreLE32(&s[64], static_cast<uint32_t>(sb.tables.size()));
  StoreLE32(&s[68], static_cast<uint32_t>(sb.payload.size()));
  for (size_t i = 0; i < sb.tables.size() && i < kMaxTables; ++i) {
    uint8_t* t = &s[kTablesAt + i * kTableDescBytes];
    StoreLE64(t, sb.tables[i].offset);
    StoreLE64(t + 8, sb.tables[i].entries);
    StoreLE32(t + 16, sb.tables[i].entry_size);
  }
  if (!sb.payload.empty()) {  // an empty vector may have a null data()
    std::memcpy(&s[kPayloadAt], sb.payload.data(), std::min(sb.payload.size(), kMaxPayload));
  }
  StoreLE32(&s[8], Crc32c(s.data(), s.size()));
  return s;
}

Result<Superblock> DecodeSuperblock(const uint8_t* slot, std::string_view magic, uint64_t offset,
                                    const std::string& who) {
  const std::string where = who + ": superblock at offset " + std::to_string(offset) + ": ";
  if (std::memcmp(slot, magic.data(), 8) != 0) {
    return MakeError(Errc::kCorruption, where + "bad magic (expected '" + std::string(magic) + "')");
  }
  std::vector<uint8_t> copy(slot, slot + kMetaPageSize);
  const uint32_t stored = LoadLE32(&copy[8]);
  StoreLE32(&copy[8], 0);
  const uint32_t actual = Crc32c(copy.data(), copy.size());
  if (stored != actual) {
    return MakeError(Errc::kChecksumMismatch, where + "checksum mismatch (stored " + Hex(stored) +
                                                  ", computed " + Hex(actual) + ")");
  }
  const uint32_t version = LoadLE32(slot + 12);
  if (version != kVersion) {
    return MakeError(Errc::kNotSupported,
                     where + "version " + std::to_string(version) + " is not supported (expected " +
                         std::to_string(kVersion) + ")");
  }
  Superblock sb;
  sb.magic = std::string(magic);
  sb.generation = LoadLE64(slot + 16);
  sb.volume_id = LoadLE64(slot + 24);
  sb.checkpoint_seq = LoadLE64(slot + 32);
  sb.journal_offset = LoadLE64(slot + 40);
  sb.journal_bytes = LoadLE64(slot + 48);
  sb.data_offset = LoadLE64(slot + 56);
  const uint32_t tables = LoadLE32(slot + 64);
  const uint32_t payload = LoadLE32(slot + 68);
  if (tables > kMaxTables) {
    return MakeError(Errc::kCorruption, where + "table count " + std::to_string(tables) +
                                            " exceeds " + std::to_string(kMaxTables));
  }
  if (payload > kMaxPayload) {
    return MakeError(Errc::kCorruption, where + "payload size " + std::to_string(payload) +
                                            " exceeds " + std::to_string(kMaxPayload));
  }
  for (uint32_t i = 0; i < tables; ++i) {
    const uint8_t* t = slot + kTablesAt + i * kTableDescBytes;
    TableDesc d{LoadLE64(t), LoadLE64(t + 8), LoadLE32(t + 16)};
    if (d.entry_size == 0 || d.per_page() == 0) {
      return MakeError(Errc::kCorruption, where + "table " + std::to_string(i) + ": entry size " +
                                              std::to_string(d.entry_size) + " is invalid");
    }
    sb.tables.push_back(d);
  }
  sb.payload.assign(slot + kPayloadAt, slot + kPayloadAt + payload);
  return sb;
}

Status ValidateLayout(const Superblock& sb, uint64_t device_size, const std::string& who) {
  auto bad = [&](const std::string& what) {
    return MakeError(Errc::kCorruption, who + ": superblock layout: " + what +
                                            " (device below has " + std::to_string(device_size) +
                                            " bytes)");
  };
  uint64_t pos = kSuperblockBytes;
  auto region = [&](const std::string& name, uint64_t off, uint64_t len) -> Status {
    if (off % kMetaPageSize != 0 || off < pos || len > device_size || off > device_size - len) {
      return bad(name + " at offset " + std::to_string(off) + ", " + std::to_string(len) +
                 " bytes, is misplaced");
    }
    pos = off + len;
    return OkStatus();
  };
  if (sb.journal_bytes % kMetaPageSize != 0) {
    return bad("journal size " + std::to_string(sb.journal_bytes) + " is invalid");
  }
  if (sb.journal_bytes > 0) {  // layers without a journal (crc32c) have none
    VSTACK_RETURN_IF_ERROR(region("journal", sb.journal_offset, sb.journal_bytes));
  }
  for (size_t i = 0; i < sb.tables.size(); ++i) {
    const TableDesc& t = sb.tables[i];
    if (t.entries > (uint64_t{1} << 48)) {
      return bad("table " + std::to_string(i) + " has " + Counted(t.entries, "entry", "entries"));
    }
    VSTACK_RETURN_IF_ERROR(region("table " + std::to_string(i), t.offset, t.bytes()));
  }
  if (sb.data_offset < pos || sb.data_offset > device_size) {
    return bad("data offset " + std::to_string(sb.data_offset) + " is misplaced");
  }
  return OkStatus();
}

Result<Superblock> ReadSuperblock(SyncIo& io, std::string_view magic, const std::string& who) {
  AlignedBuffer buf(kSuperblockBytes);
  if (std::error_code ec = ReadSlots(io, buf)) {
    return MakeError(ec, who + ": cannot read the superblock: " + ec.message());
  }
  const uint8_t* slots = reinterpret_cast<const uint8_t*>(buf.data());
  if (IsZero(slots, kSuperblockBytes)) {
    return MakeError(Errc::kNotFound, who + ": no superblock (the device below is blank)");
  }
  Result<Superblock> a = DecodeSuperblock(slots, magic, 0, who);
  Result<Superblock> b = DecodeSuperblock(slots + kMetaPageSize, magic, kMetaPageSize, who);
  if (a && b) return a->generation >= b->generation ? std::move(a) : std::move(b);
  const bool a_blank = IsZero(slots, kMetaPageSize);
  const bool b_blank = IsZero(slots + kMetaPageSize, kMetaPageSize);
  if (a) {
    if (!b_blank) a->other_slot_problem = b.error().message;
    return a;
  }
  if (b) {
    if (!a_blank) b->other_slot_problem = a.error().message;
    return b;
  }
  // Report the slot that holds something; if both do, both.
  // The first write of a format (slot A, generation 0) torn by a crash. Nothing was ever stored.
  if (TornFirstFormat(slots, magic)) {
    return MakeError(Errc::kNotFound, who +
                                          ": no superblock (slot A is torn, slot B blank: a "
                                          "format that never finished)");
  }
  if (a_blank) return std::move(b).error();
  if (b_blank) return std::move(a).error();
  Error e = a.error();
  e.message += "; " + b.error().message;
  return e;
}

bool SuperblockSlotsBlank(SyncIo& io) {
  AlignedBuffer buf(kSuperblockBytes);
  if (ReadSlots(io, buf)) return false;
  return IsZero(reinterpret_cast<const uint8_t*>(buf.data()), kSuperblockBytes);
}

bool HoldsSuperblockMagic(SyncIo& io, std::string_view magic) {
  AlignedBuffer buf(kSuperblockBytes);
  if (ReadSlots(io, buf)) return false;
  const uint8_t* slots = reinterpret_cast<const uint8_t*>(buf.data());
  return std::memcmp(slots, magic.data(), 8) == 0 ||
         std::memcmp(slots + kMetaPageSize, magic.data(), 8) == 0;
}

std::string ValidSuperblockMagic(SyncIo& io) {
  AlignedBuffer buf(kSuperblockBytes);
  if (ReadSlots(io, buf)) return {};
  const uint8_t* slots = reinterpret_cast<const uint8_t*>(buf.data());
  for (uint64_t at : {uint64_t{0}, kMetaPageSize}) {
    const std::string magic(reinterpret_cast<const char*>(slots + at), 8);
    if (magic.starts_with("VS") && DecodeSuperblock(slots + at, magic, at, "")) return magic;
  }
  return {};
}

Status WriteSuperblock(SyncIo& io, const Superblock& sb, const std::string& who) {
  std::vector<uint8_t> image = EncodeSuperblock(sb);
  AlignedBuffer buf(kMetaPageSize);
  std::memcpy(buf.data(), image.data(), kMetaPageSize);
  const uint64_t offset = (sb.generation % 2) * kMetaPageSize;
  if (std::error_code ec = io.Write(offset, buf.span(), kIoFua)) {
    return MakeError(ec, who + ": cannot write the superblock at offset " +
                             std::to_string(offset) + ": " + ec.message());
  }
  return OkStatus();
}

Status WriteNextGeneration(SyncIo& io, Superblock* sb, const std::string& who) {
  Superblock next = *sb;
  ++next.generation;
  next.other_slot_problem.clear();  // that slot is the one written now
  VSTACK_RETURN_IF_ERROR(WriteSuperblock(io, next, who));
  *sb = std::move(next);
  return OkStatus();
}

Status FormatMetadata(SyncIo& io, const Superblock& sb, const std::string& who) {
  const uint64_t zero_from = sb.journal_offset;
  // Zeroed and allocated (no kIoMayUnmap): the metadata area is reserved where the device below
  // can (fallocate on a file), so that a full filesystem fails data writes, never metadata ones.
  if (std::error_code ec = io.WriteZeroes(zero_from, sb.data_offset - zero_from)) {
    // What the zeroing reserved before it failed (a full filesystem) is given back, discarded
    // (a file's hole): the format was asked for, so the area's old bytes were to go, and a file
    // the open found would keep the reservation (the open undoes only a file it made or grew).
    const bool given_back = !io.Discard(zero_from, sb.data_offset - zero_from);
    return MakeError(ec, who + ": cannot zero the metadata area [" + std::to_string(zero_from) +
                             ", " + std::to_string(sb.data_offset) + "): " + ec.message() +
                             (given_back ? " (what it had reserved is given back)" : ""));
  }
  if (std::error_code ec = io.Flush()) {
    return MakeError(ec, who + ": flush after zeroing the metadata area: " + ec.message());
  }
  // Both slots, so a later torn superblock write always has a valid sibling.
  Superblock first = sb;
  first.generation = 0;
  VSTACK_RETURN_IF_ERROR(WriteSuperblock(io, first, who));
  return WriteSuperblock(io, sb, who);
}

void ByteWriter::U32(uint32_t v) {
  for (int i = 0; i < 4; ++i) bytes_.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

void ByteWriter::U64(uint64_t v) {
  for (int i = 0; i < 8; ++i) bytes_.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

bool ByteReader::Need(size_t n) {
  if (!ok_ || bytes_.size() - pos_ < n || pos_ > bytes_.size()) {
    ok_ = false;
    return false;
  }
  return true;
}

uint8_t ByteReader::U8() { return Need(1) ? bytes_[pos_++] : 0; }

uint32_t ByteReader::U32() {
  if (!Need(4)) return 0;
  uint32_t v = LoadLE32(&bytes_[pos_]);
  pos_ += 4;
  return v;
}

uint64_t ByteReader::U64() {
  if (!Need(8)) return 0;
  uint64_t v = LoadLE64(&bytes_[pos_]);
  pos_ += 8;
  return v;
}

}  // namespace vstack
