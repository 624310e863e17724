#include "blockdev/file/file_device.h"

namespace vstack {
namespace {

class FileQueue final : public IoQueue {
 public:
  explicit FileQueue(FileDevice& device) : IoQueue(device), dev_(device) {}

 protected:
  void DoSubmit(std::span<IoRequest* const> batch) override {
    for (IoRequest* r : batch) {
      std::error_code ec = IsWriteType(r->op) ? dev_.BeforeWrite() : NoError();
      Complete(*r, ec ? ec : dev_.RunSync(*r));
    }
  }

 private:
  FileDevice& dev_;
};

ComponentInfo FileComponent() {
  return BackendComponent(
      "file", "regular file or block device via preadv/pwritev2 (synchronous)", "PATH",
      FileOptionInfos(), [](const OptionValues& o, const OpenOptions& open) -> Result<DevicePtr> {
        VSTACK_ASSIGN_OR_RETURN(FileOpenParams params, ParseFileParams(o, open));
        VSTACK_ASSIGN_OR_RETURN(OpenedFile file, OpenBackingFile("file", params));
        return MakeDevice<FileDevice>(file, params);
      });
}

}  // namespace

Result<std::unique_ptr<IoQueue>> FileDevice::DoOpenQueue() {
  return std::unique_ptr<IoQueue>(new FileQueue(*this));
}

VSTACK_REGISTER_COMPONENT(file, FileComponent());

}  // namespace vstack
