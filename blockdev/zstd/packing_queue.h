// PackingQueue: the zstd layer's part of one queue: its compressor and decompressor (zstd
// contexts are per thread), and the packing of compressed fragments into bins.
//
// Each fragment goes into the bin with free space that fits it most tightly (bin_packer.h): one
// of the queue's active bins (at most the device's `open_bins`, each with an image in memory),
// or a hole (a bin retired from the active ones with room left, known by number and free bytes
// only), which is activated again: the lower block its free space starts in is read back first
// (a tail read). A fragment is copied into the image of its bin, and the lower blocks that hold
// it are written; while one write (or the tail read) of a bin is in flight, newly placed
// fragments wait and go down together with the next write, so two writes never overlap a
// shared block. Each fragment is reported to the engine (GrainIo::Packed) once its write is
// done; from then on the fragment references its bin, and the engine maps it once the rest of
// its write is done. A bin is held (GrainIo::Hold) from its activation until it is sealed, so
// it is not reused while fragments may still go into it, even if all of its fragments were
// overwritten.
#ifndef VSTACK_BLOCKDEV_ZSTD_PACKING_QUEUE_H_
#define VSTACK_BLOCKDEV_ZSTD_PACKING_QUEUE_H_

#include <vector>

#include "blockdev/zstd/bin_packer.h"
#include "blockdev/zstd/grain_codec.h"
#include "blockdev/zstd/zstd_device.h"
#include "lib/aligned_buffer.h"
#include "lib/layer.h"

namespace vstack {

class PackingQueue final : public GrainDevice::QueueState {
 public:
  PackingQueue(ZstdDevice& dev, GrainIo& io);
  // Seals every bin (no I/O is in flight when a queue closes).
  ~PackingQueue() override;

  GrainIo& io() { return io_; }
  GrainCompressor& compressor() { return compressor_; }
  GrainDecompressor& decompressor() { return decompressor_; }

  // Places `length` compressed bytes taking `slot` bytes of a bin, and writes them; reports
  // `grain` to io().Packed when they are below (or could not be placed: Errc::kNoSpace).
  void Pack(void* grain, const std::byte* bytes, uint32_t length, uint32_t slot);
  // Seals every hole: their bins hold space the layer may need back (out of space).
  void GiveUpHoles();

 private:
  struct Bin;
  using Packer = BinPacker<Bin*>;
  using Hole = Packer::Hole;
  // Holes kept per queue: an index entry each (no image), about 48 bytes.
  static constexpr size_t kMaxHoles = 65536;

  struct Placed {
    void* grain;
    uint64_t entry;
  };
  // An active bin, or one leaving (closed: to be sealed, or retired to the holes) with its
  // write in flight.
  struct Bin {
    PackingQueue* q = nullptr;
    uint32_t bin = 0;
    uint32_t fill = 0;  // bytes placed (the packer decides where)
    bool closed = false;
    bool to_hole = false;   // closed: retire it to the holes rather than seal it
    bool writing = false;   // a write or the tail read is in flight
    uint32_t tail = 0;      // the tail read: bytes [tail, tail_end) of the bin, the fragments
    uint32_t tail_end = 0;  // in the block its free space started in
    AlignedBuffer image, wbuf;       // the bin, and the copy being written (or the tail read)
    std::vector<Placed> waiting;     // placed, not yet written
    std::vector<Placed> in_write;    // covered by the write in flight
  };

  uint32_t AlignDown(uint32_t v) const { return v / block_ * block_; }
  uint32_t AlignUp(uint32_t v) const { return (v + block_ - 1) / block_ * block_; }
  // Makes `bin` (`fill` bytes used) active, retiring the fullest active bin if needed.
  Bin* Activate(uint32_t bin, uint32_t fill);
  void WriteBin(Bin* b);
  // After a bin's write or tail read: writes what waits, or lets a closed bin go.
  void Settle(Bin* b);
  // Takes `b` out of packing for good (it left `free` bytes unused), or into the holes.
  void Seal(Bin* b, uint32_t free);
  void Retire(Bin* b);
  void SealHole(const Hole& h);
  static void OnWritten(void* ctx, std::error_code status);
  static void OnTailRead(void* ctx, std::error_code status);

  GrainIo& io_;
  const uint32_t grain_;
  const uint32_t block_;  // logical block below
  GrainCompressor compressor_;
  GrainDecompressor decompressor_;
  RequestPool<Bin> bins_;
  Packer packer_;
};

}  // namespace vstack

#endif  // VSTACK_BLOCKDEV_ZSTD_PACKING_QUEUE_H_
