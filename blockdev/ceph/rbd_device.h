// rbd: a Ceph RBD image through librbd, with asynchronous I/O (rbd_aio_*).
//
// Spec: rbd:POOL/IMAGE[,data_pool=EC_POOL][,create=on,size=SIZE][,conf=PATH][,id=NAME]
//       [,timeout=SECONDS]
//
// The image's header and metadata live in POOL (replicated: they need omap); with data_pool=
// its data objects go to another pool, typically erasure-coded with allow_ec_overwrites.
// Read, write, flush, discard and write-zeroes map one to one onto rbd_aio_readv, _writev,
// _flush, _discard and _write_zeroes; MapExtents uses rbd_diff_iterate2. The physical block
// is the data pool's EC stripe width (a smaller write costs a read-modify-write in the OSDs).
// Several queues may share the image (librbd is thread-safe). docs/layers/rbd.md.
#ifndef VSTACK_BLOCKDEV_CEPH_RBD_DEVICE_H_
#define VSTACK_BLOCKDEV_CEPH_RBD_DEVICE_H_

#include <rbd/librbd.h>

#include <memory>
#include <string>

#include "blockdev/ceph/ceph_cluster.h"
#include "lib/block_device.h"

namespace vstack::ceph {

class RbdDevice final : public BlockDevice {
 public:
  // `created`: this open made the image (create=on), which a failed open above removes.
  RbdDevice(std::shared_ptr<Cluster> cluster, rados_ioctx_t io, rbd_image_t image, std::string pool,
            std::string image_name, Geometry geometry, PoolFacts data_pool, bool read_only,
            bool created);
  ~RbdDevice() override;

  std::string Describe() const override;
  void Properties(PropertyList& out) const override;
  Status MapExtents(uint64_t offset, uint64_t length, std::vector<Extent>* out) override;
  // A new image reads as zeros: nothing on it can be lost.
  bool fresh() const override { return created_; }
  // Removes the image this open created.
  std::function<void()> open_undo() const override;

  rbd_image_t image() const { return image_; }

 protected:
  Result<std::unique_ptr<IoQueue>> DoOpenQueue() override;
  Status DoClose() override;
  Status DoResize(uint64_t size) override;

 private:
  std::shared_ptr<Cluster> cluster_;
  rados_ioctx_t io_;
  rbd_image_t image_;
  std::string pool_, image_name_;
  std::string name_;  // POOL/IMAGE
  PoolFacts data_pool_;
  bool created_;
};

}  // namespace vstack::ceph

#endif  // VSTACK_BLOCKDEV_CEPH_RBD_DEVICE_H_
