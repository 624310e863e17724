#include "analysis/sim/workload.h"

#include <algorithm>

#include "analysis/sim/content.h"
#include "lib/aligned_buffer.h"
#include "lib/errors.h"

namespace vstack::sim {
namespace {

enum Kind : uint8_t { kRead, kWrite, kFlush, kDiscard, kZeroes, kMap };
const char* const kKindNames[] = {"read", "write", "flush", "discard", "write-zeroes", "map"};

}  // namespace

struct Workload::Request {
  Workload* w = nullptr;
  uint64_t id = 0;
  int thread = 0;
  Kind kind = kRead;
  IoRequest req;
  iovec iov{};
  AlignedBuffer buf;
  uint64_t token = 0;  // the model's
  uint64_t first = 0, units = 0;
};

Workload::Workload(Scheduler& sched, Model& model, BlockDevice& device, WorkloadConfig config,
                   uint64_t ops)
    : sched_(sched), model_(model), device_(device), config_(config), remaining_(ops) {
  model_.set_namer(&Workload::NameOf, this);
}

Workload::~Workload() { model_.set_namer(nullptr, nullptr); }

std::string Workload::Name(uint64_t id) const {
  if (id == 0 || id > records_.size()) return "op " + std::to_string(id);
  const Record& r = records_[id - 1];
  return std::string(kKindNames[r.kind]) + " #" + std::to_string(id) + " (thread " +
         std::to_string(r.thread) + ", " + std::to_string(r.length) + " bytes at " +
         std::to_string(r.offset) + ")";
}

void Workload::Fail(std::string kind, std::string message) {
  failures_.push_back({std::move(kind), std::move(message)});
  frozen_ = true;
}

bool Workload::Allowed(Op op, std::error_code ec) const {
  if (config_.may_inject && config_.may_inject(op, ec)) return true;
  // Out of space: anything that may need room, a flush included (a layer's commit writes its
  // journal through a thin device below).
  if (ec == std::errc::no_space_on_device || ec == Errc::kNoSpace) return op != Op::kRead;
  // An injected EIO surfaces as such; a torn write below may show later as a checksum
  // mismatch (crc32c) or a corrupt fragment (zstd) of what it tore.
  if (config_.errors_expected) return ec == std::errc::io_error || ec == Errc::kIo ||
                                      ec == Errc::kCorruption;
  return false;
}

void Workload::Thread(int index, SimRng rng) {
  if (in_flight_.size() <= static_cast<size_t>(index)) in_flight_.resize(index + 1, 0);
  Result<std::unique_ptr<IoQueue>> opened = device_.OpenQueue();
  if (!opened) {
    Fail("open", "thread " + std::to_string(index) + " cannot open a queue: " +
                     opened.error().ToString());
    return;
  }
  IoQueue& q = **opened;
  while (!frozen_ && remaining_ > 0) {
    if (in_flight_[index] >= config_.queue_depth) {
      q.Poll(1);
      continue;
    }
    if (rng.Chance(config_.think)) {
      sched_.Yield();
      q.Poll(0);
      continue;
    }
    const uint32_t total = config_.reads + config_.writes + config_.flushes + config_.discards +
                           config_.zeroes + config_.maps;
    if (config_.maps > 0 && rng.Below(total) < config_.maps) {
      --remaining_;
      Map(index, rng);
      continue;
    }
    const uint32_t n = rng.Chance(config_.batch) ? static_cast<uint32_t>(rng.Between(2, 4)) : 1;
    std::vector<IoRequest*> batch;
    for (uint32_t i = 0; i < n && remaining_ > 0 && in_flight_[index] < config_.queue_depth;
         ++i) {
      Request* op = Make(index, rng);
      if (op == nullptr) continue;
      --remaining_;
      ++in_flight_[index];
      ++submitted_;
      batch.push_back(&op->req);
    }
    if (!batch.empty()) q.Submit(batch);
  }
  q.WaitIdle();
}

Workload::Request* Workload::Make(int thread, SimRng& rng) {
  const uint32_t weights[] = {config_.reads, config_.writes, config_.flushes,
                              device_.Has(kCapDiscard) ? config_.discards : 0, config_.zeroes};
  uint32_t total = 0;
  for (uint32_t w : weights) total += w;
  uint32_t pick = static_cast<uint32_t>(rng.Below(total));
  Kind kind = kRead;
  for (int k = 0; k < 5; ++k) {
    if (pick < weights[k]) {
      kind = static_cast<Kind>(k);
      break;
    }
    pick -= weights[k];
  }
  auto* op = new Request;
  op->w = this;
  op->thread = thread;
  op->kind = kind;
  op->req.on_complete = &Workload::OnComplete;
  op->req.user_data = op;
  records_.push_back({static_cast<uint8_t>(kind), static_cast<uint8_t>(thread), 0, 0});
  op->id = records_.size();
  if (kind == kFlush) {
    op->req.op = Op::kFlush;
    op->token = model_.BeginFlush();
    return op;
  }
  const uint64_t align = config_.align_units;
  const uint64_t region_units = config_.region_bytes / kUnit;
  const uint64_t max = std::max<uint64_t>(align, std::min<uint64_t>(config_.max_units, region_units));
  // Mostly short requests, sometimes long ones.
  uint64_t units = rng.Chance(0.2) ? rng.Between(1, max) : rng.Between(1, std::min<uint64_t>(max, 16));
  units = std::max(align, units / align * align);
  const uint64_t first_slot = rng.Below((region_units - units) / align + 1);
  op->first = config_.region_offset / kUnit + first_slot * align;
  op->units = units;
  op->req.offset = op->first * kUnit;
  op->req.length = units * kUnit;
  records_.back().offset = op->req.offset;
  records_.back().length = op->req.length;
  std::vector<uint64_t> values(units);
  switch (kind) {
    case kRead:
    case kWrite: {
      op->buf = AlignedBuffer(op->req.length, std::max<size_t>(4096, device_.geometry().mem_alignment));
      op->iov = {op->buf.data(), op->req.length};
      op->req.iov = &op->iov;
      op->req.iovcnt = 1;
      if (kind == kRead) {
        op->req.op = Op::kRead;
        op->token = model_.BeginRead();
        return op;
      }
      op->req.op = Op::kWrite;
      auto* p = reinterpret_cast<uint8_t*>(op->buf.data());
      FillWrite(rng, op->req.offset, p, op->req.length);
      for (uint64_t i = 0; i < units; ++i) values[i] = UnitHash(p + i * kUnit);
      if (rng.Chance(config_.fua)) op->req.flags = kIoFua;
      break;
    }
    case kDiscard:
      op->req.op = Op::kDiscard;
      std::fill(values.begin(), values.end(),
                device_.Has(kCapDiscardZeroes) ? ZeroUnitHash() : Model::kAny);
      break;
    case kZeroes:
      op->req.op = Op::kWriteZeroes;
      if (rng.Chance(0.5)) op->req.flags = kIoMayUnmap;
      std::fill(values.begin(), values.end(), ZeroUnitHash());
      break;
    default:
      break;
  }
  op->token = model_.BeginWrite(op->id, op->first, units, values.data(),
                                (op->req.flags & kIoFua) != 0);
  return op;
}

void Workload::Map(int thread, SimRng& rng) {
  const uint64_t region_units = config_.region_bytes / kUnit;
  const uint64_t units = rng.Between(1, std::min<uint64_t>(region_units, 4096));
  const uint64_t first = config_.region_offset / kUnit + rng.Below(region_units - units + 1);
  records_.push_back({kMap, static_cast<uint8_t>(thread), first * kUnit, units * kUnit});
  const uint64_t started = model_.BeginRead();
  std::vector<Extent> extents;
  Status s = device_.MapExtents(first * kUnit, units * kUnit, &extents);
  struct EndRead {
    Model& m;
    uint64_t t;
    ~EndRead() { m.EndRead(t); }
  } end{model_, started};
  if (frozen_) return;
  ++completed_;
  if (!s) {
    if (!Allowed(Op::kRead, s.error().code)) {
      Fail("error", Name(records_.size()) + " failed: " + s.error().ToString());
    }
    return;
  }
  for (const Extent& e : extents) {
    if (!(e.flags & kExtentZero)) continue;
    for (uint64_t u = e.offset / kUnit; u < (e.offset + e.length + kUnit - 1) / kUnit; ++u) {
      if (!model_.MayBeZero(u, started)) {
        Fail("map", Name(records_.size()) + " says byte offset " + std::to_string(u * kUnit) +
                        " reads as zeros, which no write in flight or completed allows");
        return;
      }
    }
  }
  sched_.Trace(20, extents.size());
}

void Workload::OnComplete(IoRequest& req) {
  Request* op = static_cast<Request*>(req.user_data);
  op->w->Finish(op);
}

void Workload::Finish(Request* op) {
  --in_flight_[op->thread];
  const std::error_code ec = op->req.status;
  sched_.Trace(10 + op->kind, op->id ^ (static_cast<uint64_t>(ec.value()) << 48));
  if (frozen_) sched_.NoteAlive();  // winding down: its completions show the stack moves
  if (frozen_ && op->kind == kRead) model_.EndRead(op->token);
  if (!frozen_) {
    ++completed_;
    sched_.NoteProgress();
    if (ec && !Allowed(op->req.op, ec)) {
      Fail("error", Name(op->id) + " failed: " + ec.message() + " (" + ec.category().name() +
                        ":" + std::to_string(ec.value()) + ")");
    }
    switch (op->kind) {
      case kRead:
        if (!ec) {
          const auto* p = reinterpret_cast<const uint8_t*>(op->buf.data());
          std::vector<uint64_t> got(op->units);
          for (uint64_t i = 0; i < op->units; ++i) {
            got[i] = UnitHash(p + i * kUnit);
            sched_.Trace(30, got[i]);
          }
          std::string wrong = model_.CheckRead(op->first, op->units, got.data(), op->token);
          if (!wrong.empty()) Fail("data", Name(op->id) + " read wrong data: " + wrong);
        }
        model_.EndRead(op->token);
        break;
      case kFlush:
        model_.EndFlush(op->token, !ec);
        break;
      default:
        model_.EndWrite(op->token, !ec);
    }
  }
  delete op;
}

}  // namespace vstack::sim
