// Thread: any (immutable values).
// IpAddr: an IPv4 or IPv6 address, the address type of the ServiceTable (VIPs and
// real servers). IpPrefix: an address and a prefix length (source ranges).
#pragma once

#include <array>
#include <bit>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <iosfwd>
#include <optional>
#include <string>

namespace vipd::cp {

class IpAddr {
 public:
  enum class Family : uint8_t { kV4 = 0, kV6 = 1 };  // kV4 < kV6: the table order

  // 0.0.0.0.
  constexpr IpAddr() = default;
  // An IPv4 address in host byte order. Implicit on purpose: IPv4 code and tests
  // that build keys from uint32_t literals keep compiling unchanged.
  // NOLINTNEXTLINE(google-explicit-constructor)
  constexpr IpAddr(uint32_t v4_host_order) : v4_(v4_host_order) {}
  // An IPv6 address from its 16 bytes (network order). Always IPv6, also for the
  // IPv4-mapped range ::ffff:0:0/96.
  static IpAddr v6(const std::array<uint8_t, 16>& bytes);
  static IpAddr v6(const uint8_t* bytes16);

  // Strict: inet_pton's forms only (dotted quad for IPv4, RFC 4291 text for IPv6);
  // no zone ("%eth0"), no brackets, no prefix, no surrounding blanks.
  static std::optional<IpAddr> parse(const std::string& s);

  Family family() const { return family_; }
  bool is_v4() const { return family_ == Family::kV4; }
  bool is_v6() const { return family_ == Family::kV6; }
  // IPv4 only (host byte order); 0 for an IPv6 address.
  uint32_t v4() const { return v4_; }
  // IPv6 only (network order); all zero for an IPv4 address.
  const std::array<uint8_t, 16>& v6_bytes() const { return v6_; }
  unsigned bits() const { return is_v4() ? 32 : 128; }

  // IPv4 dotted quad; IPv6 in RFC 5952 form (lowercase hex, leading zeros dropped,
  // the longest run of two or more zero fields (the first on a tie) as "::",
  // IPv4-mapped ::ffff:a.b.c.d in the mixed notation).
  std::string to_string() const;

  // Total order: every IPv4 address before every IPv6 address, then numeric.
  // The same order as the defaulted comparison of (family, v4, v6 bytes), given
  // the class invariant that the other family's field stays zero (an IPv4
  // address has no v6 bytes, an IPv6 one v4 0: every constructor keeps it).
  // Written out so that it is one or two word compares instead of a memcmp call
  // per address: the control plane compares addresses in every ServiceTable
  // diff (keys and real servers) and the publisher's maps are keyed by them.
  friend std::strong_ordering operator<=>(const IpAddr& a, const IpAddr& b) {
    if (a.family_ != b.family_) return a.family_ <=> b.family_;
    if (a.family_ == Family::kV4) return a.v4_ <=> b.v4_;
    const uint64_t ah = a.v6_word(0), bh = b.v6_word(0);
    if (ah != bh) return ah <=> bh;
    return a.v6_word(1) <=> b.v6_word(1);
  }
  friend bool operator==(const IpAddr& a, const IpAddr& b) {
    if (a.family_ != b.family_) return false;
    if (a.family_ == Family::kV4) return a.v4_ == b.v4_;
    return a.v6_word(0) == b.v6_word(0) && a.v6_word(1) == b.v6_word(1);
  }

  size_t hash() const;

  // The address with every bit after the first `len` cleared (len >= bits(): unchanged).
  IpAddr masked(unsigned len) const;

 private:
  // Bytes 8*i .. 8*i+7 of the IPv6 address as a number (big-endian: numeric
  // order is the bytes' lexicographic order).
  uint64_t v6_word(unsigned i) const {
    uint64_t w;
    std::memcpy(&w, v6_.data() + 8 * i, 8);
    if constexpr (std::endian::native == std::endian::little) w = __builtin_bswap64(w);
    return w;
  }

  Family family_ = Family::kV4;
  uint32_t v4_ = 0;
  std::array<uint8_t, 16> v6_{};
};

const char* family_name(IpAddr::Family f);
std::ostream& operator<<(std::ostream& o, const IpAddr& a);  // to_string() (test output)  // "IPv4" / "IPv6" (the Kubernetes spelling)

struct IpPrefix {
  IpAddr addr;  // host bits clear
  uint8_t len = 0;

  // Strict "a.b.c.d/n" (n 0..32) or "<ipv6>/n" (n 0..128); n is decimal without
  // leading zeros (except "0") and required. Host bits are cleared, not rejected
  // ("10.1.2.3/8" -> 10.0.0.0/8), as the IPv4 source ranges always were.
  static std::optional<IpPrefix> parse(const std::string& s);
  // As parse(), but a bare address means a single host (/32 or /128).
  static std::optional<IpPrefix> parse_or_host(const std::string& s);

  IpAddr::Family family() const { return addr.family(); }
  bool contains(const IpAddr& a) const;
  std::string to_string() const;  // "10.0.0.0/8", "fd00::/8"

  auto operator<=>(const IpPrefix&) const = default;
  bool operator==(const IpPrefix&) const = default;
};

}  // namespace vipd::cp

template <>
struct std::hash<vipd::cp::IpAddr> {
  size_t operator()(const vipd::cp::IpAddr& a) const noexcept { return a.hash(); }
};
