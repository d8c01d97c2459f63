// Section 11, the victim under attack (docs/reliability.md, "Under attack"): what
// each attack of the security audit costs a user within their limits. For each attack a
// fresh hurrayd (sockets open to every uid, as the adversarial tests run it); the attack
// agent (hurray_attack_agent, tests/testing) drops to uid 65534 and puts the attack in
// place; while it holds it, a victim worker (root) hands tensors over. Figures: the victim's
// publish and acquire latency on that daemon before the attack and under it, and their
// ratios. Needs root
// (the attacker must be another uid); a note says so otherwise.
//
// Worker role:
//   attack-victim SOCKET NAME M   M + 1 rounds of: allocate a 4 KiB tensor, write it and
//                                 publish it under NAME (superseding); acquire NAME (the
//                                 new version: a round trip to the daemon), read its bytes,
//                                 release. Prints "publish_ns" and "acquire_ns" for all but
//                                 the first round.
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <string_view>

#include "hurray/errno_error.h"
#include "memory_touch.h"
#include "sections.h"
#include "system_info.h"

namespace hurray::bench {
namespace {

constexpr int kSection = 11;
constexpr auto kWorkerTimeout = std::chrono::seconds(300);
constexpr auto kAttackSetUp = std::chrono::seconds(300);
constexpr double kNanosecondsToMicroseconds = 1e-3;
constexpr std::uint64_t kVictimBytes = 4096;
constexpr std::uint64_t kPoolBytes = std::uint64_t{256} << 20;
constexpr char kAttackerUid[] = "65534";

struct Attack {
  std::string_view agent_attack;  // hurray_attack_agent's ATTACK.
  int count;                      // Its N.
  std::string_view key;           // The figures' key.
  std::string_view label;         // Short, for the figures' labels: the audit's item first.
};

// The audit's attacks that make the daemon hold something while the victim works (the
// ones refused outright, such as a crafted file, hold nothing to measure).
constexpr Attack kAttacks[] = {
    {"dup-batch-wait", 30000, "dup_batch_wait", "#1 a waiting batch lists a name 30,000x"},
    {"pins", 16, "pins_16", "#2 16 clients pin 960 old versions"},
    {"pins", 64, "pins_64", "#2 64 clients pin 3,840 old versions"},
    {"fd-trickle", 5000, "fd_trickle", "#3 5,000 descriptors in one frame"},
    {"grpc-connections", 400, "grpc_connections", "#4 400 gRPC connections"},
    {"watchers", 20, "watchers", "#6 20 watchers never read"},
    {"waits", 5000, "waits", "#14 5,000 hour-long waits"},
    {"stalled-frames", 64, "stalled_frames", "#15 64 stalled 1 MiB frames"},
};

// A hurrayd whose sockets (and their directory) every uid may reach.
Result<std::unique_ptr<testing::DaemonProcess>> StartOpenDaemon(const Harness& harness) {
  HURRAY_ASSIGN_OR_RETURN(
      std::unique_ptr<testing::DaemonProcess> daemon,
      testing::DaemonProcess::Start(
          {.binary = harness.options().hurrayd_path,
           .name = "hurray-bench-attacks",
           .pool_capacity_bytes = kPoolBytes,
           .settings = {"socket_mode = \"0666\"", "session_socket_mode = \"0666\""}}));
  if (::chmod(daemon->directory().c_str(), 0755) != 0) {
    return ErrnoFailure("chmod", daemon->directory(), errno);
  }
  return daemon;
}

// The victim's publish and acquire latencies (ns) against `socket`.
struct VictimSamples {
  std::vector<double> publish_ns;
  std::vector<double> acquire_ns;
};

Result<VictimSamples> RunVictim(Harness& harness, const std::string& socket) {
  HURRAY_ASSIGN_OR_RETURN(WorkerResults victim,
                          harness.RunWorker(Placement::kUnpinned,
                                            {"attack-victim", socket, "victim/t",
                                             std::to_string(harness.scale().attack_rounds)},
                                            kWorkerTimeout));
  return VictimSamples{.publish_ns = victim.Values("publish_ns"),
                       .acquire_ns = victim.Values("acquire_ns")};
}

void AddVictimFigures(Report& report, std::string_view key, std::string_view label,
                      const VictimSamples& samples) {
  const auto add = [&](std::string_view figure, const std::vector<double>& values) {
    report.AddFigure(FigureSpec{.key = fmt::format("attacks.{}.{}", key, figure),
                                .section = kSection,
                                .label = fmt::format("victim {}, {}", figure, label),
                                .unit = "us"},
                     Placement::kUnpinned, Scaled(Summarize(values), kNanosecondsToMicroseconds));
  };
  add("publish", samples.publish_ns);
  add("acquire", samples.acquire_ns);
}

}  // namespace

int AttackVictimRole(const WorkerArgs& args) {
  const std::string& socket = Arg(args, 0, "SOCKET");
  const std::string& name = Arg(args, 1, "NAME");
  const auto rounds = static_cast<int>(ArgNumber(args, 2, "M"));
  auto client = ConnectWarm(socket, "attack-victim");
  const TensorDescriptor descriptor = BytesTensor(kVictimBytes);
  std::vector<std::int64_t> publish;
  std::vector<std::int64_t> acquire;
  std::uint64_t sum = 0;
  for (int i = 0; i <= rounds; ++i) {
    const std::int64_t start = NowNanoseconds();
    WritableTensor tensor = CheckOk(client->Allocate(descriptor), "Allocate");
    FillPattern(tensor.buffer(0));
    (void)CheckOk(tensor.Publish(name), "Publish");
    const std::int64_t published = NowNanoseconds();
    TensorView view = CheckOk(client->Acquire(name), "Acquire");
    for (std::byte byte : view.buffer(0)) sum += std::to_integer<std::uint64_t>(byte);
    CheckOk(view.Release(), "Release");
    const std::int64_t released = NowNanoseconds();
    if (i > 0) {
      publish.push_back(published - start);
      acquire.push_back(released - published);
    }
  }
  (void)CheckOk(client->Delete(name), "Delete");
  EmitValue("byte_sum", static_cast<double>(sum));  // Keeps the reads.
  EmitSamples("publish_ns", publish);
  EmitSamples("acquire_ns", acquire);
  return 0;
}

Status RunUnderAttack(Harness& harness) {
  Report& report = harness.report();
  if (::geteuid() != 0) {
    report.AddNote(kSection,
                   "Not run: the attacker runs as another uid (65534), which needs root.");
    return {};
  }
  // The harness's own daemon is not used: each attack gets a fresh one, and the victim
  // works on it first with no attack (its baseline: same daemon, same minute).
  HURRAY_RETURN_IF_ERROR(harness.StopDaemon());
  HURRAY_RETURN_IF_ERROR(harness.Place(Placement::kUnpinned));
  for (const Attack& attack : kAttacks) {
    harness.Progress(fmt::format("section 11: {}", attack.label));
    HURRAY_ASSIGN_OR_RETURN(std::unique_ptr<testing::DaemonProcess> daemon,
                            StartOpenDaemon(harness));
    HURRAY_ASSIGN_OR_RETURN(VictimSamples before, RunVictim(harness, daemon->socket_path()));
    const std::string baseline_key = fmt::format("{}.no_attack", attack.key);
    AddVictimFigures(report, baseline_key, fmt::format("no attack (before {})", attack.label),
                     before);
    HURRAY_ASSIGN_OR_RETURN(testing::ChildProcess attacker,
                            testing::ChildProcess::Start(
                                {HURRAY_ATTACK_AGENT_PATH, kAttackerUid, daemon->socket_path(),
                                 std::string(attack.agent_attack), std::to_string(attack.count)},
                                {.stdin_pipe = true}));
    const std::optional<std::string> ready = attacker.ReadLine(kAttackSetUp);
    if (!ready || !ready->starts_with("READY")) {
      return InternalError(fmt::format("attack {} {} was not put in place: {}", attack.agent_attack,
                                       attack.count, ready.value_or("no line")));
    }
    HURRAY_ASSIGN_OR_RETURN(VictimSamples under, RunVictim(harness, daemon->socket_path()));
    AddVictimFigures(report, attack.key, attack.label, under);
    report.AddNote(kSection, fmt::format("{}: the attacker saw: {}", attack.label,
                                         ready->substr(std::string_view("READY ").size())));
    attacker.Kill();
    HURRAY_RETURN_IF_ERROR(daemon->Stop());
    for (std::string_view figure : {"publish", "acquire"}) {
      report.AddRatio(
          RatioSpec{.key = fmt::format("attacks.ratio.{}.{}", attack.key, figure),
                    .section = kSection,
                    .label = fmt::format("{} under attack / before, {}", figure, attack.label),
                    .numerator = fmt::format("attacks.{}.{}", attack.key, figure),
                    .denominator = fmt::format("attacks.{}.{}", baseline_key, figure),
                    .target = std::nullopt});
    }
  }
  report.AddNote(kSection,
                 "Unpinned, a fresh hurrayd (256 MiB pool) per attack; the victim (root) works "
                 "on it once before the attack, then while the attacker (uid 65534) holds what "
                 "it set up. publish: allocate + "
                 "write + publish of 4 KiB (two round trips); acquire: acquire of the new "
                 "version + read + release. #N: the security audit's item. The adversarial tests "
                 "(docs/reliability.md) check the same attacks for liveness and bounds; this "
                 "section only measures.");
  return {};
}

}  // namespace hurray::bench
