// Thread: any.
#include "common/file.h"

#include <fstream>
#include <sstream>

namespace vipd {

bool read_file(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  return true;
}

}  // namespace vipd
