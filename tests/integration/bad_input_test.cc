// Bad input from clients: invalid descriptors, unknown names, missing or wrong session
// tokens, oversized requests and bad names each get the right gRPC code and a message
// naming the field and value, and the daemon keeps serving with nothing leaked.
//
// Descriptors the client library would refuse to build, and calls with doctored session
// metadata, go through the generated stub directly.
#include <grpcpp/grpcpp.h>

#include <initializer_list>
#include <optional>
#include <string_view>

#include "hurray/descriptor_codec.h"
#include "hurray/v1/exchange.grpc.pb.h"
#include "integration_test.h"
#include "raw_session.h"
#include "test_tensors.h"
#include "testing/status_matchers.h"

namespace hurray::integration {
namespace {

class BadInputTest : public RawGrpcTest {
 protected:
  grpc::Status RawAllocate(const std::optional<std::string>& token,
                           const v1::AllocateRequest& request,
                           v1::AllocateResponse* response = nullptr) {
    v1::AllocateResponse ignored;
    return stub_->Allocate(RawContext(token).get(), request, response ? response : &ignored);
  }
};

v1::AllocateRequest AllocateOf(TensorKind kind) {
  v1::AllocateRequest request;
  *request.mutable_tensor_descriptor() = DescriptorToProto(MakeTestDescriptor(kind));
  return request;
}

TEST_F(BadInputTest, InvalidDescriptorsAreRefusedNamingTheFieldAndValue) {
  auto session = RawSession::Open(daemon().session_socket_path());
  ASSERT_TRUE(session.has_value());
  struct Case {
    std::string what;
    v1::AllocateRequest request;
    grpc::StatusCode code;
    std::vector<std::string> fragments;
  };
  std::vector<Case> cases;
  {
    auto request = AllocateOf(TensorKind::kDense);
    request.mutable_tensor_descriptor()->mutable_buffers(0)->set_byte_size(1048000);
    cases.push_back({"byte_size not the shape's",
                     request,
                     grpc::StatusCode::INVALID_ARGUMENT,
                     {"tensor_descriptor", "buffers[0].byte_size 1048000", "1048576"}});
  }
  {
    auto request = AllocateOf(TensorKind::kDense);
    *request.mutable_tensor_descriptor()->add_buffers() = request.tensor_descriptor().buffers(0);
    cases.push_back({"one buffer too many",
                     request,
                     grpc::StatusCode::INVALID_ARGUMENT,
                     {"buffers[1] is not referenced"}});
  }
  {
    auto request = AllocateOf(TensorKind::kQuantized);
    request.mutable_tensor_descriptor()->mutable_buffers()->RemoveLast();
    cases.push_back({"scale buffer missing",
                     request,
                     grpc::StatusCode::INVALID_ARGUMENT,
                     {"scale_buffer 1", "does not resolve"}});
  }
  {
    auto request = AllocateOf(TensorKind::kCsr);
    request.mutable_tensor_descriptor()->mutable_buffers()->RemoveLast();
    cases.push_back({"CSR column indices missing",
                     request,
                     grpc::StatusCode::INVALID_ARGUMENT,
                     {"secondary_index_buffer 2", "does not resolve"}});
  }
  {
    auto request = AllocateOf(TensorKind::kDense);
    request.mutable_tensor_descriptor()->mutable_dense()->set_data_buffer(7);
    cases.push_back({"layout index out of range",
                     request,
                     grpc::StatusCode::INVALID_ARGUMENT,
                     {"data_buffer 7", "does not resolve"}});
  }
  {
    auto request = AllocateOf(TensorKind::kCsr);
    request.mutable_tensor_descriptor()->mutable_csr()->set_secondary_index_buffer(1);
    cases.push_back({"one buffer in two roles",
                     request,
                     grpc::StatusCode::INVALID_ARGUMENT,
                     {"secondary_index_buffer 1", "already"}});
  }
  {
    auto request = AllocateOf(TensorKind::kDense);
    request.mutable_tensor_descriptor()->mutable_buffers(0)->set_alignment(32);
    cases.push_back(
        {"alignment below 64", request, grpc::StatusCode::INVALID_ARGUMENT, {"alignment 32"}});
  }
  {
    auto request = AllocateOf(TensorKind::kDense);
    request.mutable_tensor_descriptor()->mutable_buffers(0)->set_alignment(1 << 16);
    cases.push_back({"alignment above the page",
                     request,
                     grpc::StatusCode::INVALID_ARGUMENT,
                     {"alignment 65536"}});
  }
  {
    auto request = AllocateOf(TensorKind::kDense);
    request.mutable_tensor_descriptor()->mutable_buffers(0)->set_device_tag(0x01);
    cases.push_back({"CUDA buffer for the CPU pool",
                     request,
                     grpc::StatusCode::FAILED_PRECONDITION,
                     {"buffers[0].device_tag", "cuda"}});
  }
  {
    auto request = AllocateOf(TensorKind::kDense);
    request.mutable_tensor_descriptor()->mutable_buffers(0)->set_device_tag(0x42);
    cases.push_back(
        {"reserved device tag", request, grpc::StatusCode::INVALID_ARGUMENT, {"device_tag"}});
  }
  {
    auto request = AllocateOf(TensorKind::kDense);
    request.mutable_tensor_descriptor()->set_element_type(v1::ELEMENT_TYPE_UNSPECIFIED);
    cases.push_back({"no element type", request, grpc::StatusCode::INVALID_ARGUMENT, {"element"}});
  }
  {
    v1::AllocateRequest request;  // No descriptor at all.
    cases.push_back(
        {"empty descriptor", request, grpc::StatusCode::INVALID_ARGUMENT, {"tensor_descriptor"}});
  }
  {
    auto request = AllocateOf(TensorKind::kDense);
    request.set_pool("gpu9");
    cases.push_back({"unknown pool", request, grpc::StatusCode::NOT_FOUND, {"pool \"gpu9\""}});
  }
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const grpc::Status status = RawAllocate(session->token(), c.request);
    EXPECT_FALSE(status.ok());
    EXPECT_EQ(status.error_code(), c.code) << status.error_message();
    for (const std::string& fragment : c.fragments) {
      EXPECT_NE(status.error_message().find(fragment), std::string::npos)
          << "\"" << status.error_message() << "\" lacks \"" << fragment << "\"";
    }
  }
  // The valid request passes on the same session (the failures are the descriptors').
  v1::AllocateResponse allocated;
  ASSERT_TRUE(RawAllocate(session->token(), AllocateOf(TensorKind::kCsr), &allocated).ok());
  EXPECT_EQ(allocated.buffers_size(), 3);
  EXPECT_EQ(Stats().pending_allocation_count, 1u);
  // Cancelled first: an allocation its session ended with would stay quarantined while this
  // process, which could still write it, lives.
  v1::CancelAllocationRequest cancel;
  cancel.set_allocation_id(allocated.allocation_id());
  v1::CancelAllocationResponse cancelled;
  EXPECT_TRUE(stub_->CancelAllocation(RawContext(session->token()).get(), cancel, &cancelled).ok());
  session.reset();
  ExpectStillServingWithNothingLeaked();
}

TEST_F(BadInputTest, UnknownNamesVersionsAllocationsAndLeasesAreNotFound) {
  EXPECT_ERROR(client().Acquire("it/missing"), StatusCode::kNotFound, {"it/missing"});
  EXPECT_ERROR(client().Describe("it/missing"), StatusCode::kNotFound, {"it/missing"});
  EXPECT_ERROR(client().Delete("it/missing"), StatusCode::kNotFound, {"it/missing"});
  EXPECT_ERROR(client().BatchAcquire({"it/missing"}), StatusCode::kNotFound, {"it/missing"});

  EXPECT_EQ(RunAgent({"produce", "it/present", "dense", "1"}), "version 1\n");
  EXPECT_ERROR(client().Acquire("it/present", {.version = 7}), StatusCode::kNotFound,
               {"it/present", "version 7"});
  EXPECT_ERROR(client().Describe("it/present", 7), StatusCode::kNotFound,
               {"it/present", "version 7"});
  EXPECT_ERROR(client().Delete("it/present", 7), StatusCode::kNotFound, {"it/present", "7"});

  auto session = RawSession::Open(daemon().session_socket_path());
  ASSERT_TRUE(session.has_value());
  v1::PublishRequest publish;
  publish.set_allocation_id(424242);
  publish.set_name("it/ghost");
  v1::PublishResponse published;
  EXPECT_TRUE(GrpcFails(stub_->Publish(RawContext(session->token()).get(), publish, &published),
                        grpc::StatusCode::NOT_FOUND, {"allocation_id 424242"}));
  v1::CancelAllocationRequest cancel;
  cancel.set_allocation_id(424242);
  v1::CancelAllocationResponse cancelled;
  EXPECT_TRUE(
      GrpcFails(stub_->CancelAllocation(RawContext(session->token()).get(), cancel, &cancelled),
                grpc::StatusCode::NOT_FOUND, {"allocation_id 424242"}));
  v1::ReleaseRequest release;
  release.add_lease_ids(777777);
  v1::ReleaseResponse released;
  EXPECT_TRUE(GrpcFails(stub_->Release(RawContext(session->token()).get(), release, &released),
                        grpc::StatusCode::NOT_FOUND, {"lease_id 777777"}));

  // Another session's allocation and lease are not ours to publish, cancel or release.
  v1::AllocateResponse allocated;
  ASSERT_TRUE(RawAllocate(session->token(), AllocateOf(TensorKind::kDense), &allocated).ok());
  auto theirs = Connect("other-session");
  ASSERT_NE(theirs, nullptr);
  auto other = RawSession::Open(daemon().session_socket_path());
  ASSERT_TRUE(other.has_value());
  publish.set_allocation_id(allocated.allocation_id());
  const std::string id = "allocation_id " + std::to_string(allocated.allocation_id());
  EXPECT_TRUE(GrpcFails(stub_->Publish(RawContext(other->token()).get(), publish, &published),
                        grpc::StatusCode::NOT_FOUND, {id}));
  cancel.set_allocation_id(allocated.allocation_id());
  EXPECT_TRUE(
      GrpcFails(stub_->CancelAllocation(RawContext(other->token()).get(), cancel, &cancelled),
                grpc::StatusCode::NOT_FOUND, {id}));
  auto view = client().Acquire("it/present");
  ASSERT_OK(view);
  release.set_lease_ids(0, view->lease_id());
  EXPECT_TRUE(GrpcFails(stub_->Release(RawContext(other->token()).get(), release, &released),
                        grpc::StatusCode::NOT_FOUND,
                        {"lease_id " + std::to_string(view->lease_id())}));
  EXPECT_EQ(Stats().lease_count, 1u);
  EXPECT_TRUE(stub_->CancelAllocation(RawContext(session->token()).get(), cancel, &cancelled).ok());
  EXPECT_EQ(Stats().pending_allocation_count, 0u);
  ASSERT_OK(view->Release());
  ASSERT_OK(client().Delete("it/present"));
  ExpectStillServingWithNothingLeaked();
}

TEST_F(BadInputTest, MissingWrongOrEndedSessionTokensAreUnauthenticated) {
  EXPECT_EQ(RunAgent({"produce", "it/present", "dense", "1"}), "version 1\n");
  auto call_all = [&](const std::optional<std::string>& token,
                      std::initializer_list<std::string_view> fragments) {
    SCOPED_TRACE(token ? "token \"" + *token + "\"" : "no token");
    v1::AllocateResponse allocated;
    EXPECT_TRUE(GrpcFails(
        stub_->Allocate(RawContext(token).get(), AllocateOf(TensorKind::kDense), &allocated),
        grpc::StatusCode::UNAUTHENTICATED, fragments));
    v1::PublishRequest publish;
    publish.set_allocation_id(1);
    publish.set_name("it/x");
    v1::PublishResponse published;
    EXPECT_TRUE(GrpcFails(stub_->Publish(RawContext(token).get(), publish, &published),
                          grpc::StatusCode::UNAUTHENTICATED, fragments));
    v1::AcquireRequest acquire;
    acquire.set_name("it/present");
    v1::AcquireResponse acquired;
    EXPECT_TRUE(GrpcFails(stub_->Acquire(RawContext(token).get(), acquire, &acquired),
                          grpc::StatusCode::UNAUTHENTICATED, fragments));
    v1::BatchAcquireRequest batch;
    batch.add_names("it/present");
    v1::BatchAcquireResponse batched;
    EXPECT_TRUE(GrpcFails(stub_->BatchAcquire(RawContext(token).get(), batch, &batched),
                          grpc::StatusCode::UNAUTHENTICATED, fragments));
    v1::ReleaseRequest release;
    release.add_lease_ids(1);
    v1::ReleaseResponse released;
    EXPECT_TRUE(GrpcFails(stub_->Release(RawContext(token).get(), release, &released),
                          grpc::StatusCode::UNAUTHENTICATED, fragments));
    v1::CancelAllocationRequest cancel;
    cancel.set_allocation_id(1);
    v1::CancelAllocationResponse cancelled;
    EXPECT_TRUE(GrpcFails(stub_->CancelAllocation(RawContext(token).get(), cancel, &cancelled),
                          grpc::StatusCode::UNAUTHENTICATED, fragments));
    v1::DeleteRequest remove;
    remove.set_name("it/present");
    v1::DeleteResponse removed;
    EXPECT_TRUE(GrpcFails(stub_->Delete(RawContext(token).get(), remove, &removed),
                          grpc::StatusCode::UNAUTHENTICATED, fragments));
  };
  call_all(std::nullopt, {"x-hurray-session"});
  call_all("not-a-token", {"unknown session token"});
  call_all("", {"x-hurray-session"});
  EXPECT_EQ(Stats().lease_count, 0u);
  ASSERT_OK(client().Describe("it/present"));  // Not deleted by the refused Delete calls.

  // A token dies with its session: after the socket closes it opens nothing, and the
  // session's allocation is gone.
  auto session = RawSession::Open(daemon().session_socket_path());
  ASSERT_TRUE(session.has_value());
  const std::string token = session->token();
  v1::AllocateResponse allocated;
  ASSERT_TRUE(RawAllocate(token, AllocateOf(TensorKind::kDense), &allocated).ok());
  EXPECT_EQ(Stats().pending_allocation_count, 1u);
  session.reset();
  grpc::Status last;
  EXPECT_TRUE(Eventually([&] {
    last = RawAllocate(token, AllocateOf(TensorKind::kDense));
    return last.error_code() == grpc::StatusCode::UNAUTHENTICATED;
  })) << "an ended session's token still works: "
      << last.error_message();
  EXPECT_TRUE(Eventually([&] { return Stats().pending_allocation_count == 0; }));

  // Inspection needs no session. The ended session's allocation is quarantined, not freed:
  // this process, which could still write it, lives on.
  v1::StatsResponse stats;
  EXPECT_TRUE(stub_->Stats(RawContext(std::nullopt).get(), v1::StatsRequest(), &stats).ok());
  EXPECT_EQ(stats.quarantined_sessions(), 1u);
  EXPECT_GT(stats.pools(0).quarantined_bytes(), 0u);
  v1::ListRequest list;
  v1::ListResponse listed;
  EXPECT_TRUE(stub_->List(RawContext(std::nullopt).get(), list, &listed).ok());
  EXPECT_EQ(listed.tensors_size(), 1);
  ASSERT_OK(client().Delete("it/present"));
  EXPECT_EQ(RunAgent({"produce", "it/after", "quantized", "99"}), "version 1\n");
  EXPECT_EQ(RunAgent({"consume", "it/after", "99"}), "OK quantized v1\n");
  ASSERT_OK(client().Delete("it/after"));
  EXPECT_TRUE(Eventually([&] {
    stats = v1::StatsResponse();
    if (!stub_->Stats(RawContext(std::nullopt).get(), v1::StatsRequest(), &stats).ok())
      return false;
    const v1::PoolStats& cpu = stats.pools(0);
    return cpu.used_bytes() == cpu.quarantined_bytes() &&
           cpu.allocation_count() == cpu.quarantined_ranges() &&
           stats.pending_allocation_count() == 0 && stats.lease_count() == 0 &&
           stats.version_count() == 0;
  })) << "the daemon holds more than the quarantine: "
      << stats.DebugString();
}

TEST_F(BadInputTest, OversizedRequestsAreResourceExhausted) {
  auto session = RawSession::Open(daemon().session_socket_path());
  ASSERT_TRUE(session.has_value());
  // A gRPC message above the daemon's 4 MiB limit, refused before it is parsed.
  auto request = AllocateOf(TensorKind::kDense);
  (*request.mutable_tensor_descriptor()->mutable_metadata())["padding"] = std::string(5 << 20, 'x');
  EXPECT_TRUE(GrpcFails(RawAllocate(session->token(), request),
                        grpc::StatusCode::RESOURCE_EXHAUSTED, {"4194304"}));
  v1::ListRequest list;
  list.set_prefix(std::string(5 << 20, 'p'));
  v1::ListResponse listed;
  EXPECT_TRUE(GrpcFails(stub_->List(RawContext(std::nullopt).get(), list, &listed),
                        grpc::StatusCode::RESOURCE_EXHAUSTED, {"4194304"}));

  // A tensor bigger than the whole pool.
  const std::uint64_t too_big = daemon().pool_capacity_bytes() + 4096;
  EXPECT_ERROR(client().Allocate(MakeByteTensor(too_big)), StatusCode::kResourceExhausted,
               {std::to_string(too_big)});
  // Buffers that fit one by one but not together: none of them stays allocated.
  {
    TensorDescriptor::Parts parts;
    constexpr std::uint64_t kRows = std::uint64_t{1} << 21;
    constexpr std::uint64_t kNonZeros = std::uint64_t{1} << 22;
    parts.element_type = ElementType::kFloat32;
    parts.shape = {kRows, kRows};
    parts.layout = CompressedLayout{.nnz = kNonZeros};
    for (std::uint64_t size : {kNonZeros * 4, (kRows + 1) * 8, kNonZeros * 8}) {
      parts.buffers.push_back(*BufferHandle::Create(size, kMinBufferAlignment, DeviceTag::Cpu(),
                                                    SyncMode::kProducerSynced));
    }
    auto descriptor = TensorDescriptor::Create(parts);
    ASSERT_OK(descriptor);
    EXPECT_ERROR(client().Allocate(*descriptor), StatusCode::kResourceExhausted, {"no free range"});
    EXPECT_EQ(CpuPool().used_bytes, 0u);
    EXPECT_EQ(CpuPool().allocation_count, 0u);
  }
  // Too many names in one batch, and too long a wait.
  std::vector<std::string> names(100001, "it/n");
  EXPECT_ERROR(client().BatchAcquire(names), StatusCode::kInvalidArgument,
               {"names has 100001 entries"});
  EXPECT_ERROR(client().Acquire("it/n", {.wait = std::chrono::milliseconds(3'600'001)}),
               StatusCode::kInvalidArgument, {"wait_timeout_ms 3600001"});
  EXPECT_EQ(Stats().pending_allocation_count, 0u);
  session.reset();
  ExpectStillServingWithNothingLeaked();
}

TEST_F(BadInputTest, BadNamesAreInvalidArgumentNamingTheName) {
  const std::string long_part(129, 'a');
  std::string too_long = "ns";
  for (int i = 0; i < 5; ++i) too_long += "/" + std::string(120, 'b');
  const std::vector<std::string> bad_names = {
      "noslash", "ns/",     "/name", "ns//name",       "ns/./x", "ns/../x",
      "ns/a b",  "ns/a\tb", "ns/é",  long_part + "/x", too_long, std::string("ns/a\0b", 6),
      ""};
  for (const std::string& name : bad_names) {
    SCOPED_TRACE("name of " + std::to_string(name.size()) + " bytes: " + name.substr(0, 40));
    std::string shown;
    for (char c : name.substr(0, 40)) shown += (c >= 0x20 && c < 0x7F) ? c : '?';
    const std::string quoted = "name \"" + shown;
    auto tensor = client().Allocate(MakeByteTensor(4096));
    ASSERT_OK(tensor);
    EXPECT_ERROR(tensor->Publish(name), StatusCode::kInvalidArgument, {quoted});
    EXPECT_OK(tensor->Cancel());
    EXPECT_ERROR(client().Acquire(name), StatusCode::kInvalidArgument, {quoted});
    EXPECT_ERROR(client().Describe(name), StatusCode::kInvalidArgument, {quoted});
    EXPECT_ERROR(client().Delete(name), StatusCode::kInvalidArgument, {quoted});
    EXPECT_ERROR(client().BatchAcquire({"ns/fine", name}), StatusCode::kInvalidArgument,
                 {"names[1] \"" + shown});
  }
  EXPECT_EQ(Stats().tensor_count, 0u);
  ExpectStillServingWithNothingLeaked();
}

}  // namespace
}  // namespace hurray::integration
