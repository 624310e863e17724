#include "lib/entropy.h"

#include <ctime>
#include <random>

namespace vstack {
namespace {

thread_local EntropySource* t_source = nullptr;

}  // namespace

EntropySource* SetEntropySource(EntropySource* source) {
  EntropySource* previous = t_source;
  t_source = source;
  return previous;
}

uint64_t RandomBits64() {
  if (t_source) return t_source->Random64();
  std::random_device rd;
  return uint64_t{rd()} << 32 ^ rd();
}

uint64_t NowUnixSeconds() {
  if (t_source) return t_source->UnixSeconds();
  return static_cast<uint64_t>(std::time(nullptr));
}

}  // namespace vstack
