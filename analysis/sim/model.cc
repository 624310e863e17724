#include "analysis/sim/model.h"

#include <algorithm>
#include <cstdio>

#include "analysis/sim/content.h"

namespace vstack::sim {

Model::Model(std::vector<uint64_t> initial) : settled_(initial.size()) {
  for (size_t u = 0; u < initial.size(); ++u) settled_[u].value = initial[u];
}

const Model::Version* Model::Versions(uint64_t u, size_t* n, Version* scratch) const {
  auto it = history_.find(u);
  if (it != history_.end()) {
    *n = it->second.size();
    return it->second.data();
  }
  *scratch = SettledVersion(u);
  *n = 1;
  return scratch;
}

Model::Version Model::SettledVersion(uint64_t u) const {
  Version v;
  v.value = settled_[u].value;
  v.op = settled_[u].op;
  v.submit = v.complete = 0;
  v.ok = v.fua = true;  // durable
  return v;
}

uint64_t Model::BeginWrite(uint64_t op, uint64_t first, uint64_t count, const uint64_t* values,
                           bool fua) {
  const uint64_t token = ++now_;
  for (uint64_t i = 0; i < count; ++i) {
    const uint64_t u = first + i;
    auto [it, added] = history_.try_emplace(u);
    if (added) it->second.push_back(SettledVersion(u));
    Version v;
    v.value = values[i];
    v.op = op;
    v.submit = token;
    v.fua = fua;
    it->second.push_back(v);
  }
  writes_[token] = Write{first, count, op, fua};
  return token;
}

void Model::EndWrite(uint64_t token, bool ok) {
  auto it = writes_.find(token);
  const Write w = it->second;
  writes_.erase(it);
  const uint64_t t = ++now_;
  for (uint64_t u = w.first; u < w.first + w.count; ++u) {
    for (Version& v : history_[u]) {
      if (v.submit == token) {
        v.complete = t;
        v.ok = ok;
      }
    }
    if (ok && w.fua) Prune(u);
  }
}

void Model::EndFlush(uint64_t token, bool ok) {
  ++now_;
  if (!ok || token <= barrier_) return;
  barrier_ = token;
  std::vector<uint64_t> units;
  for (const auto& [u, versions] : history_) units.push_back(u);
  for (uint64_t u : units) Prune(u);
}

void Model::Prune(uint64_t u) {
  auto it = history_.find(u);
  if (it == history_.end()) return;
  std::vector<Version>& vs = it->second;
  // A version overwritten by a durable one (submitted after it completed) can show up neither
  // in a read started after that one completed nor after a power cut: it goes once no read in
  // flight started earlier.
  const uint64_t oldest_read = reads_.empty() ? UINT64_MAX : *reads_.begin();
  uint64_t newest_durable_submit = 0;
  bool any = false;
  for (const Version& w : vs) {
    if (Durable(w) && w.complete < oldest_read) {
      newest_durable_submit = std::max(newest_durable_submit, w.submit);
      any = true;
    }
  }
  if (!any) return;
  std::erase_if(vs, [&](const Version& v) {
    return v.complete != UINT64_MAX && newest_durable_submit > v.complete;
  });
  // One durable version left: it is all the unit may hold, now and after a power cut.
  if (vs.size() == 1 && Durable(vs[0])) {
    settled_[u] = Settled{vs[0].value, vs[0].op};
    history_.erase(it);
  }
}

template <typename Overwrites, typename Fn>
void Model::ForLive(uint64_t u, Overwrites overwrites, Fn fn) const {
  Version scratch;
  size_t n;
  const Version* vs = Versions(u, &n, &scratch);
  for (size_t i = 0; i < n; ++i) {
    const Version& v = vs[i];
    const bool replaced = v.complete != UINT64_MAX &&
                          std::any_of(vs, vs + n, [&](const Version& w) {
                            return w.submit > v.complete && overwrites(w);
                          });
    if (!replaced) fn(v);
  }
}

std::string Model::CheckRead(uint64_t first, uint64_t count, const uint64_t* got,
                             uint64_t started) {
  ++now_;
  for (uint64_t i = 0; i < count; ++i) {
    bool match = false;
    std::vector<Version> allowed;  // copies: a settled unit's version lives in ForLive's scratch
    ForReadable(first + i, started, [&](const Version& v) {
      allowed.push_back(v);
      match = match || v.value == got[i] || v.value == kAny;
    });
    if (!match) return Describe(first + i, allowed, got[i]);
  }
  return "";
}

bool Model::MayBeZero(uint64_t u, uint64_t started) {
  bool zero = false;
  ForReadable(u, started, [&](const Version& v) {
    zero = zero || v.value == ZeroUnitHash() || v.value == kAny;
  });
  return zero;
}

std::string Model::CheckAfterCrash(uint64_t u, uint64_t got) const {
  bool match = false;
  std::vector<Version> allowed;  // copies: a settled unit's version lives in ForLive's scratch
  ForSurvivors(u, [&](const Version& v) {
    allowed.push_back(v);
    match = match || v.value == got || v.value == kAny;
  });
  return match ? "" : Describe(u, allowed, got);
}

void Model::Settle(uint64_t u, uint64_t value) {
  history_.erase(u);
  settled_[u] = Settled{value, 0};
}

void Model::SettleUnread(uint64_t u) {
  std::vector<Version> survivors;
  ForSurvivors(u, [&](const Version& v) { survivors.push_back(v); });
  if (survivors.size() == 1) return Settle(u, survivors[0].value);
  for (Version& v : survivors) {
    v.submit = v.complete = 0;  // none overwrites another; any later durable write does
    v.ok = v.fua = true;
  }
  history_[u] = std::move(survivors);
}

std::string Model::Describe(uint64_t u, const std::vector<Version>& allowed,
                            uint64_t got) const {
  auto name = [&](const Version& v) -> std::string {
    std::string s = v.op == 0 ? "the content it held before" : namer_ ? namer_(namer_arg_, v.op)
                                                                        : "op " + std::to_string(v.op);
    if (v.value == ZeroUnitHash()) s += " (zeros)";
    if (v.complete == UINT64_MAX) s += " (in flight)";
    if (v.complete != UINT64_MAX && !v.ok) s += " (failed)";
    return s;
  };
  std::string out = "byte offset " + std::to_string(u * kUnit) + " holds " +
                    (got == ZeroUnitHash() ? std::string("zeros") : "data") +
                    " that no allowed write put there; allowed: ";
  for (size_t i = 0; i < allowed.size(); ++i) out += (i ? ", " : "") + name(allowed[i]);
  bool found = false;
  Version scratch;
  size_t n;
  const Version* vs = Versions(u, &n, &scratch);
  for (const Version& v : std::vector<Version>(vs, vs + n)) {
    if (v.value != got) continue;
    if (!found) out += "; it is the content of ";
    out += (found ? ", " : "") + name(v);
    found = true;
  }
  return out;
}

}  // namespace vstack::sim
