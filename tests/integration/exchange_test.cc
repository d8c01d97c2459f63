// Tensors travelling between separate processes through the real daemon: round trips of
// every tensor kind (C++ and C consumers), versions, waiting acquires, batch acquires and
// watches.
#include <fmt/format.h>
#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <string>
#include <thread>

#include "hurray/v1/exchange.grpc.pb.h"
#include "integration_test.h"
#include "raw_session.h"
#include "test_tensors.h"
#include "testing/status_matchers.h"

namespace hurray::integration {
namespace {

// The descriptor the daemon describes for `name`, decoded.
TensorDescriptor DescribedDescriptor(Client& client, const std::string& name) {
  auto described = client.Describe(name);
  if (!described) {
    ADD_FAILURE() << "Describe " << name << ": " << described.error().ToString();
    return MakeByteTensor(1);
  }
  return described->descriptor;
}

// ---- Round trips -----------------------------------------------------------------------

class RoundTripTest : public IntegrationTest {};

TEST_F(RoundTripTest, DenseTensorReachesAnotherProcessByteForByteWithoutACopy) {
  EXPECT_EQ(RunAgent({"produce", "it/dense", "dense", "11"}), "version 1\n");
  EXPECT_EQ(DescribedDescriptor(client(), "it/dense"), MakeTestDescriptor(TensorKind::kDense));
  // The consumer checks every byte, and that each buffer lies in its r--s /dev/shm mapping.
  EXPECT_EQ(RunAgent({"consume", "it/dense", "11"}), "OK dense v1\n");
  // The check is real: other contents (seed 12) fail it.
  const AgentOutcome wrong_seed = RunAgentToEnd({"consume", "it/dense", "12"});
  ASSERT_TRUE(wrong_seed.status.has_value());
  EXPECT_TRUE(WIFEXITED(*wrong_seed.status) && WEXITSTATUS(*wrong_seed.status) == 1)
      << DescribeWaitStatus(*wrong_seed.status);
  EXPECT_NE(wrong_seed.err.find("buffer 0 byte 0 is"), std::string::npos) << wrong_seed.err;
}

TEST_F(RoundTripTest, PerChannelQuantizedTensorTravelsWithItsScaleBuffer) {
  EXPECT_EQ(RunAgent({"produce", "it/quantized", "quantized", "21"}), "version 1\n");
  EXPECT_EQ(DescribedDescriptor(client(), "it/quantized"),
            MakeTestDescriptor(TensorKind::kQuantized));
  EXPECT_EQ(RunAgent({"consume", "it/quantized", "21"}), "OK quantized v1\n");
}

TEST_F(RoundTripTest, CsrTensorTravelsWithBothIndexArrays) {
  EXPECT_EQ(RunAgent({"produce", "it/csr", "csr", "31"}), "version 1\n");
  EXPECT_EQ(DescribedDescriptor(client(), "it/csr"), MakeTestDescriptor(TensorKind::kCsr));
  EXPECT_EQ(RunAgent({"consume", "it/csr", "31"}), "OK csr v1\n");
}

TEST_F(RoundTripTest, CConsumerReadsEveryKindThroughTheCClient) {
  EXPECT_EQ(RunAgent({"produce", "it/dense", "dense", "41"}), "version 1\n");
  EXPECT_EQ(RunAgent({"produce", "it/quantized", "quantized", "42"}), "version 1\n");
  EXPECT_EQ(RunAgent({"produce", "it/csr", "csr", "43"}), "version 1\n");
  EXPECT_EQ(RunCAgent("it/dense", 41), "OK buffers=1\n");
  EXPECT_EQ(RunCAgent("it/quantized", 42), "OK buffers=2\n");
  EXPECT_EQ(RunCAgent("it/csr", 43), "OK buffers=3\n");
  // The C consumer's leases ended when it destroyed its contexts (or, at the latest, when
  // its session closed).
  EXPECT_TRUE(Eventually([&] { return Stats().lease_count == 0; })) << Summary(Stats());
}

// ---- Versions --------------------------------------------------------------------------

class RepublishTest : public IntegrationTest {};

TEST_F(RepublishTest, OldVersionStaysReadableUnderItsLeaseAndGoesWhenTheLeaseEnds) {
  const std::string name = "it/weights";
  EXPECT_EQ(RunAgent({"produce", name, "dense", "1"}), "version 1\n");
  const std::uint64_t one_version_bytes = CpuPool().used_bytes;
  ASSERT_GT(one_version_bytes, 0u);

  ASSERT_OK_AND_ASSIGN(ChildProcess holder, StartAgent({"hold", name}));
  ASSERT_NO_FATAL_FAILURE(ExpectLine(holder, "holding 1"));
  EXPECT_EQ(RunAgent({"produce", name, "dense", "2"}), "version 2\n");

  auto described = client().Describe(name);
  ASSERT_OK(described);
  EXPECT_EQ(described->version, 2u);
  ASSERT_EQ(described->versions.size(), 2);
  EXPECT_EQ(described->versions[0].version, 1u);
  EXPECT_TRUE(described->versions[0].superseded);
  EXPECT_EQ(described->versions[0].lease_count, 1u);
  EXPECT_EQ(described->versions[1].version, 2u);
  EXPECT_FALSE(described->versions[1].superseded);
  EXPECT_EQ(described->versions[1].lease_count, 0u);
  const std::uint64_t two_versions_bytes = CpuPool().used_bytes;
  EXPECT_EQ(two_versions_bytes, 2 * one_version_bytes);

  {
    // Version 1 is intact under the holder's lease, and readable by a new lease on it.
    auto old_view = client().Acquire(name, {.version = 1});
    ASSERT_OK(old_view);
    EXPECT_EQ(old_view->version(), 1u);
    EXPECT_EQ(CheckBuffer(old_view->buffer(0), 1, 0), "");
    auto latest = client().Acquire(name);
    ASSERT_OK(latest);
    EXPECT_EQ(latest->version(), 2u);
    EXPECT_EQ(CheckBuffer(latest->buffer(0), 2, 0), "");
    // The two versions are different memory, not one buffer rewritten.
    EXPECT_NE(old_view->buffer(0).data(), latest->buffer(0).data());
  }  // Our leases end here; the holder's stays.
  ASSERT_TRUE(Eventually([&] { return Stats().lease_count == 1; })) << Summary(Stats());
  EXPECT_EQ(CpuPool().used_bytes, two_versions_bytes);

  holder.Signal(SIGKILL);
  ASSERT_TRUE(holder.Wait(30s).has_value());
  EXPECT_TRUE(Eventually([&] {
    auto now = client().Describe(name);
    return now && now->versions.size() == 1 && CpuPool().used_bytes == one_version_bytes;
  })) << Summary(Stats());
  EXPECT_ERROR(client().Acquire(name, {.version = 1}), StatusCode::kNotFound, {name, "version 1"});
  EXPECT_EQ(RunAgent({"consume", name, "2"}), "OK dense v2\n");
  EXPECT_EQ(Stats().lease_count, 0u);
}

// ---- Waiting acquires ------------------------------------------------------------------

class AcquireWaitTest : public IntegrationTest {};

TEST_F(AcquireWaitTest, ReturnsTheTensorOnceAnotherProcessPublishesIt) {
  auto waiting =
      std::async(std::launch::async, [&] { return client().Acquire("it/later", {.wait = 10s}); });
  EXPECT_EQ(RunAgent({"produce", "it/later", "dense", "7"}), "version 1\n");
  auto view = waiting.get();
  ASSERT_OK(view);
  EXPECT_EQ(view->version(), 1u);
  EXPECT_EQ(CheckBuffer(view->buffer(0), 7, 0), "");
}

TEST_F(AcquireWaitTest, WaitsForAVersionNotYetPublished) {
  EXPECT_EQ(RunAgent({"produce", "it/next", "dense", "1"}), "version 1\n");
  // Version 1 exists; asking for version 2 can only be answered by the next publish.
  auto waiting = std::async(
      std::launch::async, [&] { return client().Acquire("it/next", {.version = 2, .wait = 10s}); });
  EXPECT_EQ(RunAgent({"produce", "it/next", "dense", "2"}), "version 2\n");
  auto view = waiting.get();
  ASSERT_OK(view);
  EXPECT_EQ(view->version(), 2u);
  EXPECT_EQ(CheckBuffer(view->buffer(0), 2, 0), "");
}

// AcquireOptions::spin: the consumer polls its socket before it sleeps; the answer is the
// same whether it comes while the consumer spins or after it went to sleep.
TEST_F(AcquireWaitTest, ASpinningWaitGetsTheVersionPublishedWhileItSpinsOrAfter) {
  // The publish comes within the spin, then after it.
  for (const std::chrono::microseconds spin : std::array<std::chrono::microseconds, 2>{10s, 1ms}) {
    const std::string name = fmt::format("it/spin-{}", spin.count());
    const auto started = std::chrono::steady_clock::now();
    auto waiting = std::async(std::launch::async,
                              [&] { return client().Acquire(name, {.wait = 10s, .spin = spin}); });
    EXPECT_EQ(RunAgent({"produce", name, "dense", "5"}), "version 1\n");
    auto view = waiting.get();
    ASSERT_OK(view);
    EXPECT_EQ(view->version(), 1u);
    EXPECT_EQ(CheckBuffer(view->buffer(0), 5, 0), "");
    EXPECT_LT(std::chrono::steady_clock::now() - started, 10s);
  }
  // A spin longer than the wait ends with the daemon's answer to the wait.
  const auto started = std::chrono::steady_clock::now();
  EXPECT_ERROR(client().Acquire("it/spin-never", {.wait = 200ms, .spin = 10s}),
               StatusCode::kDeadlineExceeded, {"it/spin-never"});
  EXPECT_LT(std::chrono::steady_clock::now() - started, 5s);
  EXPECT_EQ(Stats().lease_count, 0u);
}

TEST_F(AcquireWaitTest, TimesOutCleanlyWhenNothingIsPublished) {
  EXPECT_ERROR(client().Acquire("it/never", {.wait = 300ms}), StatusCode::kDeadlineExceeded,
               {"it/never"});
  EXPECT_EQ(Stats().lease_count, 0u);
  // A wait that timed out must not take a lease when the name shows up later.
  EXPECT_EQ(RunAgent({"produce", "it/never", "dense", "3"}), "version 1\n");
  auto described = client().Describe("it/never");
  ASSERT_OK(described);
  ASSERT_EQ(described->versions.size(), 1);
  EXPECT_EQ(described->versions[0].lease_count, 0u);
  EXPECT_EQ(Stats().lease_count, 0u);
}

TEST_F(AcquireWaitTest, AbandonedWaitTakesNoLeaseWhenTheTensorAppears) {
  auto session = RawSession::Open(daemon().session_socket_path());
  ASSERT_TRUE(session.has_value());
  auto stub = v1::Exchange::NewStub(
      grpc::CreateChannel("unix:" + socket(), grpc::InsecureChannelCredentials()));
  v1::AcquireRequest request;
  request.set_name("it/late");
  request.set_wait_timeout_ms(60'000);
  grpc::ClientContext context;
  context.AddMetadata(kSessionMetadataKey, session->token());
  // The caller gives up long before the daemon's wait would end.
  context.set_deadline(std::chrono::system_clock::now() + 300ms);
  v1::AcquireResponse response;
  EXPECT_TRUE(
      GrpcFails(stub->Acquire(&context, request, &response), grpc::StatusCode::DEADLINE_EXCEEDED));
  EXPECT_EQ(RunAgent({"produce", "it/late", "dense", "3"}), "version 1\n");
  // Nobody heard of a lease taken for the abandoned call: it must not stay.
  DaemonStats stats;
  EXPECT_TRUE(Eventually([&] {
    stats = Stats();
    return stats.lease_count == 0;
  })) << Summary(stats);
  auto described = client().Describe("it/late");
  ASSERT_OK(described);
  EXPECT_EQ(described->versions[0].lease_count, 0u);
}

// ---- Batch acquire ---------------------------------------------------------------------

class BatchAcquireTest : public IntegrationTest {
 protected:
  static constexpr int kTensors = 200;
  static constexpr std::uint64_t kSeed = 1000;

  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(IntegrationTest::SetUp());
    // A model loader in another process publishes model/layer.000 .. model/layer.199.
    ASSERT_EQ(
        RunAgent({"produce-set", "model/layer.", std::to_string(kTensors), std::to_string(kSeed)}),
        "published 200\n");
    EXPECT_EQ(RunAgent({"produce", "other/layer.000", "dense", "5"}), "version 1\n");
  }

  static std::string LayerName(int index) {
    char name[32];
    std::snprintf(name, sizeof(name), "model/layer.%03d", index);
    return name;
  }
};

TEST_F(BatchAcquireTest, ReturnsEveryListedTensorInRequestOrder) {
  std::vector<std::string> names;
  for (int i = kTensors - 1; i >= 0; --i) names.push_back(LayerName(i));  // Reversed.
  auto views = client().BatchAcquire(names);
  ASSERT_OK(views);
  ASSERT_EQ(views->size(), names.size());
  for (std::size_t i = 0; i < names.size(); ++i) {
    const int layer = kTensors - 1 - static_cast<int>(i);
    EXPECT_EQ((*views)[i].name(), names[i]);
    EXPECT_EQ(CheckBuffer((*views)[i].buffer(0), kSeed + static_cast<std::uint64_t>(layer), 0), "")
        << names[i];
  }
  EXPECT_EQ(Stats().lease_count, static_cast<std::uint64_t>(kTensors));
  views->clear();
  EXPECT_EQ(Stats().lease_count, 0u);
}

TEST_F(BatchAcquireTest, PrefixAddsItsTensorsInNameOrderAfterTheListedOnes) {
  auto views = client().BatchAcquire({LayerName(150)}, "model/");
  ASSERT_OK(views);
  ASSERT_EQ(views->size(), static_cast<std::size_t>(kTensors));
  EXPECT_EQ((*views)[0].name(), LayerName(150));
  std::size_t position = 1;
  for (int i = 0; i < kTensors; ++i) {
    if (i == 150) continue;  // Listed first, and only once.
    ASSERT_EQ((*views)[position].name(), LayerName(i));
    EXPECT_EQ(CheckBuffer((*views)[position].buffer(0), kSeed + static_cast<std::uint64_t>(i), 0),
              "");
    ++position;
  }
  EXPECT_EQ(Stats().lease_count, static_cast<std::uint64_t>(kTensors));
}

TEST_F(BatchAcquireTest, TakesNothingWhenOneNameIsMissing) {
  std::vector<std::string> names;
  for (int i = 0; i < kTensors; ++i) {
    names.emplace_back(LayerName(i));
    if (i == 100) names.emplace_back("model/layer.missing");
  }
  EXPECT_ERROR(client().BatchAcquire(names), StatusCode::kNotFound, {"model/layer.missing"});
  EXPECT_EQ(Stats().lease_count, 0u);
  EXPECT_ERROR(client().BatchAcquire(names, {}, 300ms), StatusCode::kDeadlineExceeded,
               {"model/layer.missing"});
  EXPECT_EQ(Stats().lease_count, 0u);
  auto listed = client().List("model/", 1000);
  ASSERT_OK(listed);
  ASSERT_EQ(listed->tensors.size(), kTensors);
  for (const auto& tensor : listed->tensors) EXPECT_EQ(tensor.lease_count, 0u) << tensor.name;
}

TEST_F(BatchAcquireTest, ListPagesThroughTheSetInNameOrder) {
  std::vector<std::string> seen;
  std::string token;
  int pages = 0;
  do {
    auto page = client().List("model/", 64, token);
    ASSERT_OK(page);
    ASSERT_LE(page->tensors.size(), 64);
    for (const auto& tensor : page->tensors) {
      seen.push_back(tensor.name);
      EXPECT_EQ(tensor.latest_version, 1u);
      EXPECT_EQ(tensor.byte_size, 256u);
    }
    token = page->next_page_token;
    ASSERT_LT(++pages, 10) << "paging does not end";
  } while (!token.empty());
  EXPECT_EQ(pages, 4);
  ASSERT_EQ(seen.size(), static_cast<std::size_t>(kTensors));
  for (int i = 0; i < kTensors; ++i) EXPECT_EQ(seen[static_cast<std::size_t>(i)], LayerName(i));
}

// ---- Watch -----------------------------------------------------------------------------

class WatchTest : public IntegrationTest {};

// What a watcher saw, as "published watched/a 1".
class EventLog {
 public:
  void Add(const WatchEvent& event) {
    std::string kind = event.kind == WatchEvent::Kind::kPublished ? "published" : "deleted";
    std::lock_guard lock(mutex_);
    events_.push_back(kind + " " + event.name + " " + std::to_string(event.version));
    changed_.notify_all();
  }
  // Waits (bounded) until `last` has been seen; returns everything seen.
  std::vector<std::string> WaitFor(const std::string& last) {
    std::unique_lock lock(mutex_);
    changed_.wait_for(lock, 30s, [&] { return std::ranges::find(events_, last) != events_.end(); });
    return events_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<std::string> events_;
};

TEST_F(WatchTest, SeesPublishAndDeleteEventsInOrderForItsPrefixOnly) {
  EventLog watched;
  EventLog other;
  auto watch = client().Watch("watched/", [&](const WatchEvent& event) { watched.Add(event); });
  ASSERT_OK(watch);
  auto other_client = Connect("other-watcher");
  ASSERT_NE(other_client, nullptr);
  auto other_watch =
      other_client->Watch("other/", [&](const WatchEvent& event) { other.Add(event); });
  ASSERT_OK(other_watch);

  EXPECT_EQ(RunAgent({"produce", "watched/a", "dense", "1"}), "version 1\n");
  EXPECT_EQ(RunAgent({"produce", "other/b", "dense", "2"}), "version 1\n");
  EXPECT_EQ(RunAgent({"produce", "watched/b", "dense", "3"}), "version 1\n");
  ASSERT_OK(client().Delete("watched/a"));
  EXPECT_EQ(RunAgent({"produce", "watched/b", "dense", "4"}), "version 2\n");
  ASSERT_OK(client().Delete("other/b"));
  EXPECT_EQ(RunAgent({"produce", "watched/zz", "dense", "5"}), "version 1\n");
  EXPECT_EQ(RunAgent({"produce", "other/zz", "dense", "6"}), "version 1\n");

  EXPECT_EQ(watched.WaitFor("published watched/zz 1"),
            (std::vector<std::string>{"published watched/a 1", "published watched/b 1",
                                      "deleted watched/a 1", "published watched/b 2",
                                      "published watched/zz 1"}));
  EXPECT_EQ(other.WaitFor("published other/zz 1"),
            (std::vector<std::string>{"published other/b 1", "deleted other/b 1",
                                      "published other/zz 1"}));
}

}  // namespace
}  // namespace hurray::integration
