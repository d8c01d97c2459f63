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
//       few views and checks them again before releasing them. Prints "checked N" now and
//       then (N: views checked by this process so far).
//
// Exit status: 3 when a wrong byte or a wrong version number was seen; 4 when the daemon
// went away (UNAVAILABLE); 1 for any other error.

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
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

int Consume(const std::string& socket, std::uint64_t producers, std::uint64_t seed) {
  std::mt19937_64 random(seed);
  auto client = ConnectTo(socket, "consumer");
  std::deque<TensorView> held;
  std::uint64_t checked = 0;
  while (true) {
    auto page =
        Check(client->List(fmt::format("{}p{}-", kSoakPrefix, random() % producers)), "List");
    if (page.tensors.empty()) {
      Pause(random);
      continue;
    }
    const std::string& name = page.tensors[random() % page.tensors.size()].name;
    auto view = client->Acquire(name);
    if (!view && view.error().code() == StatusCode::kNotFound) continue;  // Deleted since.
    if (!view) Fail(view.error(), "Acquire " + name);
    if (const std::string wrong = CheckView(*view); !wrong.empty()) Exit(kExitWrong, wrong);
    held.push_back(std::move(*view));
    if (held.size() > kHeldViews) {
      if (const std::string wrong = CheckView(held.front()); !wrong.empty()) {
        Exit(kExitWrong, "held view changed: " + wrong);
      }
      held.pop_front();
    }
    if (++checked % 50 == 0)
      std::printf("checked %llu\n", static_cast<unsigned long long>(checked));
    Pause(random);
  }
}

int Usage() {
  std::fprintf(stderr,
               "usage: hurray_soak_worker producer SOCKET PRODUCER INCARNATION SEED\n"
               "       hurray_soak_worker consumer SOCKET PRODUCERS SEED\n");
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
  return hurray::soak::Usage();
}
