// rados: a block device laid out over fixed-size RADOS objects through librados, with
// asynchronous I/O (rados_aio_*).
//
// Spec: rados:POOL[/PREFIX][,object_size=4M][,create=on,size=SIZE][,conf=PATH][,id=NAME]
//       [,timeout=SECONDS]
//
// Byte b of the device lives in object "PREFIX.%016x" (b / object_size, as RBD names its data
// objects rbd_data.ID.%016x) at offset b % object_size. Objects are created by the first write
// that touches them; a missing object, or the part past an object's end, reads as zeros.
// Requests spanning objects are split into one operation per object (and per buffer), all in
// flight at once. The device size and object size are kept in the object "PREFIX.header"
// (plain data, so EC pools work: they have no omap). A write completes when every replica or
// shard has it (RADOS acknowledges on commit), so flush has nothing to do and FUA is native.
// Discard and write-zeroes remove whole objects and zero partial ones.
// docs/layers/rados.md.
#ifndef VSTACK_BLOCKDEV_CEPH_RADOS_DEVICE_H_
#define VSTACK_BLOCKDEV_CEPH_RADOS_DEVICE_H_

#include <memory>
#include <string>

#include "blockdev/ceph/ceph_cluster.h"
#include "lib/block_device.h"

namespace vstack::ceph {

class RadosDevice final : public BlockDevice {
 public:
  // `created`: this open made the device (create=on), which a failed open above removes.
  RadosDevice(std::shared_ptr<Cluster> cluster, rados_ioctx_t io, std::string pool,
              std::string prefix, Geometry geometry, PoolFacts facts, bool read_only, bool created);
  ~RadosDevice() override;

  std::string Describe() const override;
  void Properties(PropertyList& out) const override;
  Status MapExtents(uint64_t offset, uint64_t length, std::vector<Extent>* out) override;
  // A new device reads as zeros: nothing on it can be lost.
  bool fresh() const override { return created_; }
  // Removes the device this open created: its header and every data object written since.
  std::function<void()> open_undo() const override;

  rados_ioctx_t io() const { return io_; }
  uint64_t object_size() const { return geometry().optimal_transfer; }
  // The name of object `index`: "PREFIX.%016x".
  std::string ObjectName(uint64_t index) const;

 protected:
  Result<std::unique_ptr<IoQueue>> DoOpenQueue() override;
  Status DoClose() override;

 private:
  std::shared_ptr<Cluster> cluster_;
  rados_ioctx_t io_;
  std::string pool_;
  std::string prefix_;
  PoolFacts facts_;
  bool created_;
};

}  // namespace vstack::ceph

#endif  // VSTACK_BLOCKDEV_CEPH_RADOS_DEVICE_H_
