// Thread: any. Counted reasons for every packet the dataplane does not forward.
#pragma once

#include <cstdint>

namespace vipd::dp {

#define VIPD_DROP_REASONS(X)                                                  \
  X(kTruncated, "truncated")                 /* shorter than its headers */   \
  X(kBadEthertype, "unsupported_ethertype")  /* not IPv4/IPv6/ARP */          \
  X(kNotForUs, "not_for_us")                 /* destination MAC not ours */   \
  X(kBadIpHeader, "bad_ip_header")           /* version, IHL, lengths */      \
  X(kBadIpChecksum, "bad_ip_checksum")                                        \
  X(kFragment, "ip_fragment")                /* fragments are not NATed */    \
  X(kTtlExceeded, "ttl_exceeded")                                             \
  X(kBadL4Header, "bad_l4_header")                                            \
  X(kUnsupportedProto, "unsupported_protocol")                                \
  X(kNoService, "no_service")                /* not a VIP, not a reply */     \
  X(kVipNoPort, "vip_port_not_served")       /* VIP address, unknown port */  \
  X(kNoConn, "no_connection")                /* mid-flow TCP without entry */ \
  X(kNoEndpointsDrop, "no_endpoints_drop")   /* when_empty = drop */          \
  X(kConnTableFull, "conn_table_full")                                        \
  X(kConnKeyInUse, "conn_key_in_use")        /* reply tuple already taken */  \
  X(kFnatPortsExhausted, "fnat_ports_exhausted")                              \
  X(kDestExpired, "dest_expired")            /* reply for a removed dest */   \
  X(kNoRoute, "no_route")                                                     \
  X(kNeighQueueFull, "neigh_queue_full")                                      \
  X(kNeighUnresolved, "neigh_unresolved")                                     \
  X(kRedirectRingFull, "redirect_ring_full")                                  \
  X(kTxFull, "tx_queue_full")                                                 \
  X(kArpIgnored, "arp_ignored")              /* ARP not for us / malformed */ \
  X(kLocalUnhandled, "local_unhandled")      /* to a port address, not ping */ \
  X(kSourceNotAllowed, "source_not_allowed") /* loadBalancerSourceRanges */ \
  X(kIcmpErrorNoConn, "icmp_error_no_conn")  /* ICMP error quoting no flow */ \
  X(kProxyPoolFull, "proxy_pool_full")       /* no PROXY protocol state left */ \
  X(kProxyHeaderNoRoom, "proxy_header_no_room") /* header would not fit */ \
  X(kIpv6BadHeader, "ipv6_bad_header")       /* version, payload length */    \
  X(kIpv6BadExtHeader, "ipv6_bad_ext_header") /* truncated, misplaced */      \
  X(kIpv6ExtChainTooLong, "ipv6_ext_chain_too_long")                          \
  X(kIpv6Fragment, "ipv6_fragment")          /* not atomic: not NATed */      \
  X(kIpv6NoService, "ipv6_no_service")       /* no IPv6 VIP nor connection */ \
  X(kNdpInvalid, "ndp_invalid")              /* NS/NA failing RFC 4861 7.1 */ \
  X(kNdpIgnored, "ndp_ignored")              /* not for us, RS/RA/redirect */ \
  X(kIcmp6BadChecksum, "icmp6_bad_checksum") /* to a port address */     \
  X(kExceptionQueueFull, "exception_queue_full") /* kernel path ring full */ \
  X(kHandoverNotHeld, "handover_not_held")   /* from a peer: not our flow */  \
  X(kHandoverRateLimited, "handover_rate_limited") /* hand-over over its rate */ \
  X(kHandoverNotPeer, "handover_not_peer")   /* 0x88b5 not from a peer's MAC */ \
  X(kHandoverNoMbuf, "handover_no_mbuf")     /* pool empty: a peer's copy not made */

enum DropReason : uint8_t {
#define VIPD_X(e, s) e,
  VIPD_DROP_REASONS(VIPD_X)
#undef VIPD_X
  kNumDropReasons
};

inline const char* drop_reason_name(unsigned r) {
  static const char* const kNames[] = {
#define VIPD_X(e, s) s,
      VIPD_DROP_REASONS(VIPD_X)
#undef VIPD_X
  };
  return r < kNumDropReasons ? kNames[r] : "unknown";
}

}  // namespace vipd::dp
