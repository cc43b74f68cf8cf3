// libFuzzer target: manifest documents (YAML or JSON, several `---`
// documents) through the same steps as ManifestSource::parse_file
// (ManifestSource::load_documents, k8s::parse_document per document) and then
// k8s::build_service_table, as the sync loop does.
//
// Invariants: no crash, no hang; nothing but YAML::Exception escapes
// load_documents (the source reports it as a syntax error); parse_document and
// build_service_table never throw (k8s_objects.h promises it); the built
// table is normalized (backends sorted by ip:port, unique; each entry's key
// equals its map key; normalize() changes nothing); and the dry-run JSON
// renders.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "model/service_table.h"
#include "controlplane/sources/k8s_objects.h"
#include "controlplane/sources/manifest_source.h"

namespace {

using namespace vipd::cp;

[[noreturn]] void fail(const std::string& what) {
  fprintf(stderr, "fuzz_manifest: %s\n", what.c_str());
  abort();
}

void check_table(const ServiceTable& t) {
  for (const auto& [key, svc] : t.services) {
    if (!(svc.key == key)) fail("entry key differs from its map key: " + to_string(key));
    for (size_t i = 1; i < svc.backends.size(); ++i) {
      const auto& a = svc.backends[i - 1];
      const auto& b = svc.backends[i];
      if (std::tie(a.ip, a.port) >= std::tie(b.ip, b.port)) fail("backends not sorted/unique in " + to_string(key));
    }
  }
  ServiceTable copy = t;
  copy.normalize();
  if (!copy.same_content(t)) fail("normalize() changed a built table");
  (void)to_dry_run_json(t);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<YAML::Node> docs;
  try {
    docs = ManifestSource::load_documents(text);
  } catch (const YAML::Exception&) {
    return 0;  // reported as a syntax error by the source
  }
  k8s::ParsedObjects objs;
  for (size_t i = 0; i < docs.size(); ++i) k8s::parse_document(docs[i], static_cast<int>(i + 1), &objs);
  k8s::BuildOptions opt;
  opt.node_name = "node-a";
  opt.node_zone = "zone-a";
  opt.node_ips = {0x0a000001u, 0xc0a80101u};
  const k8s::BuildResult r = k8s::build_service_table(objs.services, objs.slices, opt);
  check_table(r.table);
  // The same objects without node identity (the other branch of the rules).
  check_table(k8s::build_service_table(objs.services, objs.slices, Scheduler::kRr).table);
  return 0;
}
