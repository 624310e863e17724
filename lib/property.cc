#include "lib/property.h"

#include <cstdio>

namespace vstack {

std::string PropertyValueToString(const PropertyValue& v) {
  struct Visitor {
    std::string operator()(const std::string& s) const { return s; }
    std::string operator()(uint64_t x) const { return std::to_string(x); }
    std::string operator()(int64_t x) const { return std::to_string(x); }
    std::string operator()(double x) const {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.4g", x);
      return buf;
    }
    std::string operator()(bool b) const { return b ? "on" : "off"; }
  };
  return std::visit(Visitor{}, v);
}

}  // namespace vstack
