// Per-grain zstd compression (libzstd, private to this folder). Every grain is an independent
// zstd frame without checksum, content size or dictionary id (the map knows the sizes), so a
// grain decompresses on its own. One compressor or decompressor per thread (each owns a reused
// zstd context). The zstd layer stores every grain it writes through EncodeGrain, and the space
// analysis (analysis/space, `vstack space --mode=scan`) calls EncodeGrain too, so both see the
// same zero grains, the same sizes and the same stored forms.
#ifndef VSTACK_BLOCKDEV_ZSTD_GRAIN_CODEC_H_
#define VSTACK_BLOCKDEV_ZSTD_GRAIN_CODEC_H_

#include <cstddef>
#include <cstdint>

#include "blockdev/zstd/size_rule.h"
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

// How the zstd layer stores one grain.
struct EncodedGrain {
  bool zero = false;        // all zeros: stored as nothing (no compression attempted)
  uint32_t compressed = 0;  // compressed size in the destination; 0: did not shrink (stored raw)
  StoredForm form = {};     // what the size rule makes of it (meaningless when zero)
};

// The zstd layer's write pipeline for one grain of `grain` bytes at `src`: the zero test, then
// compression into `dst` with `c`, then the stored-size rule. REQUIRES: dst holds `grain` bytes.
EncodedGrain EncodeGrain(GrainCompressor& c, const SizeRule& rule, const void* src,
                         uint32_t grain, void* dst);

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
