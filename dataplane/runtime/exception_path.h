// Thread: control (set-up, snapshots) and the exception thread (run()).
// The kernel exception path (docs/gateway.md): for each port a DPDK net_tap
// device, i.e. a kernel tap interface carrying the port's MAC, and one thread
// that moves frames between the workers and those interfaces:
//   workers --Shared::exc_to_kernel--> token bucket --> tap tx (kernel rx)
//   tap rx (kernel tx) --Shared::exc_from_kernel--> worker 0 --> port tx
// The workers only enqueue (and worker 0 drains once per poll): no worker
// ever waits on the kernel. The tap interfaces are not persistent: they go
// when the process does, and with them every address and route on them.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

struct rte_mempool;
struct rte_ring;

namespace vipd::dp {

struct Shared;

// Counters of one port's exception path (written by the exception thread).
struct ExceptionCounters {
  std::atomic<uint64_t> to_kernel{0};     // frames written to the interface
  std::atomic<uint64_t> from_kernel{0};   // frames the kernel sent, queued for the port
  std::atomic<uint64_t> rate_limited{0};  // to the kernel, over --exception-pps
  std::atomic<uint64_t> kernel_full{0};   // to the kernel, the tap refused them
  std::atomic<uint64_t> from_kernel_full{0};  // from the kernel, the ring to worker 0 was full
};

class ExceptionRelay {
 public:
  struct Port {
    std::string ifname;
    uint16_t tap_port_id = 0;  // the net_tap ethdev
    ExceptionCounters counters;
  };

  ExceptionRelay() = default;
  ~ExceptionRelay() { stop(); }
  ExceptionRelay(const ExceptionRelay&) = delete;
  ExceptionRelay& operator=(const ExceptionRelay&) = delete;

  // The EAL --vdev arguments of the tap devices of n_ports ports.
  static std::vector<std::string> eal_vdevs(const std::vector<std::string>& ifnames, size_t n_ports);

  // After the ports are started (their MACs known): finds the tap devices the
  // EAL probed (eal_vdevs), gives each its port's MAC, starts it (the
  // interface comes up) and creates the rings (set in sh). False + *error.
  bool init(Shared& sh, rte_mempool* pool, const std::vector<std::string>& ifnames, uint32_t pps,
            std::string* error);
  void start();  // the exception thread
  void stop();   // joins the thread, closes the tap devices (their interfaces go)

  const std::vector<std::unique_ptr<Port>>& ports() const { return ports_; }

 private:
  void run();
  bool pump_to_kernel(uint64_t now_ns);
  bool pump_from_kernel();

  Shared* sh_ = nullptr;
  std::vector<std::unique_ptr<Port>> ports_;  // index = port index in Shared::ports
  uint32_t pps_ = 0;
  // Token bucket, in nano-tokens (one frame = 1e9): refilled at pps per second
  // up to `burst` frames.
  uint64_t tokens_ = 0, bucket_ = 0, last_ns_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  bool started_ = false, closed_ = false;
};

// The default name of port i's kernel interface.
std::string exception_ifname(const std::vector<std::string>& names, size_t i);

}  // namespace vipd::dp
