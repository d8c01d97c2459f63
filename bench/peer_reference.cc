// The peer to beat: Apache Arrow's Plasma store. These are CONSTANTS, not measured by this
// benchmark; each is printed beside our figure of the same placement, with ours / theirs.
//
// Most come from the side-by-side run of docs/performance.md ("Against Plasma, side by side"):
// Plasma 11.0.0 built from source, timed by its own client benchmark, and hurray's bench, on
// the same 2-vCPU AMD EPYC VM in the same hour (medians). The raw unix-socket round trip of
// that hour is among them, so a run can tell whether its machine is like that one. The 1 GiB
// reads and the empty gRPC call were measured earlier, on another machine; a range there is
// compared at its better end (the harder bar).
#include <fmt/format.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>

#include "sections.h"

namespace hurray::bench {
namespace {

constexpr std::string_view kSideBySide =
    "side-by-side run of docs/performance.md, same 2-vCPU AMD EPYC VM and hour as hurray, "
    "Plasma 11.0.0 built from source, its own client benchmark, median";

std::string SideBySide(std::string_view what) {
  return std::string(what) + " (" + std::string(kSideBySide) + ")";
}

// Plasma's get+release and its rates against our acquire+release figures whose keys carry
// `suffix` ("" for the client's default, "_slow_path"); `what` is added to the labels.
void AddGetRelease(Report& report, const std::string& suffix, const std::string& what) {
  report.AddPeerReference(PeerReferenceSpec{
      .key = "plasma.get_release" + suffix,
      .label = "get+release vs acquire+release" + what,
      .unit = "us",
      .ours = "control.acquire_release" + suffix,
      .pinned = 30.0,
      .unpinned = 20.0,
      .source = SideBySide("Plasma get+release: 30.0 us pinned, 20.0 us unpinned")});
  for (const auto& [clients, pinned, unpinned] :
       {std::tuple{1, 39'300.0, 47'200.0}, std::tuple{4, 33'900.0, 59'700.0}}) {
    const std::string_view client_word = clients == 1 ? "client" : "clients";
    report.AddPeerReference(PeerReferenceSpec{
        .key = fmt::format("plasma.get_release_rate_{}_{}{}", clients, client_word, suffix),
        .label =
            fmt::format("get+release/s vs acquire+release/s, {} {}{}", clients, client_word, what),
        .unit = "pairs/s",
        .ours = fmt::format("throughput.acquire_release{}.{}_clients", suffix, clients),
        .pinned = pinned,
        .unpinned = unpinned,
        .higher_is_better = true,
        .source = SideBySide(fmt::format(
            "Plasma: {:.1f}k pairs/s pinned, {:.1f}k unpinned from {}", pinned / 1000,
            unpinned / 1000, clients == 1 ? "one client process" : "four client processes"))});
  }
}

void AddSideBySide(Harness& harness) {
  Report& report = harness.report();
  report.AddPeerReference(PeerReferenceSpec{
      .key = "plasma.raw_uds_round_trip",
      .label = "raw unix-socket round trip, that hour",
      .unit = "us",
      .ours = "control.raw_uds_round_trip",
      .pinned = 5.9,
      .unpinned = 7.3,
      .source = SideBySide("the machine's raw round trip: 5.9 us pinned, 7.3 us unpinned (a "
                           "check that this run's machine is like that hour's)")});
  AddGetRelease(report, "", " (client default)");
  AddGetRelease(report, "_slow_path", " (session socket)");
  report.AddPeerReference(PeerReferenceSpec{
      .key = "plasma.create_seal_4KiB",
      .label = "create+seal vs allocate+publish, 4 KiB",
      .unit = "us",
      .ours = "size.producer_steady.4KiB",
      .pinned = 44.7,
      .unpinned = 37.8,
      .source = SideBySide("Plasma create+seal at 4 KiB: 44.7 us pinned, 37.8 us unpinned")});
  // The same create+seal as a rate (1 / its median), against section 4's publish rates.
  for (const auto& [suffix, what] : {std::pair{"", ""}, std::pair{"_streaming", ", streamed"}}) {
    report.AddPeerReference(PeerReferenceSpec{
        .key = fmt::format("plasma.create_seal_rate_4KiB{}", suffix),
        .label = fmt::format("create+seal/s vs allocate+publish/s, 4 KiB, 1 process{}", what),
        .unit = "tensors/s",
        .ours = fmt::format("throughput.publish_4KiB{}.1_clients", suffix),
        .pinned = 1e6 / 44.7,
        .unpinned = 1e6 / 37.8,
        .higher_is_better = true,
        .source = SideBySide("Plasma create+seal at 4 KiB, as a rate: 1 / 44.7 us pinned, "
                             "1 / 37.8 us unpinned")});
  }
  if (harness.scale().tensor_sizes.back() == (std::uint64_t{1} << 30)) {
    report.AddPeerReference(PeerReferenceSpec{
        .key = "plasma.create_seal_1GiB",
        .label = "create+seal vs allocate+publish, 1 GiB",
        .unit = "us",
        .ours = "size.producer_steady.1GiB",
        .pinned = 123'000,
        .unpinned = 66'000,
        .source = SideBySide("Plasma create+seal of 1 GiB: 123 ms pinned, 66 ms unpinned")});
  }
}

void AddFromAnotherMachine(Harness& harness) {
  Report& report = harness.report();
  if (harness.scale().read_bytes == (std::uint64_t{1} << 30)) {
    report.AddPeerReference(PeerReferenceSpec{
        .key = "plasma.first_read_1GiB",
        .label = "consumer's first read of a fresh 1 GiB",
        .unit = "ms",
        .ours = "bytes.hurray_first_total",
        .pinned = 141,
        .unpinned = 141,
        .source = "earlier, another machine: Plasma's first read of a fresh 1 GiB object "
                  "141-158 ms; compared at 141 ms"});
    report.AddPeerReference(PeerReferenceSpec{
        .key = "plasma.warm_read_1GiB",
        .label = "warm read of 1 GiB",
        .unit = "ms",
        .ours = "bytes.hurray_repeat_total",
        .pinned = 95,
        .unpinned = 95,
        .source = "earlier, another machine: Plasma's warm read of 1 GiB 95-103 ms; compared "
                  "at 95 ms"});
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
      .source = "earlier, another machine: an empty gRPC unary call over a unix socket costs "
                "75-100 us; compared at 75 us"});
}

}  // namespace

void AddPeerReferences(Harness& harness) {
  AddSideBySide(harness);
  AddFromAnotherMachine(harness);
}

}  // namespace hurray::bench
