// Thread: any (pure functions). Text that came from outside (Kubernetes object
// names, manifest files, API answers) on its way to a place that gives bytes a
// meaning: a log line, a terminal, a Prometheus exposition (docs/security.md,
// "Attacks tested").
#pragma once

#include <string>
#include <string_view>

namespace vipd {

// Length (1..4) of the well-formed UTF-8 sequence at s[i], or 0 when the byte
// there does not start one (stray continuation byte, overlong form, surrogate,
// beyond U+10FFFF, cut short).
size_t utf8_sequence_length(std::string_view s, size_t i);

// True when all of `s` is well-formed UTF-8.
bool is_valid_utf8(std::string_view s);

// `s` with every byte that is not part of a well-formed UTF-8 sequence
// replaced by U+FFFD (EF BF BD); valid text comes back unchanged.
std::string utf8_repair(std::string_view s);

// `s` safe for one line of a log or a terminal: C0 control characters (NUL,
// newline, ESC, ...), DEL and the C1 controls U+0080..U+009F become escapes
// (\n, \r, \t, otherwise \xNN; a C1 control as \u00NN), and each byte that is
// not well-formed UTF-8 becomes \xNN. Printable text, including non-ASCII
// UTF-8, comes back unchanged; the result never holds a control character.
std::string escape_control(std::string_view s);

}  // namespace vipd
