#include "blockdev/zstd/grain_codec.h"

#include <zstd.h>

#include <cstdlib>

#include "lib/iovec.h"

namespace vstack {

int MinZstdLevel() { return ZSTD_minCLevel(); }
int MaxZstdLevel() { return ZSTD_maxCLevel(); }

GrainCompressor::GrainCompressor(int level) : ctx_(ZSTD_createCCtx()) {
  if (ctx_ == nullptr) std::abort();  // out of memory
  ZSTD_CCtx_setParameter(ctx_, ZSTD_c_compressionLevel, level);
  ZSTD_CCtx_setParameter(ctx_, ZSTD_c_checksumFlag, 0);
  ZSTD_CCtx_setParameter(ctx_, ZSTD_c_contentSizeFlag, 0);
  ZSTD_CCtx_setParameter(ctx_, ZSTD_c_dictIDFlag, 0);
}

GrainCompressor::~GrainCompressor() { ZSTD_freeCCtx(ctx_); }

uint32_t GrainCompressor::Compress(const void* src, size_t len, void* dst) {
  // A destination one byte short of the input makes zstd give up as soon as it cannot win.
  const size_t n = ZSTD_compress2(ctx_, dst, len - 1, src, len);
  return ZSTD_isError(n) ? 0 : static_cast<uint32_t>(n);
}

EncodedGrain EncodeGrain(GrainCompressor& c, const SizeRule& rule, const void* src,
                         uint32_t grain, void* dst) {
  if (IsZero(src, grain)) return {.zero = true};
  const uint32_t compressed = c.Compress(src, grain, dst);
  return {.compressed = compressed, .form = ApplySizeRule(rule, grain, compressed)};
}

GrainDecompressor::GrainDecompressor() : ctx_(ZSTD_createDCtx()) {
  if (ctx_ == nullptr) std::abort();
}

GrainDecompressor::~GrainDecompressor() { ZSTD_freeDCtx(ctx_); }

bool GrainDecompressor::Decompress(const void* src, size_t len, void* dst, size_t grain) {
  const size_t n = ZSTD_decompressDCtx(ctx_, dst, grain, src, len);
  return !ZSTD_isError(n) && n == grain;
}

}  // namespace vstack
