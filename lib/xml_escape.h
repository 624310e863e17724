// Text put into XML, SVG or HTML: the one escaper of the reports' charts and pages (vstack bench's
// SVG charts and index.html, vstack space's waterfall).
#ifndef VSTACK_LIB_XML_ESCAPE_H_
#define VSTACK_LIB_XML_ESCAPE_H_

#include <string>
#include <string_view>

namespace vstack {

// `text` with &, <, > and " written as entities, so it is safe in element text and in a
// double-quoted attribute.
std::string XmlEscape(std::string_view text);

}  // namespace vstack

#endif  // VSTACK_LIB_XML_ESCAPE_H_
