// Thread: any (see api_client.h).
#include "controlplane/kube/api_client.h"

#include <curl/curl.h>
#include <yaml-cpp/yaml.h>

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "common/file.h"
#include "common/log.h"

namespace vipd::cp::kube {
namespace {

std::once_flag g_curl_once;

void curl_init_once() {
  std::call_once(g_curl_once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

std::string trim_ws(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ' || s.back() == '\t'))
    s.pop_back();
  size_t b = 0;
  while (b < s.size() && (s[b] == ' ' || s[b] == '\t' || s[b] == '\n')) ++b;
  return s.substr(b);
}

std::string str(const YAML::Node& n, const char* key) {
  if (!n || !n.IsMap()) return "";
  const YAML::Node v = n[key];
  if (!v || !v.IsScalar()) return "";
  return v.Scalar();
}

// Finds the entry named `name` in a kubeconfig list (clusters, users, contexts).
YAML::Node named(const YAML::Node& list, const std::string& name, const char* inner) {
  if (!list || !list.IsSequence()) return YAML::Node(YAML::NodeType::Undefined);
  for (const auto& e : list)
    if (e.IsMap() && str(e, "name") == name) return e[inner];
  return YAML::Node(YAML::NodeType::Undefined);
}

}  // namespace

std::string base64_decode(const std::string& in, bool* ok) {
  static const std::string kAlphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  *ok = true;
  for (char c : in) {
    if (c == '=' || c == '\n' || c == '\r' || c == ' ') continue;
    const auto p = kAlphabet.find(c);
    if (p == std::string::npos) {
      *ok = false;
      return "";
    }
    acc = (acc << 6) | static_cast<uint32_t>(p);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  return out;
}

std::string default_kubeconfig_path() {
  if (const char* k = std::getenv("KUBECONFIG"); k && *k) {
    std::string s(k);
    return s.substr(0, s.find(':'));
  }
  const char* home = std::getenv("HOME");
  return std::string(home ? home : "") + "/.kube/config";
}

std::optional<ClientConfig> load_kubeconfig(const std::string& path, std::string* error) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const std::exception& e) {
    *error = "kubeconfig " + path + ": " + e.what();
    return std::nullopt;
  }
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  auto resolve = [&](const std::string& p) {
    if (p.empty() || p[0] == '/') return p;
    return (dir / p).string();
  };
  try {
    const std::string ctx_name = str(root, "current-context");
    if (ctx_name.empty()) {
      *error = "kubeconfig " + path + ": no current-context";
      return std::nullopt;
    }
    const YAML::Node ctx = named(root["contexts"], ctx_name, "context");
    if (!ctx) {
      *error = "kubeconfig " + path + ": context '" + ctx_name + "' not found";
      return std::nullopt;
    }
    const std::string cluster_name = str(ctx, "cluster"), user_name = str(ctx, "user");
    const YAML::Node cluster = named(root["clusters"], cluster_name, "cluster");
    if (!cluster) {
      *error = "kubeconfig " + path + ": cluster '" + cluster_name + "' not found";
      return std::nullopt;
    }
    ClientConfig c;
    c.origin = "kubeconfig " + path + " (context " + ctx_name + ")";
    c.server = str(cluster, "server");
    while (!c.server.empty() && c.server.back() == '/') c.server.pop_back();
    if (c.server.empty()) {
      *error = "kubeconfig " + path + ": cluster '" + cluster_name + "' has no server";
      return std::nullopt;
    }
    c.ca_file = resolve(str(cluster, "certificate-authority"));
    const std::string skip = str(cluster, "insecure-skip-tls-verify");
    c.insecure = skip == "true";
    bool ok = true;
    if (auto d = str(cluster, "certificate-authority-data"); !d.empty()) {
      c.ca_data = base64_decode(d, &ok);
      if (!ok) {
        *error = "kubeconfig " + path + ": certificate-authority-data is not base64";
        return std::nullopt;
      }
    }
    const YAML::Node user = named(root["users"], user_name, "user");
    if (user) {
      c.token = str(user, "token");
      c.token_file = resolve(str(user, "tokenFile"));
      c.cert_file = resolve(str(user, "client-certificate"));
      c.key_file = resolve(str(user, "client-key"));
      if (auto d = str(user, "client-certificate-data"); !d.empty()) c.cert_data = base64_decode(d, &ok);
      if (auto d = str(user, "client-key-data"); ok && !d.empty()) c.key_data = base64_decode(d, &ok);
      if (!ok) {
        *error = "kubeconfig " + path + ": client-certificate-data/client-key-data is not base64";
        return std::nullopt;
      }
      if (user["exec"] || user["auth-provider"])
        log_warn("kube: kubeconfig user '" + user_name +
                 "' uses exec/auth-provider credentials, which vipd does not support");
    }
    return c;
  } catch (const std::exception& e) {
    *error = "kubeconfig " + path + ": " + e.what();
    return std::nullopt;
  }
}

bool plain_http(const std::string& server) {
  static const std::string kHttp = "http://";
  if (server.size() < kHttp.size()) return false;
  for (size_t i = 0; i < kHttp.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(server[i])) != kHttp[i]) return false;
  return true;
}

bool has_token(const ClientConfig& cfg) { return !cfg.token.empty() || !cfg.token_file.empty(); }

bool check_transport(const ClientConfig& cfg, std::string* error) {
  if (plain_http(cfg.server) && has_token(cfg)) {
    if (!cfg.allow_insecure_token) {
      *error = cfg.origin + ": server " + cfg.server +
               " is plain http and the user has a bearer token, which would travel in clear: use an https:// "
               "server, or pass --api-allow-insecure-token to send it anyway";
      return false;
    }
    log_warn("kube: --api-allow-insecure-token: the bearer token goes to " + cfg.server +
             " in clear (plain http); anyone on the path can read it and act as vipd");
  }
  if (cfg.insecure)
    log_warn("kube: TLS verification is OFF for " + cfg.server + " (insecure-skip-tls-verify in " + cfg.origin +
             "): anyone on the path can impersonate the API server and feed vipd its services" +
             (has_token(cfg) ? " and read the bearer token" : ""));
  // libcurl honours these (and their lower-case forms) for every request.
  for (const char* v : {"HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy",
                        "NO_PROXY", "no_proxy"})
    if (const char* val = std::getenv(v); val && *val)
      log_info(std::string("kube: environment ") + v + " is set; libcurl applies it to the API requests");
  return true;
}

std::optional<ClientConfig> in_cluster_config(std::string* error, const std::string& sa_dir) {
  const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
  const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
  if (!host || !*host || !port || !*port) {
    *error = "in-cluster: KUBERNETES_SERVICE_HOST / KUBERNETES_SERVICE_PORT are not set";
    return std::nullopt;
  }
  ClientConfig c;
  std::string h(host);
  if (h.find(':') != std::string::npos) h = "[" + h + "]";  // IPv6 literal
  c.server = "https://" + h + ":" + port;
  c.token_file = sa_dir + "/token";
  c.ca_file = sa_dir + "/ca.crt";
  c.origin = "in-cluster";
  std::string tok;
  if (!read_file(c.token_file, &tok)) {
    *error = "in-cluster: cannot read " + c.token_file;
    return std::nullopt;
  }
  return c;
}

RateLimiter::RateLimiter(double qps, double burst)
    : qps_(qps), burst_(burst), tokens_(burst), last_(std::chrono::steady_clock::now()) {}

bool RateLimiter::acquire(const std::atomic<bool>& stop) {
  for (;;) {
    if (stop.load()) return false;
    double wait_s = 0;
    {
      std::lock_guard<std::mutex> g(mu_);
      const auto now = std::chrono::steady_clock::now();
      tokens_ = std::min(burst_, tokens_ + std::chrono::duration<double>(now - last_).count() * qps_);
      last_ = now;
      if (tokens_ >= 1) {
        tokens_ -= 1;
        return true;
      }
      wait_s = (1 - tokens_) / qps_;
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(std::min(wait_s, 0.1)));
  }
}

ApiClient::ApiClient(ClientConfig cfg) : cfg_(std::move(cfg)) { curl_init_once(); }

std::vector<std::pair<std::string, std::string>> runtime_files(const ClientConfig& cfg) {
  std::vector<std::pair<std::string, std::string>> out;
  const auto add = [&](const char* what, const std::string& path) {
    if (!path.empty()) out.emplace_back(std::string(what) + " of " + cfg.origin, path);
  };
  add("the API token file", cfg.token_file);
  if (cfg.ca_data.empty()) add("the API server CA file", cfg.ca_file);
  if (cfg.cert_data.empty()) add("the client certificate", cfg.cert_file);
  if (cfg.key_data.empty()) add("the client key", cfg.key_file);
  return out;
}

std::string ApiClient::bearer_token() {
  if (cfg_.token_file.empty()) return cfg_.token;
  std::string t;
  std::lock_guard<std::mutex> g(token_mu_);
  if (read_file(cfg_.token_file, &t)) cached_token_ = trim_ws(t);  // re-read: it rotates
  else log_warn("kube: cannot read token file " + cfg_.token_file + "; using the last token read");
  return cached_token_.empty() ? cfg_.token : cached_token_;
}

std::string url_encode(const std::string& s) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

namespace {

struct Transfer {
  CURL* curl = nullptr;
  const std::function<bool(const char*, size_t)>* on_data = nullptr;
  std::string* body = nullptr;        // non-2xx (or all, when on_data is null)
  const std::atomic<bool>* stop = nullptr;
  bool aborted = false;
  size_t max_error_body = 1 << 20;
};

size_t on_write(char* ptr, size_t size, size_t nmemb, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t n = size * nmemb;
  if (t->stop->load()) {
    t->aborted = true;
    return 0;
  }
  long status = 0;
  curl_easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &status);
  if (t->on_data && status >= 200 && status < 300) {
    if (!(*t->on_data)(ptr, n)) {
      t->aborted = true;
      return 0;
    }
    return n;
  }
  if (t->body) {
    if (!t->on_data || t->body->size() < t->max_error_body) t->body->append(ptr, n);
  }
  return n;
}

int on_progress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  auto* t = static_cast<Transfer*>(user);
  if (t->stop->load()) {
    t->aborted = true;
    return 1;
  }
  return 0;
}

}  // namespace

static HttpResult perform(const ClientConfig& cfg, const std::string& token,
                          const std::string& path_query, Transfer* t, int timeout_s) {
  HttpResult r;
  CURL* c = curl_easy_init();
  if (!c) {
    r.error = "curl_easy_init failed";
    return r;
  }
  t->curl = c;
  char errbuf[CURL_ERROR_SIZE] = {0};
  const std::string url = cfg.server + path_query;
  curl_slist* headers = nullptr;
  headers = curl_slist_append(headers, "Accept: application/json");
  std::string auth;
  if (!token.empty() && plain_http(cfg.server) && !cfg.allow_insecure_token) {
    // check_transport refuses this at start; a config built another way must not leak either.
    curl_slist_free_all(headers);
    curl_easy_cleanup(c);
    t->curl = nullptr;
    r.error = "refusing to send the bearer token to " + cfg.server +
              " over plain http (--api-allow-insecure-token allows it)";
    return r;
  }
  if (!token.empty()) {
    auth = "Authorization: Bearer " + token;
    headers = curl_slist_append(headers, auth.c_str());
  }
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(c, CURLOPT_USERAGENT, "vipd/0.1 (service proxy)");
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_1_1);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 10L);
  curl_easy_setopt(c, CURLOPT_TIMEOUT, static_cast<long>(timeout_s));
  curl_easy_setopt(c, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(c, CURLOPT_TCP_KEEPIDLE, 30L);
  curl_easy_setopt(c, CURLOPT_TCP_KEEPINTVL, 10L);
  curl_easy_setopt(c, CURLOPT_ACCEPT_ENCODING, "");  // gzip if the server offers it
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_write);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, t);
  curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
  curl_easy_setopt(c, CURLOPT_XFERINFODATA, t);
  // TLS: verified unless the kubeconfig explicitly says insecure-skip-tls-verify.
  curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, cfg.insecure ? 0L : 1L);
  curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, cfg.insecure ? 0L : 2L);
  curl_blob ca{}, cert{}, key{};
  if (!cfg.ca_data.empty()) {
    ca = {const_cast<char*>(cfg.ca_data.data()), cfg.ca_data.size(), CURL_BLOB_NOCOPY};
    curl_easy_setopt(c, CURLOPT_CAINFO_BLOB, &ca);
  } else if (!cfg.ca_file.empty()) {
    curl_easy_setopt(c, CURLOPT_CAINFO, cfg.ca_file.c_str());
  }
  if (!cfg.cert_data.empty()) {
    cert = {const_cast<char*>(cfg.cert_data.data()), cfg.cert_data.size(), CURL_BLOB_NOCOPY};
    curl_easy_setopt(c, CURLOPT_SSLCERT_BLOB, &cert);
    curl_easy_setopt(c, CURLOPT_SSLCERTTYPE, "PEM");
  } else if (!cfg.cert_file.empty()) {
    curl_easy_setopt(c, CURLOPT_SSLCERT, cfg.cert_file.c_str());
  }
  if (!cfg.key_data.empty()) {
    key = {const_cast<char*>(cfg.key_data.data()), cfg.key_data.size(), CURL_BLOB_NOCOPY};
    curl_easy_setopt(c, CURLOPT_SSLKEY_BLOB, &key);
    curl_easy_setopt(c, CURLOPT_SSLKEYTYPE, "PEM");
  } else if (!cfg.key_file.empty()) {
    curl_easy_setopt(c, CURLOPT_SSLKEY, cfg.key_file.c_str());
  }
  const CURLcode rc = curl_easy_perform(c);
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
  r.aborted = t->aborted;
  if (rc != CURLE_OK && !t->aborted)
    r.error = std::string(curl_easy_strerror(rc)) + (errbuf[0] ? std::string(": ") + errbuf : "");
  curl_slist_free_all(headers);
  curl_easy_cleanup(c);
  return r;
}

HttpResult ApiClient::get(const std::string& path_query, std::string* body,
                          const std::atomic<bool>& stop, int timeout_s) {
  Transfer t;
  t.body = body;
  t.stop = &stop;
  return perform(cfg_, bearer_token(), path_query, &t, timeout_s);
}

HttpResult ApiClient::stream(const std::string& path_query,
                             const std::function<bool(const char*, size_t)>& on_data,
                             std::string* error_body, const std::atomic<bool>& stop,
                             int timeout_s) {
  Transfer t;
  t.on_data = &on_data;
  t.body = error_body;
  t.stop = &stop;
  return perform(cfg_, bearer_token(), path_query, &t, timeout_s);
}

}  // namespace vipd::cp::kube
