// Thread: any; one ApiClient may be used by several threads at once (each call
// uses its own curl handle; the token file is re-read under a lock).
//
// A minimal Kubernetes API client over HTTP/1.1 + TLS (libcurl, OpenSSL): plain
// GETs for lists and streaming GETs for watches. Connection settings come from a
// kubeconfig file (current-context) or from the in-cluster environment
// (docs/contract.md C12-C13). TLS is verified unless the kubeconfig says
// insecure-skip-tls-verify: true.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace vipd::cp::kube {

struct ClientConfig {
  std::string server;        // https://host:port (no trailing slash)
  std::string ca_file;       // certificate-authority
  std::string ca_data;       // certificate-authority-data (PEM, decoded)
  bool insecure = false;     // insecure-skip-tls-verify
  std::string token;         // static bearer token
  std::string token_file;    // re-read before every request (rotation)
  std::string cert_file;     // client-certificate
  std::string cert_data;     // client-certificate-data (PEM, decoded)
  std::string key_file;      // client-key
  std::string key_data;      // client-key-data (PEM, decoded)
  std::string origin;        // "kubeconfig FILE (context X)" or "in-cluster"
  // --api-allow-insecure-token: send the bearer token to an http:// server
  // (in clear). Without it such a request is refused before it is sent.
  bool allow_insecure_token = false;
};

// True when `server` is a plain http:// URL (scheme compared without case).
bool plain_http(const std::string& server);

// True when a request of `cfg` would carry a bearer token (token or token file).
bool has_token(const ClientConfig& cfg);

// The start-up check of the transport (docs/security.md "Kubernetes API"):
// false and `error` for a bearer token over plain http:// unless
// allow_insecure_token; a WARN log line, at every start, for
// insecure-skip-tls-verify and for an allowed token in clear. HTTPS_PROXY /
// NO_PROXY (libcurl) are honoured and logged when set.
bool check_transport(const ClientConfig& cfg, std::string* error);

// Reads a kubeconfig (YAML) and resolves current-context -> cluster + user.
// Relative file paths are resolved against the kubeconfig's directory.
// Returns nullopt and sets *error on any problem.
std::optional<ClientConfig> load_kubeconfig(const std::string& path, std::string* error);

// In-cluster: https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT, the
// service-account token file (re-read: it rotates) and CA. `sa_dir` is
// /var/run/secrets/kubernetes.io/serviceaccount unless overridden (tests).
std::optional<ClientConfig> in_cluster_config(std::string* error,
                                              const std::string& sa_dir =
                                                  "/var/run/secrets/kubernetes.io/serviceaccount");

// The files of `cfg` read again while vipd runs, as {what, path}: the token
// file before every request (it rotates), and the CA, client certificate and
// key files at every TLS handshake (curl opens them; a reconnect after an API
// server restart is one). Embedded *-data fields are not files.
std::vector<std::pair<std::string, std::string>> runtime_files(const ClientConfig& cfg);

// The kubeconfig path when none is given: $KUBECONFIG (first entry), else ~/.kube/config.
std::string default_kubeconfig_path();

std::string base64_decode(const std::string& in, bool* ok);

struct HttpResult {
  long status = 0;        // HTTP status; 0 when the request failed before one arrived
  std::string error;      // transport error (curl), empty on success
  bool aborted = false;   // the caller stopped the transfer
  bool ok() const { return error.empty() && status >= 200 && status < 300; }
};

// Token-bucket rate limiter for API requests (--api-qps). Thread-safe.
class RateLimiter {
 public:
  explicit RateLimiter(double qps, double burst);
  // Waits for a token; returns false if `stop` became true while waiting.
  bool acquire(const std::atomic<bool>& stop);

 private:
  std::mutex mu_;
  double qps_, burst_, tokens_;
  std::chrono::steady_clock::time_point last_;
};

// The two HTTP calls the reflectors make, behind an interface so that unit
// tests can script the API server's answers and their timing exactly
// (tests/unit/kube/fake_transport.h). ApiClient is the real one. Both calls may
// be made by several threads at once.
class ApiTransport {
 public:
  virtual ~ApiTransport() = default;

  // GET server + path_query; the body is collected (also for error statuses).
  virtual HttpResult get(const std::string& path_query, std::string* body,
                         const std::atomic<bool>& stop, int timeout_s) = 0;

  // Streaming GET: `on_data` receives the body of a 2xx answer chunk by chunk
  // as it arrives (return false to abort); the body of any other status goes to
  // *error_body. The transfer ends when the server closes, after timeout_s, or
  // soon after `stop` is set.
  virtual HttpResult stream(const std::string& path_query,
                            const std::function<bool(const char*, size_t)>& on_data,
                            std::string* error_body, const std::atomic<bool>& stop, int timeout_s) = 0;
};

class ApiClient : public ApiTransport {
 public:
  explicit ApiClient(ClientConfig cfg);
  const ClientConfig& config() const { return cfg_; }

  HttpResult get(const std::string& path_query, std::string* body,
                 const std::atomic<bool>& stop, int timeout_s = 60) override;
  HttpResult stream(const std::string& path_query,
                    const std::function<bool(const char*, size_t)>& on_data,
                    std::string* error_body, const std::atomic<bool>& stop, int timeout_s) override;

 private:
  std::string bearer_token();

  ClientConfig cfg_;
  std::mutex token_mu_;
  std::string cached_token_;
};

// Percent-encodes a query parameter value.
std::string url_encode(const std::string& s);

}  // namespace vipd::cp::kube
