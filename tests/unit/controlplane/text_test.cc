// Thread: test main thread. common/text.h (UTF-8 repair, control-character
// escapes) and its use by the logger: a name with a newline, ESC or NUL in it
// cannot forge a log line, reach a terminal raw or cut a line short.
#include "common/text.h"

#include <gtest/gtest.h>

#include <string>

#include "common/log.h"

namespace vipd {
namespace {

TEST(Utf8, ValidTextIsKept) {
  for (const std::string s : {"", "plain", "caf\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80", "\x7f"}) {
    EXPECT_TRUE(is_valid_utf8(s)) << s;
    EXPECT_EQ(utf8_repair(s), s);
  }
}

TEST(Utf8, InvalidBytesBecomeReplacementCharacters) {
  const std::string r = "\xef\xbf\xbd";
  EXPECT_FALSE(is_valid_utf8("\xff"));
  EXPECT_EQ(utf8_repair("a\xff" "b"), "a" + r + "b");
  EXPECT_EQ(utf8_repair("\xc3"), r);                      // cut short
  EXPECT_EQ(utf8_repair("\xc0\xaf"), r + r);              // overlong '/'
  EXPECT_EQ(utf8_repair("\xed\xa0\x80"), r + r + r);      // surrogate U+D800
  EXPECT_EQ(utf8_repair("\xf4\x90\x80\x80"), r + r + r + r);  // above U+10FFFF
  EXPECT_EQ(utf8_repair("\x80x"), r + "x");               // stray continuation
  EXPECT_TRUE(is_valid_utf8(utf8_repair("\xfe\xff\xc3\x28\xe2\x82")));
}

TEST(EscapeControl, ControlCharactersAndBadBytesAreEscaped) {
  EXPECT_EQ(escape_control("ns/web:http"), "ns/web:http");
  EXPECT_EQ(escape_control("caf\xc3\xa9"), "caf\xc3\xa9");
  EXPECT_EQ(escape_control("a\nb\rc\td"), "a\\nb\\rc\\td");
  EXPECT_EQ(escape_control(std::string("a\0b", 3)), "a\\x00b");
  EXPECT_EQ(escape_control("\x1b[31mred"), "\\x1b[31mred");
  EXPECT_EQ(escape_control("\x7f"), "\\x7f");
  EXPECT_EQ(escape_control("\xc2\x9b" "2J"), "\\u009b2J");  // C1 CSI
  EXPECT_EQ(escape_control("\xff" "x"), "\\xffx");
  // Nothing below 0x20, no DEL, no C1, valid UTF-8: whatever came in.
  std::string all;
  for (int c = 0; c < 256; ++c) all.push_back(static_cast<char>(c));
  const std::string e = escape_control(all + "\xc2\x85");
  EXPECT_TRUE(is_valid_utf8(e));
  for (char c : e) {
    const auto u = static_cast<unsigned char>(c);
    EXPECT_TRUE(u >= 0x20 && u != 0x7f) << int(u);
  }
  EXPECT_EQ(e.find("\xc2\x85"), std::string::npos);
}

TEST(Log, ANameCannotForgeALineOrReachTheTerminalRaw) {
  const std::string name = std::string("ns/evil\n00:00:00.000Z vipd info: forged\x1b]0;title\x07\0tail", 54);
  ::testing::internal::CaptureStderr();
  log_warn("source: Service " + name + ": bad");
  const std::string out = ::testing::internal::GetCapturedStderr();
  ASSERT_FALSE(out.empty());
  EXPECT_EQ(out.find('\n'), out.size() - 1) << out;  // exactly one line
  EXPECT_EQ(out.find('\x1b'), std::string::npos);
  EXPECT_EQ(out.find('\x07'), std::string::npos);
  EXPECT_NE(out.find("ns/evil\\n00:00:00.000Z vipd info: forged\\x1b]0;title\\x07\\x00tail: bad\n"), std::string::npos)
      << out;
}

}  // namespace
}  // namespace vipd
