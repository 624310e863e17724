#include "lib/version.h"

// Set by lib/CMakeLists.txt from project(VERSION); the fallback is for builds that compile
// lib/ on their own (tests/fuzz).
#ifndef VSTACK_VERSION
#define VSTACK_VERSION "0.0.0-unversioned"
#endif

namespace vstack {

const char* Version() { return VSTACK_VERSION; }

}  // namespace vstack
