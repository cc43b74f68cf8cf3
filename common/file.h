// Thread: any. Small file helpers.
#pragma once

#include <string>

namespace vipd {

// The whole content of the file at `path` into *out (bytes as they are).
// False, *out untouched, when it cannot be opened.
bool read_file(const std::string& path, std::string* out);

}  // namespace vipd
