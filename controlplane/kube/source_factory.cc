// Thread: control.
#include "controlplane/kube/source_factory.h"

#include "common/log.h"
#include "common/text.h"
#include "controlplane/kube/kube_source.h"
#include "controlplane/sources/manifest_source.h"

namespace vipd::cp {

k8s::BuildOptions build_options(const config::Options& opt) {
  k8s::BuildOptions b;
  b.default_scheduler = opt.default_scheduler;
  b.default_proxy_protocol = opt.default_proxy_protocol;
  b.node_name = opt.node_name;
  b.node_zone = opt.node_zone;
  b.node_ips = opt.node_ips;
  if (opt.mode == config::Mode::kDpdk && opt.forward_method == config::ForwardMethod::kFnat)
    b.reserved_addrs.assign(opt.fnat_local_addrs.begin(), opt.fnat_local_addrs.end());
  b.service_proxy_name = opt.service_proxy_name;
  return b;
}

std::unique_ptr<Source> make_source(const config::Options& opt, std::string* error) {
  if (opt.source == config::SourceKind::kManifests)
    return std::make_unique<ManifestSource>(opt.manifests_dir, opt.default_scheduler, build_options(opt));
  std::optional<kube::ClientConfig> cfg;
  if (opt.in_cluster) {
    cfg = kube::in_cluster_config(error);
  } else {
    const std::string path = opt.kubeconfig.empty() ? kube::default_kubeconfig_path() : opt.kubeconfig;
    cfg = kube::load_kubeconfig(path, error);
  }
  if (!cfg) return nullptr;
  cfg->allow_insecure_token = opt.api_allow_insecure_token;
  if (!kube::check_transport(*cfg, error)) return nullptr;
  kube::KubeSourceOptions ko;
  ko.build = build_options(opt);
  ko.qps = opt.api_qps;
  ko.backoff_initial_ms = opt.api_backoff_initial_ms;
  ko.backoff_max_ms = opt.api_backoff_max_ms;
  auto src = std::make_unique<kube::KubeSource>(std::move(*cfg), ko);
  src->start();
  return src;
}

int dry_run(Source& source, std::ostream& out, std::ostream& err, int timeout_ms, const DryRunPrinter& print) {
  const bool is_kube = dynamic_cast<kube::KubeSource*>(&source) != nullptr;
  if (auto* k = dynamic_cast<kube::KubeSource*>(&source)) {
    if (!k->wait_ready(timeout_ms)) {
      err << "vipd: the initial lists of services and endpointslices did not complete within "
          << timeout_ms / 1000 << " s\n";
      return 1;
    }
  }
  LoadResult r = source.load();
  for (const auto& e : r.errors)
    err << (is_kube ? "vipd: object error: " : "vipd: manifest error: ") << escape_control(e.to_string()) << "\n";
  // KubeSource answers in delta form: its whole table is behind `current`.
  ServiceTable& table = r.delta && r.current ? *r.current : r.table;
  table.normalize();
  if (print) {
    if (!print(table, out, err)) return 1;
  } else {
    out << to_dry_run_json(table) << "\n";
  }
  return r.errors.empty() ? 0 : 1;
}

std::string source_kind(const Source& source) {
  return dynamic_cast<const kube::KubeSource*>(&source) ? "kubernetes" : "manifests";
}

}  // namespace vipd::cp
