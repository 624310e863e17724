#include "formats/vhd/vhd_parent.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>

#include "lib/aligned_buffer.h"
#include "lib/sync_io.h"

namespace vstack::vhd {
namespace {

namespace fs = std::filesystem;

void AppendUtf8(char32_t c, std::string* out) {
  if (c < 0x80) {
    out->push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (c >> 6)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (c >> 12)));
    out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (c >> 18)));
    out->push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

std::string Utf16UnitsToUtf8(const std::u16string& u) {
  std::string out;
  for (size_t i = 0; i < u.size(); ++i) {
    char32_t c = u[i];
    if (c >= 0xD800 && c < 0xDC00 && i + 1 < u.size() && u[i + 1] >= 0xDC00 && u[i + 1] < 0xE000) {
      c = 0x10000 + ((c - 0xD800) << 10) + (u[i + 1] - 0xDC00);
      ++i;
    } else if (c >= 0xD800 && c < 0xE000) {
      c = 0xFFFD;
    }
    AppendUtf8(c, &out);
  }
  return out;
}

std::string Slashes(std::string s) {
  std::replace(s.begin(), s.end(), '\\', '/');
  return s;
}

// "file:///a%20b" -> "/a b" (MacX locators are RFC 2396 URLs).
std::string FileUrlToPath(const std::string& url) {
  std::string s = url.rfind("file://", 0) == 0 ? url.substr(7) : url;
  if (s.rfind("localhost/", 0) == 0) s = s.substr(9);
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      out.push_back(static_cast<char>(std::stoi(s.substr(i + 1, 2), nullptr, 16)));
      i += 2;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

std::string PathToFileUrl(const std::string& path) {
  std::string out = "file://";
  for (unsigned char c : path) {
    if (c <= 0x20 || c == '%' || c >= 0x7F) {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", c);
      out += buf;
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  return out;
}

std::vector<uint8_t> Utf16Le(const std::string& s) {
  std::vector<uint8_t> out;
  for (char16_t u : Utf8ToUtf16(s)) {
    out.push_back(static_cast<uint8_t>(u & 0xFF));
    out.push_back(static_cast<uint8_t>(u >> 8));
  }
  return out;
}

fs::path ChildDir(const std::string& child_path) {
  fs::path dir = fs::path(child_path).parent_path();
  return dir.empty() ? fs::path(".") : dir;
}

}  // namespace

std::string LocatorCodeName(uint32_t code) {
  std::string s;
  for (int shift = 24; shift >= 0; shift -= 8) {
    const char c = static_cast<char>((code >> shift) & 0xFF);
    s.push_back(c >= 0x20 && c < 0x7F ? c : '?');
  }
  return s;
}

uint64_t LocatorSpaceBytes(const ParentLocator& l) {
  return l.data_space < kSectorSize ? uint64_t{l.data_space} * kSectorSize : l.data_space;
}

std::string Utf16ToUtf8(const uint8_t* data, size_t bytes, bool big_endian) {
  std::u16string u;
  for (size_t i = 0; i + 1 < bytes; i += 2) {
    const auto unit = static_cast<char16_t>(big_endian ? data[i] << 8 | data[i + 1]
                                                       : data[i + 1] << 8 | data[i]);
    if (unit == 0) break;
    u.push_back(unit);
  }
  return Utf16UnitsToUtf8(u);
}

std::string Utf16ToUtf8(const std::u16string& s) { return Utf16UnitsToUtf8(s); }

std::u16string Utf8ToUtf16(const std::string& s) {
  std::u16string out;
  for (size_t i = 0; i < s.size();) {
    const auto b = static_cast<unsigned char>(s[i]);
    char32_t c = 0xFFFD;
    size_t n = 1;
    if (b < 0x80) {
      c = b;
    } else if ((b >> 5) == 6 && i + 1 < s.size()) {
      c = (b & 0x1F) << 6 | (s[i + 1] & 0x3F);
      n = 2;
    } else if ((b >> 4) == 14 && i + 2 < s.size()) {
      c = (b & 0x0F) << 12 | (s[i + 1] & 0x3F) << 6 | (s[i + 2] & 0x3F);
      n = 3;
    } else if ((b >> 3) == 30 && i + 3 < s.size()) {
      c = (b & 0x07) << 18 | (s[i + 1] & 0x3F) << 12 | (s[i + 2] & 0x3F) << 6 | (s[i + 3] & 0x3F);
      n = 4;
    }
    if (c >= 0x10000) {
      c -= 0x10000;
      out.push_back(static_cast<char16_t>(0xD800 + (c >> 10)));
      out.push_back(static_cast<char16_t>(0xDC00 + (c & 0x3FF)));
    } else {
      out.push_back(static_cast<char16_t>(c));
    }
    i += n;
  }
  return out;
}

std::vector<LocatorPath> ReadLocators(BlockDevice& device, const VhdImage& image) {
  std::vector<LocatorPath> out;
  SyncIo io(device);
  const uint64_t hdr = image.footer.data_offset;
  for (size_t i = 0; i < image.header.locators.size(); ++i) {
    const ParentLocator& l = image.header.locators[i];
    if (l.platform_code == 0) continue;
    LocatorPath lp;
    lp.code = l.platform_code;
    const std::string where = "parent locator " + std::to_string(i) + " (" +
                              LocatorCodeName(l.platform_code) + ", entry at offset " +
                              std::to_string(hdr + 576 + 24 * i) + ")";
    const bool known = l.platform_code == kLocatorW2ru || l.platform_code == kLocatorW2ku ||
                       l.platform_code == kLocatorMacX;
    if (!known) {
      lp.problem = where + ": platform code not used by vstack";
    } else if (l.data_length == 0 || l.data_length > kMaxLocatorBytes) {
      lp.problem = where + ": data length " + std::to_string(l.data_length) +
                   " is not between 1 and " + std::to_string(kMaxLocatorBytes);
    } else if (l.data_offset % kSectorSize != 0 || l.data_offset < kFooterSize ||
               l.data_offset > image.footer_offset ||
               l.data_length > image.footer_offset - l.data_offset) {
      lp.problem = where + ": data at offset " + std::to_string(l.data_offset) + ", " +
                   std::to_string(l.data_length) + " bytes, is not inside the file (footer at " +
                   std::to_string(image.footer_offset) + ")";
    } else {
      const size_t len = (l.data_length + kSectorSize - 1) / kSectorSize * kSectorSize;
      AlignedBuffer buf(len, 4096);
      if (std::error_code ec = io.Read(l.data_offset, buf.span())) {
        lp.problem = where + ": cannot read its data: " + ec.message();
      } else {
        const auto* p = reinterpret_cast<const uint8_t*>(buf.data());
        if (l.platform_code == kLocatorMacX) {
          std::string url(reinterpret_cast<const char*>(p), l.data_length);
          url = url.substr(0, url.find('\0'));
          lp.path = FileUrlToPath(url);
        } else {
          lp.path = Slashes(Utf16ToUtf8(p, l.data_length, /*big_endian=*/false));
        }
        if (lp.path.empty()) lp.problem = where + ": empty path";
      }
    }
    out.push_back(std::move(lp));
  }
  return out;
}

std::vector<std::string> ParentCandidates(const std::vector<LocatorPath>& locators,
                                          const std::u16string& parent_name,
                                          const std::string& child_path) {
  const fs::path dir = ChildDir(child_path);
  std::vector<std::string> out;
  auto add = [&](const fs::path& p) {
    const std::string s = p.lexically_normal().string();
    if (!s.empty() && std::find(out.begin(), out.end(), s) == out.end()) out.push_back(s);
  };
  for (uint32_t code : {kLocatorW2ru, kLocatorW2ku, kLocatorMacX}) {
    for (const LocatorPath& l : locators) {
      if (l.code != code || l.path.empty()) continue;
      const fs::path p(l.path);
      add(p.is_absolute() ? p : dir / p);
    }
  }
  const std::string name = Slashes(Utf16ToUtf8(parent_name));
  if (!name.empty()) add(dir / fs::path(name).filename());
  return out;
}

Status CheckParentLink(const DynamicHeader& child, const Footer& parent, ParentCheck check,
                       const std::string& parent_what) {
  if (check == ParentCheck::kOff) return OkStatus();
  if (child.parent_uuid != parent.uuid) {
    return MakeError(Errc::kCorruption,
                     "VHD: the child expects parent unique ID " + UuidText(child.parent_uuid) +
                         ", but " + parent_what + " has " + UuidText(parent.uuid) +
                         " (open with vhd:parent_check=off to force it, for recovery)");
  }
  if (check == ParentCheck::kStrict && child.parent_timestamp != parent.timestamp) {
    return MakeError(Errc::kCorruption,
                     "VHD: the child expects parent time stamp " +
                         std::to_string(child.parent_timestamp) + ", but " + parent_what +
                         " has " + std::to_string(parent.timestamp) +
                         " (seconds since 2000; open with vhd:parent_check=uuid or off to "
                         "force it)");
  }
  return OkStatus();
}

NewParentLink MakeParentLink(const std::string& parent_path, const std::string& child_path,
                             const Footer& parent) {
  NewParentLink link;
  link.uuid = parent.uuid;
  link.timestamp = parent.timestamp;
  const fs::path dir = fs::absolute(ChildDir(child_path)).lexically_normal();
  const fs::path abs = fs::absolute(parent_path).lexically_normal();
  link.name = Utf8ToUtf16(abs.filename().string());
  if (link.name.size() > kParentNameUnits) link.name.resize(kParentNameUnits);
  fs::path rel = abs.lexically_relative(dir);
  std::string relative = rel.empty() ? abs.string() : rel.string();
  if (relative.rfind("../", 0) != 0) relative = "./" + relative;
  std::replace(relative.begin(), relative.end(), '/', '\\');
  link.entries.push_back({kLocatorW2ku, Utf16Le(abs.string())});
  link.entries.push_back({kLocatorW2ru, Utf16Le(relative)});
  const std::string url = PathToFileUrl(abs.string());
  link.entries.push_back({kLocatorMacX, std::vector<uint8_t>(url.begin(), url.end())});
  return link;
}

}  // namespace vstack::vhd
