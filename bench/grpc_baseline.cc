#include "grpc_baseline.h"

#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <algorithm>
#include <span>
#include <vector>

#include "grpc/health/v1/health.grpc.pb.h"
#include "hurray/bench/v1/bench_peer.grpc.pb.h"
#include "memory_touch.h"

namespace hurray::bench {
namespace {

namespace peer = hurray::bench::v1;

constexpr int kWarmUpCalls = 100;

// Streams [0, total) of `bytes` in messages of `chunk` bytes.
class StreamReactor final : public grpc::ServerWriteReactor<peer::BytesChunk> {
 public:
  StreamReactor(std::span<const std::byte> bytes, std::uint64_t total, std::uint64_t chunk)
      : bytes_(bytes), total_(total), chunk_bytes_(chunk) {
    if (total > bytes.size() || chunk == 0) {
      Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "total_bytes " + std::to_string(total) + " or chunk_bytes " +
                              std::to_string(chunk) + " out of range"));
      return;
    }
    NextWrite();
  }

  void OnWriteDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "the client went away"));
      return;
    }
    NextWrite();
  }

  void OnDone() override { delete this; }

 private:
  void NextWrite() {
    if (offset_ >= total_) {
      Finish(grpc::Status::OK);
      return;
    }
    const std::uint64_t size = std::min(chunk_bytes_, total_ - offset_);
    chunk_.set_data(reinterpret_cast<const char*>(bytes_.data() + offset_), size);
    offset_ += size;
    StartWrite(&chunk_);
  }

  std::span<const std::byte> bytes_;
  const std::uint64_t total_;
  const std::uint64_t chunk_bytes_;
  std::uint64_t offset_ = 0;
  peer::BytesChunk chunk_;
};

// BenchPeer on the callback API, as hurrayd serves Exchange. Thread-safe (immutable).
class PeerService final : public peer::BenchPeer::CallbackService {
 public:
  explicit PeerService(std::span<const std::byte> bytes) : bytes_(bytes) {}

  grpc::ServerUnaryReactor* Empty(grpc::CallbackServerContext* context,
                                  const peer::EmptyMessage* /*request*/,
                                  peer::EmptyMessage* /*response*/) override {
    auto* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

  grpc::ServerWriteReactor<peer::BytesChunk>* StreamBytes(
      grpc::CallbackServerContext* /*context*/, const peer::StreamBytesRequest* request) override {
    return new StreamReactor(bytes_, request->total_bytes(), request->chunk_bytes());
  }

 private:
  std::span<const std::byte> bytes_;
};

// A channel made the way the hurray client makes its own (client/src/connection.cc).
std::shared_ptr<grpc::Channel> UnixChannel(const std::string& socket) {
  grpc::ChannelArguments arguments;
  arguments.SetMaxReceiveMessageSize(-1);
  return grpc::CreateCustomChannel("unix:" + socket, grpc::InsecureChannelCredentials(), arguments);
}

}  // namespace

int GrpcServerRole(const WorkerArgs& args) {
  const std::string& socket = Arg(args, 0, "SOCKET");
  const std::uint64_t bytes = ArgNumber(args, 1, "BYTES");
  std::vector<std::byte> tensor(bytes);
  FillPattern(tensor);
  PeerService service(tensor);
  ::unlink(socket.c_str());
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix:" + socket, grpc::InsecureServerCredentials());
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server) WorkerFail("cannot serve on unix:" + socket);
  std::printf("ready\n");
  std::fflush(stdout);
  server->Wait();
  return 0;
}

int GrpcEmptyCallRole(const WorkerArgs& args) {
  const std::string& socket = Arg(args, 0, "SOCKET");
  const auto count = static_cast<int>(ArgNumber(args, 1, "N"));
  const std::string& service = Arg(args, 2, "SERVICE");
  auto channel = UnixChannel(socket);
  std::function<grpc::Status()> call;
  auto peer_stub = peer::BenchPeer::NewStub(channel);
  auto health_stub = grpc::health::v1::Health::NewStub(channel);
  if (service == "peer") {
    call = [&] {
      grpc::ClientContext context;
      peer::EmptyMessage request, response;
      return peer_stub->Empty(&context, request, &response);
    };
  } else if (service == "health") {
    call = [&] {
      grpc::ClientContext context;
      grpc::health::v1::HealthCheckRequest request;
      grpc::health::v1::HealthCheckResponse response;
      return health_stub->Check(&context, request, &response);
    };
  } else {
    WorkerFail("SERVICE must be peer or health, not " + service);
  }
  std::vector<std::int64_t> samples;
  samples.reserve(static_cast<std::size_t>(count));
  for (int i = 0; i < kWarmUpCalls + count; ++i) {
    const std::int64_t start = NowNanoseconds();
    const grpc::Status status = call();
    const std::int64_t elapsed = NowNanoseconds() - start;
    if (!status.ok()) WorkerFail(service + " call: " + status.error_message());
    if (i >= kWarmUpCalls) samples.push_back(elapsed);
  }
  EmitSamples("round_trip_ns", samples);
  return 0;
}

int GrpcBytesRole(const WorkerArgs& args) {
  const std::string& socket = Arg(args, 0, "SOCKET");
  const std::uint64_t bytes = ArgNumber(args, 1, "BYTES");
  const std::uint64_t chunk = ArgNumber(args, 2, "CHUNK");
  const auto repetitions = static_cast<int>(ArgNumber(args, 3, "R"));
  auto stub = peer::BenchPeer::NewStub(UnixChannel(socket));
  {
    // Connects the channel, untimed, as the hurray consumer's is (ConnectWarm).
    grpc::ClientContext context;
    peer::EmptyMessage request, response;
    const grpc::Status status = stub->Empty(&context, request, &response);
    if (!status.ok()) WorkerFail("Empty: " + status.error_message());
  }
  for (int repetition = 0; repetition < repetitions; ++repetition) {
    const std::int64_t start = NowNanoseconds();
    grpc::ClientContext context;
    peer::StreamBytesRequest request;
    request.set_total_bytes(bytes);
    request.set_chunk_bytes(chunk);
    auto reader = stub->StreamBytes(&context, request);
    peer::BytesChunk message;
    std::uint64_t checksum = 0;
    std::uint64_t received = 0;
    while (reader->Read(&message)) {
      const std::string& data = message.data();
      checksum += ReadEveryByte(std::as_bytes(std::span(data.data(), data.size())));
      received += data.size();
    }
    const grpc::Status status = reader->Finish();
    const std::int64_t elapsed = NowNanoseconds() - start;
    if (!status.ok()) WorkerFail("StreamBytes: " + status.error_message());
    if (received != bytes) {
      WorkerFail("StreamBytes sent " + std::to_string(received) + " of " + std::to_string(bytes) +
                 " bytes");
    }
    if (checksum != PatternChecksum(bytes)) WorkerFail("StreamBytes: the bytes differ");
    EmitValue(repetition == 0 ? "first_ns" : "repeat_ns", static_cast<double>(elapsed));
  }
  return 0;
}

}  // namespace hurray::bench
