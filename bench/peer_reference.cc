// The peer to beat: Apache Arrow's Plasma store, measured on this kind of machine and quoted
// in issue 4 (medians), and the figure for an empty gRPC call. These are CONSTANTS,
// not measured by this benchmark; each is printed beside our figure of the same placement,
// with ours / theirs. A range is compared at its better end (the harder bar for us).
#include "sections.h"

namespace hurray::bench {

void AddPeerReferences(Harness& harness) {
  Report& report = harness.report();
  report.AddPeerReference(
      PeerReferenceSpec{.key = "plasma.get_release",
                        .label = "get+release vs acquire+release",
                        .unit = "us",
                        .ours = "control.acquire_release",
                        .pinned = 20,
                        .unpinned = 72,
                        .source = "Plasma get+release: 20 us on one CPU, 72 us unpinned"});
  report.AddPeerReference(PeerReferenceSpec{
      .key = "plasma.create_seal_4KiB",
      .label = "create+seal vs allocate+publish, 4 KiB",
      .unit = "us",
      .ours = "size.producer_steady.4KiB",
      .pinned = 42,
      .unpinned = 165,
      .source = "Plasma create+seal at 4 KiB: 42 us on one CPU, 165 us unpinned"});
  if (harness.scale().tensor_sizes.back() == (std::uint64_t{1} << 30)) {
    report.AddPeerReference(PeerReferenceSpec{
        .key = "plasma.create_seal_1GiB",
        .label = "create+seal vs allocate+publish, 1 GiB",
        .unit = "us",
        .ours = "size.producer_steady.1GiB",
        .pinned = 130000,
        .unpinned = 130000,
        .source = "Plasma create+seal: 130-260 ms per GiB (its seal hashes every byte); "
                  "placement not given, compared at 130 ms"});
  }
  report.AddPeerReference(PeerReferenceSpec{
      .key = "plasma.get_release_rate_1_client",
      .label = "get+release/s vs acquire+release/s, 1 client",
      .unit = "pairs/s",
      .ours = "throughput.acquire_release.1_clients",
      .pinned = 13000,
      .unpinned = 13000,
      .higher_is_better = true,
      .source = "Plasma: 13k get+release pairs/s from one client; placement not given"});
  report.AddPeerReference(PeerReferenceSpec{
      .key = "plasma.get_release_rate_4_clients",
      .label = "get+release/s vs acquire+release/s, 4 clients",
      .unit = "pairs/s",
      .ours = "throughput.acquire_release.4_clients",
      .pinned = 55000,
      .unpinned = 55000,
      .higher_is_better = true,
      .source = "Plasma: 42-55k pairs/s from four clients; placement not given, compared at 55k"});
  if (harness.scale().read_bytes == (std::uint64_t{1} << 30)) {
    report.AddPeerReference(PeerReferenceSpec{
        .key = "plasma.first_read_1GiB",
        .label = "consumer's first read of a fresh 1 GiB",
        .unit = "ms",
        .ours = "bytes.hurray_first_total",
        .pinned = 141,
        .unpinned = 141,
        .source = "Plasma: first read of a fresh 1 GiB object 141-158 ms; compared at 141 ms"});
    report.AddPeerReference(
        PeerReferenceSpec{.key = "plasma.warm_read_1GiB",
                          .label = "warm read of 1 GiB",
                          .unit = "ms",
                          .ours = "bytes.hurray_repeat_total",
                          .pinned = 95,
                          .unpinned = 95,
                          .source = "Plasma: warm read of 1 GiB 95-103 ms; compared at 95 ms"});
  } else {
    report.AddNote(2, "the 1 GiB peer reference figures are left out: this run read " +
                          std::to_string(harness.scale().read_bytes >> 20) + " MiB");
  }
  report.AddPeerReference(PeerReferenceSpec{
      .key = "issue.grpc_empty_call",
      .label = "empty gRPC unary call (our own server)",
      .unit = "us",
      .ours = "control.grpc_empty_call",
      .pinned = 75,
      .unpinned = 75,
      .source = "issue 4: an empty gRPC unary call over a unix socket costs 75-100 us here; "
                "compared at 75 us (a check that this machine is like the issue's)"});
}

}  // namespace hurray::bench
