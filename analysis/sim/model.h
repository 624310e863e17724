// Model: what every 512-byte unit of the device under test may hold, by the contract every
// layer promises (docs/design.md, "What a crash may leave"):
//
//  - Reads. A read returns, per unit, the content of a write that may be the last one to have
//    reached the unit at some instant while the read was in flight: any write submitted before
//    the read completed, unless a successful write submitted after it completed had itself
//    completed before the read was submitted (it was overwritten). Writes in flight together
//    leave either content; a failed write may have landed or not, and never overwrites anything
//    for sure.
//  - Crashes. After a power cut a unit holds its durable content (the last write that a
//    completed flush covers: completed before the flush was submitted; or a FUA write that
//    completed) or the content of any write that is not known to be overwritten by a durable
//    one: completed after the last flush, failed, or still in flight. Never other bytes.
//
// Contents are unit hashes (content.h); kAny stands for a unit whose content is unspecified
// (a discard on a device without discard_zeroes) and matches anything. Times are the model's
// own sequence of events (Begin* and End* calls), taken on the thread that submits and reaps,
// so "completed" means the caller learnt it; that only makes the model more permissive where
// the layer may legitimately be, never less.
#ifndef VSTACK_ANALYSIS_SIM_MODEL_H_
#define VSTACK_ANALYSIS_SIM_MODEL_H_

#include <cstdint>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

namespace vstack::sim {

class Model {
 public:
  static constexpr uint64_t kAny = 0xA11A11A11A11A11Aull;

  // `initial`: each unit's content to start with.
  explicit Model(std::vector<uint64_t> initial);

  uint64_t units() const { return settled_.size(); }

  // A write-type request on units [first, first + count) with these contents, started now.
  // `op` names it in messages. Returns its token for EndWrite.
  uint64_t BeginWrite(uint64_t op, uint64_t first, uint64_t count, const uint64_t* values,
                      bool fua);
  void EndWrite(uint64_t token, bool ok);
  // A read started now: the time to pass to CheckRead (and MayBeZero) while it is in flight,
  // and to EndRead once it is done with.
  uint64_t BeginRead() {
    ++now_;
    reads_.insert(now_);
    return now_;
  }
  void EndRead(uint64_t started) { reads_.erase(reads_.find(started)); }
  // The contents a read started at `started` got for units [first, first + count): "" if each
  // is allowed, else what is wrong with the first that is not.
  std::string CheckRead(uint64_t first, uint64_t count, const uint64_t* got, uint64_t started);
  // True if unit `u` may read as zeros for a read started at `started` (MapExtents said so).
  bool MayBeZero(uint64_t u, uint64_t started);

  uint64_t BeginFlush() { return ++now_; }
  void EndFlush(uint64_t token, bool ok);

  // After a power cut now: "" if unit `u` may hold `got`, else why not.
  std::string CheckAfterCrash(uint64_t u, uint64_t got) const;
  // Unit `u` holds exactly `value` from now on (read back after a crash or a clean close).
  void Settle(uint64_t u, uint64_t value);
  // After a power cut now, unit `u` could not be read back (a read failed on purpose): it
  // holds one of the versions the cut may leave, unknown which, and each is durable from now
  // on (what the reopened stack reads is on its disk).
  void SettleUnread(uint64_t u);
  // Names the writes the model knows by their op number: for messages.
  void set_namer(std::string (*namer)(void*, uint64_t), void* arg) {
    namer_ = namer;
    namer_arg_ = arg;
  }

 private:
  struct Version {
    uint64_t value = 0;
    uint64_t op = 0;  // 0: the content the unit started with (or was settled to)
    uint64_t submit = 0;
    uint64_t complete = UINT64_MAX;  // UINT64_MAX: in flight
    bool ok = false;
    bool fua = false;
  };
  struct Write {
    uint64_t first = 0, count = 0, op = 0;
    bool fua = false;
  };

  bool Durable(const Version& v) const {
    return v.ok && (v.fua || v.complete < barrier_);
  }
  // The versions of `u`: its history if it has one, else its settled content.
  const Version* Versions(uint64_t u, size_t* n, Version* scratch) const;
  Version SettledVersion(uint64_t u) const;
  // Calls fn(v) for each version v of `u` that no version w with overwrites(w) replaced
  // (submitted after v completed).
  template <typename Overwrites, typename Fn>
  void ForLive(uint64_t u, Overwrites overwrites, Fn fn) const;
  // The versions of `u` a read started at `started` may return.
  template <typename Fn>
  void ForReadable(uint64_t u, uint64_t started, Fn fn) const {
    ForLive(u, [&](const Version& w) { return w.ok && w.complete < started; }, fn);
  }
  // The versions of `u` a power cut may leave.
  template <typename Fn>
  void ForSurvivors(uint64_t u, Fn fn) const {
    ForLive(u, [&](const Version& w) { return Durable(w); }, fn);
  }
  std::string Describe(uint64_t u, const std::vector<Version>& allowed, uint64_t got) const;
  void Prune(uint64_t u);

  // A unit with one durable version has only this (most units, most of the time)...
  struct Settled {
    uint64_t value = 0;
    uint64_t op = 0;
  };
  std::vector<Settled> settled_;
  // ... the others their history, until a flush makes one version durable and the rest dead.
  std::unordered_map<uint64_t, std::vector<Version>> history_;
  std::unordered_map<uint64_t, Write> writes_;  // in flight, by token
  std::multiset<uint64_t> reads_;               // start times of the reads in flight
  uint64_t now_ = 0;
  uint64_t barrier_ = 0;  // writes completed before this are durable
  std::string (*namer_)(void*, uint64_t) = nullptr;
  void* namer_arg_ = nullptr;
};

}  // namespace vstack::sim

#endif  // VSTACK_ANALYSIS_SIM_MODEL_H_
