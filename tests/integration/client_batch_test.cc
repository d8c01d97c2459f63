// Ending many leases at once (Client::Release, TensorViewBatch) and populating a tensor's
// page tables at acquire (AcquireOptions::populate), against the real hurrayd, with the
// tensors published by a separate producer process.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "integration_test.h"
#include "test_tensors.h"
#include "testing/status_matchers.h"

namespace hurray::integration {
namespace {

using HotPath = Client::Options::HotPath;

constexpr int kTensors = 200;
constexpr std::uint64_t kSeed = 3000;

std::string SetName(int index) {
  char name[32];
  std::snprintf(name, sizeof(name), "batch/t%03d", index);
  return name;
}

// Whether every view holds a lease, and whether none does.
bool AllHoldLeases(std::span<const TensorView> views) {
  return std::ranges::all_of(views, [](const TensorView& view) { return view.holds_lease(); });
}
bool NoneHoldsALease(std::span<const TensorView> views) {
  return std::ranges::none_of(views, [](const TensorView& view) { return view.holds_lease(); });
}

class ClientBatchTest : public IntegrationTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(IntegrationTest::SetUp());
    // A model loader in another process publishes batch/t000 .. batch/t199.
    ASSERT_EQ(RunAgent({"produce-set", "batch/t", std::to_string(kTensors), std::to_string(kSeed)}),
              "published 200\n");
  }

  std::uint64_t Leases() { return Stats().lease_count; }
  // As another client sees them once `through` has released some: through its own Stats,
  // which waits for its one-way releases.
  static std::uint64_t LeasesSeenBy(Client& through) {
    auto stats = through.Stats();
    EXPECT_OK(stats);
    return stats ? stats->lease_count : 0;
  }

  // Acquires batch/t<first> .. batch/t<first + count - 1> one by one through `client`.
  static std::vector<TensorView> AcquireEach(Client& client, int first, int count) {
    std::vector<TensorView> views;
    for (int i = first; i < first + count; ++i) {
      auto view = client.Acquire(SetName(i));
      EXPECT_OK(view);
      if (view) views.push_back(std::move(*view));
    }
    return views;
  }

  // Every view reads what the producer wrote into batch/t<index>.
  static void ExpectContents(const TensorView& view, int index) {
    EXPECT_EQ(view.name(), SetName(index));
    EXPECT_EQ(CheckBuffer(view.buffer(0), kSeed + static_cast<std::uint64_t>(index), 0), "")
        << view.name();
  }
};

TEST_F(ClientBatchTest, DroppingABatchEndsEveryLease) {
  {
    auto batch = client().BatchAcquire({}, "batch/");
    ASSERT_OK(batch);
    ASSERT_EQ(batch->size(), static_cast<std::size_t>(kTensors));
    for (int i = 0; i < kTensors; ++i) ExpectContents((*batch)[static_cast<std::size_t>(i)], i);
    EXPECT_EQ(Leases(), static_cast<std::uint64_t>(kTensors));
  }
  EXPECT_EQ(Leases(), 0u);
  auto listed = client().List("batch/", 1000);
  ASSERT_OK(listed);
  ASSERT_EQ(listed->tensors.size(), kTensors);
  for (const auto& tensor : listed->tensors) EXPECT_EQ(tensor.lease_count, 0u) << tensor.name;
}

TEST_F(ClientBatchTest, ReleaseEndsEveryLeaseAndEmptiesTheBatch) {
  auto batch = client().BatchAcquire({SetName(7)}, "batch/t1");  // t007, then t100..t199.
  ASSERT_OK(batch);
  ASSERT_EQ(batch->size(), 101u);
  ExpectContents((*batch)[0], 7);
  ExpectContents((*batch)[1], 100);
  EXPECT_EQ(Leases(), 101u);
  ASSERT_OK(batch->Release());
  EXPECT_TRUE(batch->empty());
  EXPECT_EQ(Leases(), 0u);
  ASSERT_OK(batch->Release());  // Nothing left: nothing to do.

  // Assigning over a batch ends the leases it held.
  auto first = client().BatchAcquire({}, "batch/t0");  // t000..t099.
  auto second = client().BatchAcquire({SetName(150)});
  ASSERT_OK(first);
  ASSERT_OK(second);
  EXPECT_EQ(Leases(), 101u);
  *first = std::move(*second);
  EXPECT_EQ(Leases(), 1u);
  ASSERT_EQ(first->size(), 1u);
  ExpectContents((*first)[0], 150);
  first->clear();
  EXPECT_TRUE(first->empty());
  EXPECT_EQ(Leases(), 0u);
}

TEST_F(ClientBatchTest, ViewsReleasedOrMovedOutOfABatchAreSkipped) {
  auto batch = client().BatchAcquire({}, "batch/");
  ASSERT_OK(batch);
  ASSERT_EQ(batch->size(), static_cast<std::size_t>(kTensors));
  ASSERT_OK((*batch)[0].Release());
  TensorView kept = std::move((*batch)[1]);
  EXPECT_EQ(Leases(), static_cast<std::uint64_t>(kTensors - 1));

  ASSERT_OK(batch->Release());
  EXPECT_EQ(Leases(), 1u);  // Only the view moved out still holds its lease.
  ExpectContents(kept, 1);
  ASSERT_OK(kept.Release());
  EXPECT_EQ(Leases(), 0u);
}

TEST_F(ClientBatchTest, ClientReleaseEndsTheLeasesOfSeparateAcquires) {
  std::vector<TensorView> views = AcquireEach(client(), 0, 50);
  ASSERT_EQ(views.size(), 50u);
  ASSERT_OK(views[10].Release());  // Already released: skipped, as Release() does.
  EXPECT_EQ(Leases(), 49u);
  ASSERT_OK(client().Release(views));
  EXPECT_TRUE(NoneHoldsALease(views));
  EXPECT_EQ(Leases(), 0u);
  ASSERT_OK(client().Release(views));  // Every view empty now: nothing to do.
  ASSERT_OK(client().Release({}));
}

TEST_F(ClientBatchTest, AViewOfAnotherClientIsRefusedAndNothingIsReleased) {
  auto other = Connect("other-client");
  ASSERT_NE(other, nullptr);
  std::vector<TensorView> views = AcquireEach(client(), 0, 4);
  ASSERT_EQ(views.size(), 4u);
  auto foreign = other->Acquire(SetName(4));
  ASSERT_OK(foreign);
  views.insert(views.begin() + 2, std::move(*foreign));
  ASSERT_OK(views[4].Release());  // An already released view changes nothing either way.
  EXPECT_EQ(Leases(), 4u);

  EXPECT_ERROR(client().Release(views), StatusCode::kInvalidArgument,
               {"views[2]", SetName(4), "another client", "nothing was released"});
  EXPECT_EQ(Leases(), 4u);
  for (std::size_t i : {0u, 1u, 3u}) {
    ASSERT_TRUE(views[i].holds_lease()) << i;
    ExpectContents(views[i], static_cast<int>(i < 2 ? i : i - 1));
  }
  ASSERT_TRUE(views[2].holds_lease());
  ExpectContents(views[2], 4);

  // Each client releases its own.
  ASSERT_OK(other->Release(std::span(views).subspan(2, 1)));
  EXPECT_EQ(LeasesSeenBy(*other), 3u);
  ASSERT_OK(client().Release(views));
  EXPECT_TRUE(NoneHoldsALease(views));
  EXPECT_EQ(Leases(), 0u);
}

TEST_F(ClientBatchTest, ABatchHoldingAViewOfAnotherClientStillEndsEveryLease) {
  auto other = Connect("other-client");
  ASSERT_NE(other, nullptr);
  {
    auto batch = client().BatchAcquire({}, "batch/t0");  // t000..t099.
    ASSERT_OK(batch);
    auto foreign = other->Acquire(SetName(150));
    ASSERT_OK(foreign);
    (*batch)[0] = std::move(*foreign);  // Ends the batch's own lease on t000.
    EXPECT_EQ(Leases(), 100u);
    EXPECT_ERROR(batch->Release(), StatusCode::kInvalidArgument,
                 {"views[0]", "another client", "nothing was released"});
    EXPECT_EQ(Leases(), 100u);
    EXPECT_TRUE(AllHoldLeases(batch->views()));
    ExpectContents((*batch)[0], 150);
    ExpectContents((*batch)[99], 99);
  }
  // Dropped: each view's lease ended through its own client (the other's one-way release
  // is seen once that client has synced).
  ASSERT_OK(other->SyncReleases());
  EXPECT_EQ(Leases(), 0u);
}

TEST_F(ClientBatchTest, ReleaseSplitsALargeSetIntoSeveralRequests) {
  // One more view than a request carries; all of one tensor, which a session may lease
  // many times (off the fast path, which would pin it without a lease).
  auto leasing =
      Client::Connect({.socket_path = socket(), .client_name = "batch-leases", .fast_path = false});
  ASSERT_OK(leasing);
  const std::size_t count = Client::kMaxLeasesPerRelease + 1;
  std::vector<TensorView> views;
  views.reserve(count);
  for (std::size_t i = 0; i < count; ++i) {
    auto view = (*leasing)->Acquire(SetName(3));
    ASSERT_OK(view);
    views.push_back(std::move(*view));
  }
  EXPECT_EQ(Leases(), count);
  auto described = client().Describe(SetName(3));
  ASSERT_OK(described);
  EXPECT_EQ(described->versions[0].lease_count, count);
  ASSERT_OK((*leasing)->Release(views));
  EXPECT_TRUE(NoneHoldsALease(views));
  EXPECT_EQ(LeasesSeenBy(**leasing), 0u);
}

// The same over both channels of the hot path (release goes over the session socket by
// default, or gRPC).
class ClientBatchChannelTest : public ClientBatchTest,
                               public ::testing::WithParamInterface<HotPath> {};

TEST_P(ClientBatchChannelTest, ReleasesEveryLeaseInOneCall) {
  // Off the fast path: the views after the batch would be pins, not leases.
  auto connected = Client::Connect({.socket_path = socket(),
                                    .client_name = "batch-channel",
                                    .hot_path = GetParam(),
                                    .fast_path = false});
  ASSERT_OK(connected);
  Client& consumer = **connected;
  auto batch = consumer.BatchAcquire({}, "batch/");
  ASSERT_OK(batch);
  std::vector<TensorView> views = AcquireEach(consumer, 0, 20);
  EXPECT_EQ(Leases(), static_cast<std::uint64_t>(kTensors + 20));
  ASSERT_OK(consumer.Release(views));
  EXPECT_EQ(LeasesSeenBy(consumer), static_cast<std::uint64_t>(kTensors));
  ASSERT_OK(batch->Release());
  EXPECT_EQ(LeasesSeenBy(consumer), 0u);
  auto foreign = client().Acquire(SetName(0));
  ASSERT_OK(foreign);
  EXPECT_ERROR(consumer.Release(std::span(&*foreign, 1)), StatusCode::kInvalidArgument,
               {"another client"});
  EXPECT_EQ(Leases(), 1u);
}

HURRAY_INSTANTIATE_FOR_BOTH_CHANNELS(ClientBatchChannelTest);

// ---- AcquireOptions::populate ----------------------------------------------------------

class PopulateTest : public IntegrationTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(IntegrationTest::SetUp());
    EXPECT_EQ(RunAgent({"produce", "pop/dense", "dense", "5"}), "version 1\n");
    EXPECT_EQ(RunAgent({"produce", "pop/csr", "csr", "6"}), "version 1\n");
  }

  // A client with a mapping cache of its own: its first acquire maps the segment afresh.
  std::unique_ptr<Client> FreshConsumer() { return Connect("populate-consumer"); }
};

std::uintptr_t PageSize() { return static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE)); }

// The pages [first, last] that `bytes` (not empty) lies on.
std::pair<std::uintptr_t, std::uintptr_t> PagesUnder(std::span<const std::byte> bytes) {
  const auto begin = reinterpret_cast<std::uintptr_t>(bytes.data());
  return {begin / PageSize(), (begin + bytes.size() - 1) / PageSize()};
}

std::int64_t PageCount(std::span<const std::byte> bytes) {
  const auto [first, last] = PagesUnder(bytes);
  return static_cast<std::int64_t>(last - first + 1);
}

// Whether this kernel knows MADV_POPULATE_READ (Linux 5.14+).
bool KernelPopulates() {
#ifndef MADV_POPULATE_READ
  constexpr int MADV_POPULATE_READ = 22;
#endif
  const std::size_t page = PageSize();
  void* probe = ::mmap(nullptr, page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (probe == MAP_FAILED) return false;
  const bool known = ::madvise(probe, page, MADV_POPULATE_READ) == 0;
  ::munmap(probe, page);
  return known;
}

// How many of the pages under `bytes` have a present page-table entry in this process
// (bit 63 of /proc/self/pagemap, readable without privileges); -1 when it cannot be read.
std::int64_t PresentPages(std::span<const std::byte> bytes) {
  const auto [first, last] = PagesUnder(bytes);
  std::vector<std::uint64_t> entries(last - first + 1);
  const int fd = ::open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  const std::size_t wanted = entries.size() * sizeof(std::uint64_t);
  const ssize_t got =
      ::pread(fd, entries.data(), wanted, static_cast<off_t>(first * sizeof(std::uint64_t)));
  ::close(fd);
  if (got != static_cast<ssize_t>(wanted)) return -1;
  return std::ranges::count_if(entries, [](std::uint64_t entry) { return (entry >> 63) != 0; });
}

TEST_F(PopulateTest, GivesTheSameBytesAsAPlainAcquire) {
  auto plain_client = FreshConsumer();
  auto populating_client = FreshConsumer();
  ASSERT_NE(plain_client, nullptr);
  ASSERT_NE(populating_client, nullptr);
  for (const auto& [name, seed] : {std::pair{"pop/dense", 5}, std::pair{"pop/csr", 6}}) {
    auto plain = plain_client->Acquire(name);
    auto populated = populating_client->Acquire(name, {.populate = true});
    ASSERT_OK(plain);
    ASSERT_OK(populated);
    ASSERT_EQ(populated->buffer_count(), plain->buffer_count());
    for (std::size_t i = 0; i < populated->buffer_count(); ++i) {
      const auto bytes = populated->buffer(i);
      ASSERT_EQ(bytes.size(), plain->buffer(i).size());
      EXPECT_NE(bytes.data(), plain->buffer(i).data()) << "two clients share one mapping";
      EXPECT_EQ(std::memcmp(bytes.data(), plain->buffer(i).data(), bytes.size()), 0);
      EXPECT_EQ(CheckBuffer(bytes, static_cast<std::uint64_t>(seed), i), "") << name << " " << i;
    }
  }
  // Through gRPC, with a wait: the same option, the same bytes.
  auto waited = populating_client->Acquire("pop/dense", {.wait = 5s, .populate = true});
  ASSERT_OK(waited);
  EXPECT_EQ(CheckBuffer(waited->buffer(0), 5, 0), "");
}

TEST_F(PopulateTest, FillsThePageTablesOfEveryBufferAtAcquire) {
  if (!KernelPopulates()) GTEST_SKIP() << "this kernel has no MADV_POPULATE_READ (Linux 5.14+)";
  auto plain_client = FreshConsumer();
  auto populating_client = FreshConsumer();
  ASSERT_NE(plain_client, nullptr);
  ASSERT_NE(populating_client, nullptr);

  auto plain = plain_client->Acquire("pop/dense");
  ASSERT_OK(plain);
  const auto plain_bytes = plain->buffer(0);
  const std::int64_t plain_present = PresentPages(plain_bytes);
  ASSERT_GE(plain_present, 0) << "cannot read /proc/self/pagemap";
  EXPECT_LT(plain_present, PageCount(plain_bytes)) << "a plain acquire populated the tensor";

  for (const char* name : {"pop/dense", "pop/csr"}) {
    auto populated = populating_client->Acquire(name, {.populate = true});
    ASSERT_OK(populated);
    for (std::size_t i = 0; i < populated->buffer_count(); ++i) {
      const auto bytes = populated->buffer(i);
      EXPECT_EQ(PresentPages(bytes), PageCount(bytes)) << name << " buffer " << i;
    }
  }
}

}  // namespace
}  // namespace hurray::integration
