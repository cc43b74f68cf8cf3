// vipd_bench: the benchmark programs of docs/benchmarks.md.
//   vipd_bench pipeline [--services N] [--flows N] [--packets N] [--reps N]
//                       [--proto tcp|udp] [--fwd fnat|nat] [--backends N]
//                       [--family 4|6]  (6: IPv6 VIP, endpoints, clients and local addresses)
//                       [--phases fill,est,reply,newconn,baseline,l3fwd] [--no-prefault]
//                       [--no-warmup] [--hugepages | --huge-dir DIR] [--mem MB]
//                       [--resteer-attempts N]  (0: re-steering off; default: the daemon's)
//                       [--rss-queues N]  (fnat: RSS steering of local ports as for worker 0 of N queues; default off)
//                       [--clock tsc|virtual]  (w.now: the TSC at each poll, or the bench's clock,
//                                               100 ns a packet; default: virtual under valgrind)
//   vipd_bench cp [--services N] [--endpoints N] [--changes N]
//                 [--worker running|offline] [--hugepages] [--mem MB]
//   vipd_bench sync [--services N] [--endpoints N] [--changes N] [--baseline-changes N]
//                   [--worker running|offline]
//   vipd_bench decode [--mb N] [--endpoints N] [--reps N]
//   vipd_bench memfloor [--services N] [--flows N] [--backends N] [--chain-mb N]
//                       [--max-chain N] [--packets N] [--reps N]
//                       [--hugepages | --huge-dir DIR]
//   vipd_bench ipt [--services N] [--endpoints N] [--changes N] [--full-reps N]
//                  [--iptables legacy] [--backend iptables|nftables] [--timeout-s S]
//                  (iptables mode; only inside a private network namespace)
// Each prints one JSON object on one line (scripts/bench.sh collects them).
// Everything stays in-process: the only port is the net_ring0 vdev (ipt runs
// the iptables commands, in the network namespace it is started in).
#include <cstdio>
#include <string>

#include "bench/bench_util.h"

namespace vipd::bench {
int run_pipeline(const Args& a);
int run_cp(const Args& a);
int run_sync(const Args& a);
int run_decode(const Args& a);
int run_ipt(const Args& a);
int run_memfloor(const Args& a);
}  // namespace vipd::bench

int main(int argc, char** argv) {
  const std::string cmd = argc > 1 ? argv[1] : "";
  vipd::bench::Args args(argc, argv, 2);
  int rc;
  if (cmd == "pipeline") {
    rc = vipd::bench::run_pipeline(args);
  } else if (cmd == "cp") {
    rc = vipd::bench::run_cp(args);
  } else if (cmd == "sync") {
    rc = vipd::bench::run_sync(args);
  } else if (cmd == "decode") {
    rc = vipd::bench::run_decode(args);
  } else if (cmd == "ipt") {
    rc = vipd::bench::run_ipt(args);
  } else if (cmd == "memfloor") {
    rc = vipd::bench::run_memfloor(args);
  } else {
    fprintf(stderr, "usage: vipd_bench pipeline|cp|sync|decode|ipt|memfloor [--options] (see bench/vipd_bench.cc)\n");
    return 2;
  }
  vipd::bench::eal_stop();
  return rc;
}
