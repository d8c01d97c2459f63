#include "worker.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <limits>

#include "hurray/v1/exchange.pb.h"

namespace hurray::bench {

std::int64_t NowNanoseconds() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void EmitValue(std::string_view key, double value) {
  std::printf("%.*s %.17g\n", static_cast<int>(key.size()), key.data(), value);
}

void EmitSamples(std::string_view key, const std::vector<std::int64_t>& samples) {
  for (std::int64_t sample : samples) {
    std::printf("%.*s %lld\n", static_cast<int>(key.size()), key.data(),
                static_cast<long long>(sample));
  }
}

void ReadyThenWaitForGo() {
  std::printf("ready\n");
  std::fflush(stdout);
  std::string line;
  if (!std::getline(std::cin, line) || line != "go") WorkerFail("no \"go\" on stdin");
}

void WorkerFail(const std::string& what) {
  std::fprintf(stderr, "hurray_bench worker: %s\n", what.c_str());
  // Other threads may be running (the echo server's, gRPC's): whatever they do while the
  // process exits, the harness sees a failed worker.
  std::exit(1);  // NOLINT(concurrency-mt-unsafe)
}

void CheckOk(const Status& status, std::string_view call) {
  if (!status) WorkerFail(std::string(call) + ": " + status.error().ToString());
}

const std::string& Arg(const WorkerArgs& args, std::size_t index, std::string_view what) {
  if (index >= args.size()) WorkerFail("missing argument " + std::string(what));
  return args[index];
}

std::uint64_t ArgNumber(const WorkerArgs& args, std::size_t index, std::string_view what) {
  const std::string& text = Arg(args, index, what);
  std::uint64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) {
    WorkerFail(std::string(what) + " \"" + text + "\" is not a number");
  }
  return value;
}

std::unique_ptr<Client> ConnectWarm(const std::string& socket, std::string_view role,
                                    ClientPath path) {
  Client::Options options;
  options.socket_path = socket;
  options.client_name = "hurray_bench " + std::string(role);
  auto client = CheckOk(Client::Connect(WithClientPath(std::move(options), path)), "Connect");
  (void)CheckOk(client->Stats(), "Stats");
  return client;
}

TensorDescriptor BytesTensor(std::uint64_t bytes) {
  return CheckOk(TensorDescriptor::Dense(ElementType::kUint8, {bytes}), "Dense");
}

const std::vector<double>& WorkerResults::Values(const std::string& key) const {
  static const std::vector<double> kNone;
  auto found = values.find(key);
  return found == values.end() ? kNone : found->second;
}

double WorkerResults::Single(const std::string& key) const {
  const auto& found = Values(key);
  return found.empty() ? std::numeric_limits<double>::quiet_NaN() : found.front();
}

void WorkerResults::Merge(const WorkerResults& other) {
  for (const auto& [key, list] : other.values) {
    auto& mine = values[key];
    mine.insert(mine.end(), list.begin(), list.end());
  }
}

void ParseWorkerLine(const std::string& line, WorkerResults& results) {
  const auto space = line.find(' ');
  if (space == std::string::npos || space == 0) return;
  char* end = nullptr;
  const double value = std::strtod(line.c_str() + space + 1, &end);
  if (end == line.c_str() + space + 1) return;
  results.values[line.substr(0, space)].push_back(value);
}

}  // namespace hurray::bench
