#include "lib/spec.h"

#include <cctype>

namespace vstack {
namespace {

bool IsIdentifier(std::string_view s) {
  if (s.empty() || !(std::islower(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  for (char c : s) {
    if (!(std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)) ||
          c == '_')) {
      return false;
    }
  }
  return true;
}

bool IsName(std::string_view s) {
  if (s.empty() || !std::isalnum(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s) {
    if (!(std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)) ||
          c == '_' || c == '-')) {
      return false;
    }
  }
  return true;
}

// One item of a part as scanned: its unescaped text and where its first unescaped '=' is.
struct RawItem {
  std::string text;
  size_t eq = std::string::npos;
};

struct RawPart {
  std::string name;
  bool has_items = false;
  std::vector<RawItem> items;
  size_t start = 0;  // character position in the spec, for messages
};

std::string Escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '+' || c == ',' || c == ':' || c == '=' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace

Status RefuseNul(std::string_view text, Errc code, std::string_view what) {
  const size_t nul = text.find('\0');
  if (nul == std::string_view::npos) return OkStatus();
  return MakeError(
      code, "the " + std::string(what) + " contains a NUL byte at position " + std::to_string(nul));
}

Result<std::vector<SpecPart>> ParseSpec(std::string_view spec) {
  VSTACK_RETURN_IF_ERROR(RefuseNul(spec, Errc::kBadSpec, "spec"));
  const std::string quoted = "spec '" + std::string(spec) + "': ";
  if (spec.empty()) return MakeError(Errc::kBadSpec, "empty stack spec");

  // Pass 1: split into parts and items, resolving escapes.
  std::vector<RawPart> raw(1);
  bool in_items = false;
  for (size_t i = 0; i < spec.size(); ++i) {
    char c = spec[i];
    RawPart& part = raw.back();
    if (c == '\\') {
      if (i + 1 == spec.size()) {
        return MakeError(Errc::kBadSpec, quoted + "trailing backslash");
      }
      c = spec[++i];
      if (in_items) {
        part.items.back().text += c;
      } else {
        part.name += c;
      }
      continue;
    }
    if (c == '+') {
      raw.push_back(RawPart{});
      raw.back().start = i + 1;
      in_items = false;
      continue;
    }
    if (!in_items) {
      if (c == ':') {
        in_items = true;
        part.has_items = true;
        part.items.emplace_back();
      } else {
        part.name += c;
      }
      continue;
    }
    if (c == ',') {
      part.items.emplace_back();
    } else {
      RawItem& item = part.items.back();
      if (c == '=' && item.eq == std::string::npos) item.eq = item.text.size();
      item.text += c;
    }
  }

  // Pass 2: validate and build parts.
  std::vector<SpecPart> parts;
  for (const RawPart& rp : raw) {
    const std::string where = " at character " + std::to_string(rp.start + 1);
    if (rp.name.empty()) {
      return MakeError(Errc::kBadSpec, quoted + "empty part" + where);
    }
    if (!IsName(rp.name)) {
      return MakeError(Errc::kBadSpec, quoted + "invalid name '" + rp.name + "'" + where +
                                           " (names are lower-case letters, digits, '_' and '-')");
    }
    SpecPart part;
    part.name = rp.name;
    for (size_t k = 0; k < rp.items.size(); ++k) {
      const RawItem& item = rp.items[k];
      const bool is_option =
          item.eq != std::string::npos && IsIdentifier(std::string_view(item.text).substr(0, item.eq));
      if (!is_option) {
        if (k != 0) {
          return MakeError(Errc::kBadSpec,
                           quoted + "item '" + item.text + "' of '" + rp.name +
                               "' is not key=value (only the first item may be a path or size)");
        }
        if (item.text.empty()) {
          return MakeError(Errc::kBadSpec, quoted + "empty argument after '" + rp.name + ":'");
        }
        part.positional = item.text;
        continue;
      }
      SpecOption opt{item.text.substr(0, item.eq), item.text.substr(item.eq + 1)};
      for (const SpecOption& seen : part.options) {
        if (seen.key == opt.key) {
          return MakeError(Errc::kBadSpec,
                           quoted + "option '" + opt.key + "' given twice for '" + rp.name + "'");
        }
      }
      part.options.push_back(std::move(opt));
    }
    parts.push_back(std::move(part));
  }
  return parts;
}

std::string FormatSpecPart(const SpecPart& part) {
  std::string out = part.name;
  char sep = ':';
  if (!part.positional.empty()) {
    out += sep;
    out += Escape(part.positional);
    sep = ',';
  }
  for (const SpecOption& o : part.options) {
    out += sep;
    out += o.key + "=" + Escape(o.value);
    sep = ',';
  }
  return out;
}

std::string FormatSpec(const std::vector<SpecPart>& parts) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i) out += '+';
    out += FormatSpecPart(parts[i]);
  }
  return out;
}

}  // namespace vstack
