// Thread: any (pure functions). The one sanitiser for text that reaches an
// iptables rule, in every mode that writes rules (iptables mode's ruleset.cc,
// ipvs mode's ipvs_desired.cc, nftables mode's ruleset.cc). Names come from Kubernetes objects and
// manifests; whatever they hold, a comment can neither end the quoted
// argument, nor the payload line, nor cut the rule short (a NUL), nor exceed
// what iptables accepts (a longer argument fails the whole iptables-restore:
// "Parameter too long!").
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace vipd::cp::ipt {

// xt_comment keeps at most 255 characters (256 with the NUL).
inline constexpr size_t kMaxCommentLength = 255;

// True for the characters a comment keeps: ASCII letters and digits and
// " ._/:->|[]" (enough for "ns/name:port -> 10.0.0.1:80 has no endpoints" and
// "ns/name:port -> [fd00::1]:80"; brackets are plain characters inside the
// quoted argument of iptables and of nft).
bool comment_char_allowed(char c);

// `text` with every other byte replaced by '_', cut at max_len bytes
// (kMaxCommentLength for iptables; the nftables mode passes its own limit).
std::string comment_text(std::string_view text, size_t max_len = kMaxCommentLength);

// The match for a rule: -m comment --comment "TEXT" (TEXT = comment_text(text)).
std::string comment_match(std::string_view text);

}  // namespace vipd::cp::ipt
