// Named facts a device reports about itself (`vstack info`): text for humans, typed values for
// JSON.
#ifndef VSTACK_LIB_PROPERTY_H_
#define VSTACK_LIB_PROPERTY_H_

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "lib/export.h"

VSTACK_PUBLIC_BEGIN
namespace vstack {

using PropertyValue = std::variant<std::string, uint64_t, int64_t, double, bool>;

struct Property {
  std::string key;      // snake_case, stable: used as the JSON key
  PropertyValue value;
  std::string unit;     // "bytes", "%", "" ...; bytes are also shown human-readable in text
};
using PropertyList = std::vector<Property>;

// The value as text: "on"/"off" for bools, plain numbers otherwise.
std::string PropertyValueToString(const PropertyValue& v);

}  // namespace vstack
VSTACK_PUBLIC_END

#endif  // VSTACK_LIB_PROPERTY_H_
