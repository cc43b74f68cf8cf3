// Thread: test main thread. The option structs of the sync loop, the table
// build and the Kubernetes source keep defaults of their own (their tests
// build them directly); vipd fills them from the options. Here both sets of
// defaults agree, so that the option table (controlplane/config/option_table.cc,
// docs/configuration.md) states what a component does when nothing is set.
#include <gtest/gtest.h>

#include "controlplane/config/options.h"
#include "controlplane/kube/kube_source.h"
#include "controlplane/kube/source_factory.h"
#include "controlplane/sync/sync_loop.h"

namespace vipd::cp {
namespace {

TEST(OptionDefaults, SyncLoopDefaultsAreTheOptionDefaults) {
  const config::Options o;
  const SyncOptions s;
  EXPECT_EQ(s.min_interval_ms, o.sync_min_interval_ms) << "--sync-min-interval-ms";
  EXPECT_EQ(s.full_resync_s, o.sync_full_resync_s) << "--sync-full-resync-s";
  EXPECT_EQ(s.retry_max_ms, o.sync_retry_max_ms) << "--sync-retry-max-ms";
}

TEST(OptionDefaults, KubeSourceDefaultsAreTheOptionDefaults) {
  const config::Options o;
  const kube::KubeSourceOptions k;
  EXPECT_EQ(k.qps, static_cast<double>(o.api_qps)) << "--api-qps";
  EXPECT_EQ(k.backoff_initial_ms, o.api_backoff_initial_ms) << "--api-backoff-initial-ms";
  EXPECT_EQ(k.backoff_max_ms, o.api_backoff_max_ms) << "--api-backoff-max-ms";
  const k8s::BuildOptions b;
  const k8s::BuildOptions from_options = build_options(o);
  EXPECT_EQ(b.default_scheduler, o.default_scheduler) << "--scheduler";
  EXPECT_EQ(from_options.default_scheduler, b.default_scheduler);
  EXPECT_EQ(from_options.node_name, b.node_name) << "--node-name";
  EXPECT_EQ(from_options.node_zone, b.node_zone) << "--node-zone";
  EXPECT_EQ(from_options.node_ips, b.node_ips) << "--node-ips";
  EXPECT_EQ(from_options.service_proxy_name, b.service_proxy_name) << "--service-proxy-name";
}

}  // namespace
}  // namespace vipd::cp
