// hurrayd on a host without the NVIDIA driver or a CUDA device: it serves as ever, Stats
// lists no CUDA pool, its log says once why, and an allocation in a CUDA pool is
// FAILED_PRECONDITION saying why rather than NOT_FOUND. On a host where the daemon has CUDA
// pools the tests skip: they describe the other hosts.
#include <grpcpp/grpcpp.h>

#include <cstddef>
#include <string>
#include <string_view>

#include "hurray/descriptor_codec.h"
#include "hurray/v1/exchange.grpc.pb.h"
#include "integration_test.h"
#include "raw_session.h"
#include "test_tensors.h"

namespace hurray::integration {
namespace {

class CudaAbsentTest : public RawGrpcTest {
 protected:
  // At info, so that the log holds the line that says why there are no CUDA pools.
  [[nodiscard]] DaemonProcess::Options daemon_options() const override {
    DaemonProcess::Options options = RawGrpcTest::daemon_options();
    options.log_level = "info";
    return options;
  }

  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(RawGrpcTest::SetUp());
    for (const PoolStats& pool : Stats().pools) {
      if (pool.kind == "cuda") GTEST_SKIP() << "this host's daemon has CUDA pools: " << pool.name;
    }
  }

  grpc::Status AllocateIn(const std::string& token, std::string_view pool) {
    v1::AllocateRequest request;
    *request.mutable_tensor_descriptor() =
        DescriptorToProto(MakeTestDescriptor(TensorKind::kDense));
    request.set_pool(std::string(pool));
    v1::AllocateResponse response;
    return stub_->Allocate(RawContext(token).get(), request, &response);
  }
};

std::size_t CountOf(const std::string& text, std::string_view fragment) {
  std::size_t count = 0;
  for (std::size_t at = text.find(fragment); at != std::string::npos;
       at = text.find(fragment, at + fragment.size())) {
    ++count;
  }
  return count;
}

TEST_F(CudaAbsentTest, DaemonServesWithOnlyTheCpuPoolAndSaysWhyOnce) {
  const DaemonStats stats = Stats();
  ASSERT_EQ(stats.pools.size(), 1u);
  EXPECT_EQ(stats.pools[0].name, "cpu");
  EXPECT_EQ(stats.pools[0].kind, "cpu");
  EXPECT_EQ(CountOf(daemon().Log(), "no CUDA pools: "), 1u) << daemon().Log();
}

TEST_F(CudaAbsentTest, AllocatingInACudaPoolIsAFailedPreconditionSayingWhy) {
  auto session = RawSession::Open(daemon().session_socket_path());
  ASSERT_TRUE(session.has_value());
  EXPECT_TRUE(GrpcFails(AllocateIn(session->token(), "cuda:0"),
                        grpc::StatusCode::FAILED_PRECONDITION, {"pool cuda:0: no CUDA pools: "}));
  EXPECT_TRUE(GrpcFails(AllocateIn(session->token(), "cuda:3"),
                        grpc::StatusCode::FAILED_PRECONDITION, {"pool cuda:3: no CUDA pools: "}));
  // A name that is no CUDA pool's is still unknown.
  EXPECT_TRUE(GrpcFails(AllocateIn(session->token(), "gpu:0"), grpc::StatusCode::NOT_FOUND,
                        {"pool \"gpu:0\" does not exist"}));
  // The CPU pool serves as ever.
  EXPECT_TRUE(AllocateIn(session->token(), "cpu").ok());
}

}  // namespace
}  // namespace hurray::integration
