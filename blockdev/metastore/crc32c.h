// CRC-32C (Castagnoli), the checksum of iSCSI, ext4 metadata and vSAN: the standard value
// (initial value and final XOR 0xFFFFFFFF; "123456789" -> 0xE3069283). Computed with ISA-L's
// crc32_iscsi, which folds with PCLMULQDQ at memory speed. ISA-L stays private to this folder:
// everything else in vstack (the metadata store's page and journal checksums, the crc32c
// layer) calls these functions.
#ifndef VSTACK_BLOCKDEV_METASTORE_CRC32C_H_
#define VSTACK_BLOCKDEV_METASTORE_CRC32C_H_

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>

namespace vstack {

// CRC-32C of `len` bytes.
uint32_t Crc32c(const void* data, size_t len);

// Continues `crc` (a finished Crc32c value) over more bytes:
// Crc32cExtend(Crc32c(a), b) == Crc32c(a followed by b). Crc32cExtend(0, x) == Crc32c(x).
uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t len);

// CRC-32C of bytes [offset, offset+length) of an iovec array (lib/iovec.h conventions).
uint32_t Crc32cIov(const iovec* iov, uint32_t iovcnt, uint64_t offset, uint64_t length);

}  // namespace vstack

#endif  // VSTACK_BLOCKDEV_METASTORE_CRC32C_H_
