// hurray_soak_worker: the soak's client processes, run until killed. Results go to stdout,
// one line each (line-buffered), for the soak's ledger; errors go to stderr.
//
//   producer SOCKET PRODUCER INCARNATION SEED
//       publishes, supersedes, now and then cancels an allocation or deletes a name, under
//       names of its own (soak_content.h). Prints "publishing NAME V" before and
//       "published NAME V" after each publish, "deleting NAME" and "deleted NAME" around
//       each delete.
//   consumer SOCKET PRODUCERS SEED
//       acquires the latest version of random producers' names, checks every byte, holds a
//       few views and checks them again before releasing them. Prints "checked N fast F
//       bytes B" every 50 views (so far: N views checked, F of them acquired through the
//       fast path, B bytes checked, the rechecks of held views included).
//   fast-consumer SOCKET PRODUCERS SEED
//       the same checks, but re-acquires the latest version of one name in a tight loop
//       (kReacquires times, or until it is deleted) before it picks another: after the
//       first acquire of each version, the client library takes the fast path.
//
// Exit status: 3 when a wrong byte or a wrong version number was seen; 4 when the daemon
// went away (UNAVAILABLE); 1 for any other error.

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "hurray/client.h"
#include "hurray/tensor_descriptor.h"
#include "soak_content.h"
#include "test_tensors.h"

namespace hurray::soak {
namespace {

constexpr int kExitWrong = 3;
constexpr int kExitDaemonGone = 4;
constexpr std::uint64_t kSlots = 4;
constexpr std::size_t kHeldViews = 4;
constexpr int kReacquires = 500;
constexpr std::uint64_t kReportEvery = 50;

[[noreturn]] void Exit(int status, const std::string& what) {
  std::fprintf(stderr, "hurray_soak_worker: %s\n", what.c_str());
  std::exit(status);
}

[[noreturn]] void Fail(const Error& error, const std::string& call) {
  Exit(error.code() == StatusCode::kUnavailable ? kExitDaemonGone : 1,
       call + ": " + error.ToString());
}

template <typename T>
T Check(Result<T> result, const std::string& call) {
  if (!result) Fail(result.error(), call);
  return std::move(*result);
}

void Check(const Status& status, const std::string& call) {
  if (!status) Fail(status.error(), call);
}

std::uint64_t ParseNumber(const char* text) { return std::strtoull(text, nullptr, 10); }

std::unique_ptr<Client> ConnectTo(const std::string& socket, const std::string& role) {
  return Check(Client::Connect({.socket_path = socket, .client_name = "soak " + role}), "Connect");
}

void Pause(std::mt19937_64& random) {
  std::this_thread::sleep_for(std::chrono::microseconds(random() % 3000));
}

void PublishNext(Client& client, const std::string& name, std::uint64_t version,
                 std::mt19937_64& random) {
  const std::uint64_t bytes = SoakByteSize(name, version);
  if (random() % 8 == 0) {  // An allocation that is never published.
    auto scratch = Check(client.Allocate(integration::MakeByteTensor(bytes)), "Allocate scratch");
    FillSoakTensor(scratch.buffer(0), name, version + 1000);
    Check(scratch.Cancel(), "Cancel");
  }
  auto tensor = Check(client.Allocate(integration::MakeByteTensor(bytes)), "Allocate " + name);
  FillSoakTensor(tensor.buffer(0), name, version);
  std::printf("publishing %s %llu\n", name.c_str(), static_cast<unsigned long long>(version));
  const PublishedTensor published = Check(tensor.Publish(name), "Publish " + name);
  if (published.version != version) {
    Exit(kExitWrong, name + ": published as version " + std::to_string(published.version) +
                         ", expected " + std::to_string(version));
  }
  std::printf("published %s %llu\n", name.c_str(), static_cast<unsigned long long>(version));
}

int Produce(const std::string& socket, std::uint64_t producer, std::uint64_t incarnation,
            std::uint64_t seed) {
  std::mt19937_64 random(seed);
  auto client = ConnectTo(socket, "producer");
  std::vector<std::uint64_t> generation(kSlots, 0);
  std::vector<std::uint64_t> version(kSlots, 0);
  while (true) {
    const std::uint64_t slot = random() % kSlots;
    const std::string name = SoakName(producer, incarnation, slot, generation[slot]);
    if (version[slot] > 0 && random() % 10 == 0) {
      std::printf("deleting %s\n", name.c_str());
      (void)Check(client->Delete(name), "Delete " + name);
      std::printf("deleted %s\n", name.c_str());
      ++generation[slot];
      version[slot] = 0;
    } else {
      PublishNext(*client, name, ++version[slot], random);
    }
    Pause(random);
  }
}

// Empty when the view still holds its version's bytes.
std::string CheckView(const TensorView& view) {
  return CheckSoakTensor(view.buffer(0), view.name(), view.version());
}

// A consumer's checks and what it has counted. Checks each view it is given, holds the last
// kHeldViews of them and checks each again before it lets it go (its release), across daemon
// kills too: a restarted daemon reuses none of the memory a view of the killed one may read,
// superseded or not (the epoch hold, docs/operations.md).
class ViewChecker {
 public:
  void Take(TensorView view) {
    Check(view);
    if (view.fast_path()) ++fast_;
    held_.push_back(std::move(view));
    if (held_.size() > kHeldViews) {
      Check(held_.front());
      held_.pop_front();
    }
    if (++checked_ % kReportEvery == 0) {
      std::printf("checked %llu fast %llu bytes %llu\n", static_cast<unsigned long long>(checked_),
                  static_cast<unsigned long long>(fast_), static_cast<unsigned long long>(bytes_));
    }
  }

 private:
  void Check(const TensorView& view) {
    if (const std::string wrong = CheckView(view); !wrong.empty()) Exit(kExitWrong, wrong);
    bytes_ += view.buffer(0).size();
  }

  std::deque<TensorView> held_;
  std::uint64_t checked_ = 0;
  std::uint64_t fast_ = 0;
  std::uint64_t bytes_ = 0;
};

// The name of a random tensor of a random producer; empty when that producer has none.
std::string PickName(Client& client, std::uint64_t producers, std::mt19937_64& random) {
  auto page = Check(client.List(fmt::format("{}p{}-", kSoakPrefix, random() % producers)), "List");
  if (page.tensors.empty()) return {};
  return page.tensors[random() % page.tensors.size()].name;
}

// The latest version of `name`; nullopt when it was deleted since it was listed.
std::optional<TensorView> AcquireLatest(Client& client, const std::string& name) {
  auto view = client.Acquire(name);
  if (!view && view.error().code() == StatusCode::kNotFound) return std::nullopt;
  if (!view) Fail(view.error(), "Acquire " + name);
  return std::move(*view);
}

int Consume(const std::string& socket, std::uint64_t producers, std::uint64_t seed) {
  std::mt19937_64 random(seed);
  auto client = ConnectTo(socket, "consumer");
  ViewChecker checker;
  while (true) {
    const std::string name = PickName(*client, producers, random);
    if (!name.empty()) {
      if (std::optional<TensorView> view = AcquireLatest(*client, name)) {
        checker.Take(std::move(*view));
      }
    }
    Pause(random);
  }
}

int ConsumeFast(const std::string& socket, std::uint64_t producers, std::uint64_t seed) {
  std::mt19937_64 random(seed);
  auto client = ConnectTo(socket, "fast consumer");
  ViewChecker checker;
  while (true) {
    const std::string name = PickName(*client, producers, random);
    if (name.empty()) {
      Pause(random);
      continue;
    }
    for (int i = 0; i < kReacquires; ++i) {
      std::optional<TensorView> view = AcquireLatest(*client, name);
      if (!view) break;
      checker.Take(std::move(*view));
    }
  }
}

int Usage() {
  std::fprintf(stderr,
               "usage: hurray_soak_worker producer SOCKET PRODUCER INCARNATION SEED\n"
               "       hurray_soak_worker consumer SOCKET PRODUCERS SEED\n"
               "       hurray_soak_worker fast-consumer SOCKET PRODUCERS SEED\n");
  return 2;
}

}  // namespace
}  // namespace hurray::soak

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  const std::vector<std::string> args(argv, argv + argc);
  using hurray::soak::ParseNumber;
  if (args.size() == 6 && args[1] == "producer") {
    return hurray::soak::Produce(args[2], ParseNumber(argv[3]), ParseNumber(argv[4]),
                                 ParseNumber(argv[5]));
  }
  if (args.size() == 5 && args[1] == "consumer") {
    return hurray::soak::Consume(args[2], ParseNumber(argv[3]), ParseNumber(argv[4]));
  }
  if (args.size() == 5 && args[1] == "fast-consumer") {
    return hurray::soak::ConsumeFast(args[2], ParseNumber(argv[3]), ParseNumber(argv[4]));
  }
  return hurray::soak::Usage();
}
