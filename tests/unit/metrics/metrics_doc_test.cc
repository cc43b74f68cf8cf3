// Thread: test main thread. docs/metrics.md lists exactly the metric families
// the collector registers (observability/collector.cc, metric_families()),
// each with the code's type and label names. Run from the source root. Also:
// the observability options' defaults are the option table's.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "controlplane/config/options.h"
#include "observability/collector.h"
#include "observability/observability.h"

namespace vipd::cp {
namespace {

struct DocRow {
  std::string type, labels;
  int line = 0;
};

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(' ');
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(' ') - b + 1);
}

// "service, protocol, vip" -> "service,protocol,vip".
std::string without_spaces(std::string s) {
  std::string out;
  for (char c : s)
    if (c != ' ') out += c;
  return out;
}

// The rows "| `vipd_...` | TYPE | LABELS | MEANING |" of the "## Metrics"
// section's tables, by metric name.
std::map<std::string, DocRow> documented_metrics(const std::string& path, std::vector<std::string>* twice) {
  std::ifstream in(path);
  std::map<std::string, DocRow> out;
  bool in_section = false;
  int n = 0;
  for (std::string line; std::getline(in, line);) {
    ++n;
    if (line.rfind("## ", 0) == 0) in_section = line == "## Metrics";
    if (!in_section || line.rfind("| `vipd_", 0) != 0) continue;
    std::vector<std::string> cells;
    std::istringstream row(line.substr(1));
    for (std::string cell; std::getline(row, cell, '|');) cells.push_back(trim(cell));
    if (cells.size() < 4) continue;
    const std::string name = cells[0].substr(1, cells[0].size() - 2);  // inside the backquotes
    if (out.count(name)) twice->push_back(name);
    out[name] = DocRow{cells[1], without_spaces(cells[2]), n};
  }
  return out;
}

TEST(MetricsDoc, ListsExactlyTheRegisteredMetrics) {
  const std::string path = "docs/metrics.md";
  ASSERT_TRUE(std::ifstream(path).good()) << "run from the source root";
  std::vector<std::string> twice;
  const auto doc = documented_metrics(path, &twice);
  ASSERT_FALSE(doc.empty()) << path << ": no metric rows in the \"## Metrics\" section";
  for (const auto& name : twice) ADD_FAILURE() << path << ": " << name << " is listed twice";
  std::map<std::string, const FamilyInfo*> code;
  for (const FamilyInfo& f : metric_families()) code[f.name] = &f;
  for (const auto& [name, f] : code) {
    const auto d = doc.find(name);
    if (d == doc.end()) {
      ADD_FAILURE() << name << " (" << f->type << ") is registered but not in " << path;
      continue;
    }
    EXPECT_EQ(d->second.type, f->type) << path << ":" << d->second.line << ": the type of " << name;
    EXPECT_EQ(d->second.labels, f->labels) << path << ":" << d->second.line << ": the labels of " << name;
  }
  for (const auto& [name, d] : doc)
    if (!code.count(name))
      ADD_FAILURE() << path << ":" << d.line << ": " << name << " is documented but never registered";
}

// ObservabilityOptions keeps defaults of its own (the tests build it
// directly); vipd fills it from the options. Both agree.
TEST(MetricsDoc, ObservabilityDefaultsAreTheOptionDefaults) {
  const config::Options o;
  const ObservabilityOptions d;
  EXPECT_EQ(d.metrics_address, o.metrics_address) << "--metrics-address";
  EXPECT_EQ(d.health_address, o.health_address) << "--health-address";
  EXPECT_EQ(d.collector.per_backend, o.metrics_per_backend) << "--metrics-per-backend";
  EXPECT_EQ(d.collector.max_backend_series, o.metrics_max_backend_series) << "--metrics-max-backend-series";
  EXPECT_EQ(d.collector.max_service_series, o.metrics_max_service_series) << "--metrics-max-service-series";
}

}  // namespace
}  // namespace vipd::cp
