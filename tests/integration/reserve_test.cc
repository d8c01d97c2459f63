// A daemon with a large CPU pool serves at once and reserves the pool in the background:
// health is SERVING and a tensor can be published long before the pool is reserved, and
// Stats' reserved_bytes climbs to the capacity.
#include <grpcpp/grpcpp.h>
#include <sys/statvfs.h>

#include <chrono>

#include "grpc/health/v1/health.grpc.pb.h"
#include "integration_test.h"
#include "test_tensors.h"
#include "testing/status_matchers.h"

namespace hurray::integration {
namespace {

using grpc::health::v1::HealthCheckResponse;

constexpr std::uint64_t kGiB = std::uint64_t{1} << 30;
constexpr std::uint64_t kCapacity = 4 * kGiB;

class ReserveTest : public IntegrationTest {
 protected:
  void SetUp() override {
    struct statvfs shm{};
    if (::statvfs("/dev/shm", &shm) != 0 ||
        static_cast<std::uint64_t>(shm.f_bavail) * shm.f_frsize < kCapacity + kGiB) {
      GTEST_SKIP() << "/dev/shm has not 5 GiB free for a 4 GiB pool";
    }
    IntegrationTest::SetUp();
  }

  [[nodiscard]] DaemonProcess::Options daemon_options() const override {
    DaemonProcess::Options options = IntegrationTest::daemon_options();
    options.pool_capacity_bytes = kCapacity;
    return options;
  }

  HealthCheckResponse::ServingStatus Health() {
    auto stub = grpc::health::v1::Health::NewStub(
        grpc::CreateChannel("unix:" + socket(), grpc::InsecureChannelCredentials()));
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + 10s);
    grpc::health::v1::HealthCheckRequest request;
    HealthCheckResponse response;
    if (!stub->Check(&context, request, &response).ok()) return HealthCheckResponse::UNKNOWN;
    return response.status();
  }

  // Just before SetUp starts the daemon.
  const std::chrono::steady_clock::time_point created_ = std::chrono::steady_clock::now();
};

TEST_F(ReserveTest, ALargePoolServesAtOnceAndReservesItsMemoryInTheBackground) {
  EXPECT_EQ(Health(), HealthCheckResponse::SERVING);
  const auto serving = std::chrono::steady_clock::now() - created_;
  const PoolStats early = CpuPool();
  // Reserving 4 GiB takes 4 s and more here; the daemon must not have waited for it.
  EXPECT_LT(serving, 2s) << "time to SERVING with a 4 GiB pool";
  EXPECT_LT(early.reserved_bytes, early.capacity_bytes);
  EXPECT_EQ(early.capacity_bytes, kCapacity);

  // What is reserved before serving takes a tensor at once.
  ASSERT_OK_AND_ASSIGN(WritableTensor tensor, client().Allocate(MakeByteTensor(64 << 20)));
  ASSERT_OK(tensor.Publish("it/reserve"));

  ASSERT_TRUE(Eventually([&] { return CpuPool().reserved_bytes == kCapacity; }, 120s))
      << CpuPool().reserved_bytes << " of " << kCapacity << " bytes reserved";
  // Fully reserved, the pool takes a tensor of half its capacity.
  ASSERT_OK_AND_ASSIGN(WritableTensor big, client().Allocate(MakeByteTensor(2 * kGiB)));
  EXPECT_OK(big.Publish("it/reserve-big"));
}

}  // namespace
}  // namespace hurray::integration
