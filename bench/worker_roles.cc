// The table of worker roles: `hurray_bench worker ROLE ARGS...` runs one of these.
#include <string_view>

#include "echo_server.h"
#include "grpc_baseline.h"
#include "redis_baseline.h"
#include "sections.h"
#include "worker.h"

namespace hurray::bench {
namespace {

struct Role {
  std::string_view name;
  int (*run)(const WorkerArgs& args);
};

constexpr Role kRoles[] = {
    {"echo-server", EchoServerRole},
    {"socket-round-trip", SocketRoundTripRole},
    {"grpc-server", GrpcServerRole},
    {"grpc-empty-call", GrpcEmptyCallRole},
    {"grpc-bytes", GrpcBytesRole},
    {"redis-get", RedisGetRole},
    {"size-producer", SizeProducerRole},
    {"size-consumer", SizeConsumerRole},
    {"bytes-hurray", BytesHurrayRole},
    {"bytes-local", BytesLocalRole},
    {"control-acquire-release", ControlAcquireReleaseRole},
    {"handoff-producer", HandoffProducerRole},
    {"handoff-consumer", HandoffConsumerRole},
    {"throughput-acquire", ThroughputAcquireRole},
    {"throughput-publish", ThroughputPublishRole},
    {"scale-publish", ScalePublishRole},
    {"scale-inspect", ScaleInspectRole},
    {"model-publish", ModelPublishRole},
    {"model-batch", ModelBatchAcquireRole},
    {"gpu-publish", GpuPublishRole},
    {"gpu-acquire", GpuAcquireRole},
    {"gpu-copy", GpuCopyRole},
    {"files-cat", FilesCatRole},
    {"files-import", FilesImportRole},
    {"files-save", FilesSaveRole},
    {"files-batch", FilesBatchAcquireRole},
    {"files-populate", FilesPopulateRole},
    {"sealed-producer", SealedProducerRole},
    {"sealed-consumer", SealedConsumerRole},
    {"attack-victim", AttackVictimRole},
};

}  // namespace

int RunWorkerRole(int argc, char** argv) {
  if (argc < 1) WorkerFail("no role given");
  const std::string_view name = argv[0];
  const WorkerArgs args(argv + 1, argv + argc);
  for (const Role& role : kRoles) {
    if (role.name == name) {
      const int status = role.run(args);
      std::fflush(stdout);
      return status;
    }
  }
  WorkerFail("unknown role " + std::string(name));
}

}  // namespace hurray::bench
