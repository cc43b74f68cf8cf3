// Thread: any.
#include "model/ip_addr.h"

#include <arpa/inet.h>

#include <cstring>
#include <ostream>

namespace vipd::cp {

IpAddr IpAddr::v6(const std::array<uint8_t, 16>& bytes) {
  IpAddr a;
  a.family_ = Family::kV6;
  a.v6_ = bytes;
  return a;
}

IpAddr IpAddr::v6(const uint8_t* bytes16) {
  std::array<uint8_t, 16> b{};
  std::memcpy(b.data(), bytes16, 16);
  return v6(b);
}

std::optional<IpAddr> IpAddr::parse(const std::string& s) {
  // A std::string may hold a NUL that inet_pton would stop at.
  if (s.empty() || s.find('\0') != std::string::npos) return std::nullopt;
  in_addr a4{};
  if (inet_pton(AF_INET, s.c_str(), &a4) == 1) return IpAddr(ntohl(a4.s_addr));
  std::array<uint8_t, 16> a6{};
  if (inet_pton(AF_INET6, s.c_str(), a6.data()) == 1) return v6(a6);
  return std::nullopt;
}

namespace {

std::string dotted(uint32_t a) {
  return std::to_string(a >> 24) + "." + std::to_string((a >> 16) & 0xff) + "." +
         std::to_string((a >> 8) & 0xff) + "." + std::to_string(a & 0xff);
}

}  // namespace

std::string IpAddr::to_string() const {
  if (is_v4()) return dotted(v4_);
  uint16_t f[8];
  for (int i = 0; i < 8; ++i) f[i] = static_cast<uint16_t>(v6_[2 * i] << 8 | v6_[2 * i + 1]);
  // IPv4-mapped (RFC 5952 section 5): ::ffff:a.b.c.d.
  if (f[0] == 0 && f[1] == 0 && f[2] == 0 && f[3] == 0 && f[4] == 0 && f[5] == 0xffff)
    return "::ffff:" + dotted(static_cast<uint32_t>(f[6]) << 16 | f[7]);
  // The longest run of zero fields, the first one on a tie; a single zero field
  // is not compressed (RFC 5952 section 4.2.2).
  int best = -1, best_len = 0;
  for (int i = 0; i < 8;) {
    if (f[i] != 0) {
      ++i;
      continue;
    }
    int j = i;
    while (j < 8 && f[j] == 0) ++j;
    if (j - i > best_len) {
      best = i;
      best_len = j - i;
    }
    i = j;
  }
  if (best_len < 2) best = -1;
  static const char* const kHex = "0123456789abcdef";
  std::string out;
  out.reserve(39);
  for (int i = 0; i < 8; ++i) {
    if (i == best) {
      out += "::";
      i += best_len - 1;
      continue;
    }
    if (!out.empty() && out.back() != ':') out += ':';
    const uint16_t v = f[i];
    bool started = false;
    for (int shift = 12; shift >= 0; shift -= 4) {
      const unsigned nib = (v >> shift) & 0xf;
      if (nib == 0 && !started && shift != 0) continue;
      started = true;
      out += kHex[nib];
    }
  }
  return out;
}

size_t IpAddr::hash() const {
  // FNV-1a over the family and the address bytes.
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](uint8_t b) {
    h ^= b;
    h *= 1099511628211ull;
  };
  mix(static_cast<uint8_t>(family_));
  if (is_v4()) {
    for (int s = 24; s >= 0; s -= 8) mix(static_cast<uint8_t>(v4_ >> s));
  } else {
    for (uint8_t b : v6_) mix(b);
  }
  return static_cast<size_t>(h);
}

IpAddr IpAddr::masked(unsigned len) const {
  if (len >= bits()) return *this;
  if (is_v4()) return IpAddr(len == 0 ? 0u : v4_ & (~0u << (32 - len)));
  std::array<uint8_t, 16> b = v6_;
  for (unsigned i = 0; i < 16; ++i) {
    const unsigned lo = i * 8;
    if (lo >= len) {
      b[i] = 0;
    } else if (lo + 8 > len) {
      b[i] = static_cast<uint8_t>(b[i] & (0xff00u >> (len - lo)));
    }
  }
  return v6(b);
}

std::ostream& operator<<(std::ostream& o, const IpAddr& a) { return o << a.to_string(); }

const char* family_name(IpAddr::Family f) { return f == IpAddr::Family::kV4 ? "IPv4" : "IPv6"; }

std::optional<IpPrefix> IpPrefix::parse(const std::string& s) {
  const auto slash = s.find('/');
  if (slash == std::string::npos) return std::nullopt;
  const std::string len_text = s.substr(slash + 1);
  if (len_text.empty() || len_text.size() > 3) return std::nullopt;
  if (len_text.size() > 1 && len_text[0] == '0') return std::nullopt;
  unsigned len = 0;
  for (char c : len_text) {
    if (c < '0' || c > '9') return std::nullopt;
    len = len * 10 + static_cast<unsigned>(c - '0');
  }
  auto a = IpAddr::parse(s.substr(0, slash));
  if (!a || len > a->bits()) return std::nullopt;
  return IpPrefix{a->masked(len), static_cast<uint8_t>(len)};
}

std::optional<IpPrefix> IpPrefix::parse_or_host(const std::string& s) {
  if (s.find('/') != std::string::npos) return parse(s);
  auto a = IpAddr::parse(s);
  if (!a) return std::nullopt;
  return IpPrefix{*a, static_cast<uint8_t>(a->bits())};
}

bool IpPrefix::contains(const IpAddr& a) const {
  return a.family() == addr.family() && a.masked(len) == addr;
}

std::string IpPrefix::to_string() const { return addr.to_string() + "/" + std::to_string(len); }

}  // namespace vipd::cp
