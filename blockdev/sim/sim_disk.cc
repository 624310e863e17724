#include "blockdev/sim/sim_disk.h"

#include <algorithm>
#include <cstring>

#include "lib/iovec.h"

namespace vstack::sim {

void SimDisk::Resize(uint64_t size) {
  if (size < size_) {
    auto cut = [size](Pages& pages) {
      for (auto it = pages.begin(); it != pages.end();) {
        if (it->first * kPage >= size) {
          it = pages.erase(it);
          continue;
        }
        if ((it->first + 1) * kPage > size) {
          std::memset(it->second->data() + size % kPage, 0, kPage - size % kPage);
        }
        ++it;
      }
    };
    cut(current_);
    cut(durable_);
    for (Change& c : log_) {
      const uint64_t keep = c.offset >= size ? 0 : std::min(c.length, size - c.offset);
      c.length = keep;
      if (!c.data.empty()) c.data.resize(keep);
    }
    durable_length_ = std::min(durable_length_, size);
  }
  size_ = size;
}

void SimDisk::Read(uint64_t offset, uint64_t length, const iovec* iov, uint32_t iovcnt) const {
  for (uint64_t done = 0; done < length;) {
    const uint64_t page = (offset + done) / kPage;
    const uint64_t in = (offset + done) % kPage;
    const uint64_t n = std::min(kPage - in, length - done);
    auto it = current_.find(page);
    if (it == current_.end()) {
      ZeroIov(iov, iovcnt, done, n);
    } else {
      CopyToIov(iov, iovcnt, done, it->second->data() + in, n);
    }
    done += n;
  }
}

uint64_t SimDisk::NewPages(uint64_t offset, uint64_t length) const {
  if (length == 0) return 0;
  uint64_t n = 0;
  for (uint64_t p = offset / kPage; p <= (offset + length - 1) / kPage; ++p) {
    if (!current_.contains(p)) ++n;
  }
  return n;
}

std::error_code SimDisk::Record(Change c) {
  if (!(c.data.empty() && c.deallocate) && budget_ != UINT64_MAX &&
      current_.size() + NewPages(c.offset, c.length) > budget_) {
    return std::make_error_code(std::errc::no_space_on_device);
  }
  c.seq = seq_++;
  Apply(current_, c, c.length);
  log_.push_back(std::move(c));
  return {};
}

std::error_code SimDisk::Write(uint64_t offset, uint64_t length, const iovec* iov,
                               uint32_t iovcnt, bool fua, uint64_t land) {
  Change c;
  c.offset = offset;
  c.length = std::min(land, length);
  c.data.resize(c.length);
  CopyFromIov(iov, iovcnt, 0, c.data.data(), c.length);
  c.fua = fua;
  if (c.length == 0) return {};
  return Record(std::move(c));
}

std::error_code SimDisk::Zero(uint64_t offset, uint64_t length, bool deallocate, bool fua) {
  Change c;
  c.offset = offset;
  c.length = length;
  c.deallocate = deallocate;
  c.fua = fua;
  return Record(std::move(c));
}

void SimDisk::Apply(Pages& pages, const Change& c, uint64_t length) {
  for (uint64_t done = 0; done < length;) {
    const uint64_t page = (c.offset + done) / kPage;
    const uint64_t in = (c.offset + done) % kPage;
    const uint64_t n = std::min(kPage - in, length - done);
    auto it = pages.find(page);
    if (c.data.empty() && c.deallocate) {
      if (it != pages.end()) {
        if (n == kPage) {
          pages.erase(it);
        } else {
          std::memset(it->second->data() + in, 0, n);
        }
      }
    } else {
      if (it == pages.end()) it = pages.emplace(page, std::make_unique<Page>()).first;
      if (c.data.empty()) {
        std::memset(it->second->data() + in, 0, n);
      } else {
        std::memcpy(it->second->data() + in, c.data.data() + done, n);
      }
    }
    done += n;
  }
}

void SimDisk::Flush(uint64_t barrier) {
  size_t kept = 0;
  for (size_t i = 0; i < log_.size(); ++i) {
    Change& c = log_[i];
    if (c.seq < barrier) {
      Apply(durable_, c, c.length);
      durable_length_ = std::max(durable_length_, c.offset + c.length);
    } else {
      if (kept != i) log_[kept] = std::move(c);
      ++kept;
    }
  }
  log_.resize(kept);
}

SimDisk::Pages SimDisk::Copy(const Pages& pages) {
  Pages out;
  out.reserve(pages.size());
  for (const auto& [index, page] : pages) out.emplace(index, std::make_unique<Page>(*page));
  return out;
}

std::shared_ptr<SimDisk> SimDisk::AfterPowerCut(SimRng& rng, double land, double torn) const {
  auto disk = std::make_shared<SimDisk>(size_);
  disk->durable_ = Copy(durable_);
  uint64_t length = durable_length_;
  for (const Change& c : log_) {
    uint64_t bytes = c.length;
    if (!c.fua) {
      if (!rng.Chance(land)) continue;
      const uint64_t sectors = c.length / 512;
      if (sectors > 1 && rng.Chance(torn)) bytes = rng.Below(sectors) * 512;
    }
    Apply(disk->durable_, c, bytes);
    if (bytes > 0) length = std::max(length, c.offset + bytes);
  }
  disk->current_ = Copy(disk->durable_);
  disk->size_ = disk->durable_length_ = std::min(length, size_);
  disk->budget_ = budget_;
  disk->fresh_ = false;
  return disk;
}

}  // namespace vstack::sim
