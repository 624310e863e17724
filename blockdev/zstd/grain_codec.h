// Per-grain zstd compression (libzstd, private to this folder). Every grain is an independent
// zstd frame without checksum, content size or dictionary id (the map knows the sizes), so a
// grain decompresses on its own. The layer and `vstack space --mode=scan` compress through this
// class, so both see the same sizes. One compressor or decompressor per thread (each owns a
// reused zstd context).
#ifndef VSTACK_BLOCKDEV_ZSTD_GRAIN_CODEC_H_
#define VSTACK_BLOCKDEV_ZSTD_GRAIN_CODEC_H_

#include <cstddef>
#include <cstdint>

#include "lib/errors.h"

struct ZSTD_CCtx_s;
struct ZSTD_DCtx_s;

namespace vstack {

// The range of zstd levels (negative levels are zstd's fast modes).
int MinZstdLevel();
int MaxZstdLevel();

class GrainCompressor {
 public:
  explicit GrainCompressor(int level);
  ~GrainCompressor();
  GrainCompressor(const GrainCompressor&) = delete;
  GrainCompressor& operator=(const GrainCompressor&) = delete;

  // Compresses `len` bytes into `dst`. Returns the compressed size, or 0 if it is not smaller
  // than `len` (the caller stores the grain raw). REQUIRES: dst holds at least `len` bytes.
  uint32_t Compress(const void* src, size_t len, void* dst);

 private:
  ZSTD_CCtx_s* ctx_;
};

class GrainDecompressor {
 public:
  GrainDecompressor();
  ~GrainDecompressor();
  GrainDecompressor(const GrainDecompressor&) = delete;
  GrainDecompressor& operator=(const GrainDecompressor&) = delete;

  // Decompresses `len` bytes into exactly `grain` bytes at `dst`. False if the frame is corrupt
  // or does not yield exactly `grain` bytes.
  bool Decompress(const void* src, size_t len, void* dst, size_t grain);

 private:
  ZSTD_DCtx_s* ctx_;
};

}  // namespace vstack

#endif  // VSTACK_BLOCKDEV_ZSTD_GRAIN_CODEC_H_
