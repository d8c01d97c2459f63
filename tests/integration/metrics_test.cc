// The Prometheus endpoint of a real hurrayd: metrics_address on a free loopback port, a
// put (another process) and a get (this one), then a scrape over plain HTTP: the values
// moved, `promtool check metrics` accepts the scrape, and the Grafana dashboard
// (deploy/grafana/hurray.json) queries only metrics the daemon exports.
#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "integration_test.h"
#include "test_tensors.h"
#include "testing/status_matchers.h"

#ifndef HURRAY_SOURCE_DIR
#error "HURRAY_SOURCE_DIR must name the source tree"
#endif
#ifndef HURRAY_PROMTOOL
#error "HURRAY_PROMTOOL must name promtool, or be empty"
#endif

namespace hurray::integration {
namespace {

// A loopback port nobody listens on now (the kernel's choice for port 0).
std::uint16_t FreeLoopbackPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  std::uint16_t port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
    port = ntohs(address.sin_port);
  }
  ::close(fd);
  return port;
}

// A TCP connection to 127.0.0.1:port whose reads give up after 20 s; -1 when it fails.
int ConnectLoopback(std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const timeval timeout{.tv_sec = 20, .tv_usec = 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// GET /metrics on 127.0.0.1:port with HTTP/1.0; the body, or nullopt.
std::optional<std::string> Scrape(std::uint16_t port) {
  const int fd = ConnectLoopback(port);
  if (fd < 0) return std::nullopt;
  const std::string request = "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
  if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(request.size())) {
    ::close(fd);
    return std::nullopt;
  }
  std::string response;
  char buffer[65536];
  for (ssize_t n; (n = ::recv(fd, buffer, sizeof(buffer), 0)) > 0;) {
    response.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(fd);
  const std::size_t body = response.find("\r\n\r\n");
  if (!response.starts_with("HTTP/1.1 200") || body == std::string::npos) return std::nullopt;
  return response.substr(body + 4);
}

// The value of the sample line that starts with `series` ("hurray_sessions",
// "hurray_pool_used_bytes{kind=\"cpu\",pool=\"cpu\"}"); nullopt when there is none.
std::optional<double> Sample(const std::string& scrape, const std::string& series) {
  std::istringstream lines(scrape);
  for (std::string line; std::getline(lines, line);) {
    if (line.starts_with(series + " ")) return std::stod(line.substr(series.size() + 1));
  }
  return std::nullopt;
}

class MetricsTest : public IntegrationTest {
 protected:
  [[nodiscard]] DaemonProcess::Options daemon_options() const override {
    DaemonProcess::Options options = IntegrationTest::daemon_options();
    options.settings.push_back(fmt::format("metrics_address = \"127.0.0.1:{}\"", port_));
    return options;
  }

  const std::uint16_t port_ = FreeLoopbackPort();
};

TEST_F(MetricsTest, ScrapeShowsAPutAndGetAndPassesPromtool) {
  ASSERT_NE(port_, 0);
  const std::optional<std::string> before = Scrape(port_);
  ASSERT_TRUE(before.has_value()) << daemon().Log();
  EXPECT_EQ(Sample(*before, "hurray_tensors"), 0.0) << *before;

  EXPECT_EQ(RunAgent({"produce", "it/metrics", "dense", "1"}), "version 1\n");
  {
    auto view = client().Acquire("it/metrics");
    ASSERT_OK(view);
    EXPECT_ERROR(client().Acquire("it/absent"), StatusCode::kNotFound, {"it/absent"});
    const std::optional<std::string> during = Scrape(port_);
    ASSERT_TRUE(during.has_value());
    EXPECT_EQ(Sample(*during, "hurray_tensors"), 1.0) << *during;
    EXPECT_EQ(Sample(*during, "hurray_leases"), 1.0);
    EXPECT_GT(Sample(*during, "hurray_pool_used_bytes{kind=\"cpu\",pool=\"cpu\"}").value_or(0), 0);
  }
  const std::optional<std::string> after = Scrape(port_);
  ASSERT_TRUE(after.has_value());
  const std::string& scrape = *after;
  EXPECT_GT(Sample(scrape, "hurray_published_bytes_total").value_or(0), 0) << scrape;
  // The producer's session ended (the agent exited).
  EXPECT_GE(Sample(scrape, "hurray_closed_sessions_total").value_or(0), 1) << scrape;
  EXPECT_EQ(Sample(scrape, "hurray_pool_capacity_bytes{kind=\"cpu\",pool=\"cpu\"}"),
            static_cast<double>(daemon().pool_capacity_bytes()));
  // The test's pool is small enough to be reserved whole before the daemon serves.
  EXPECT_EQ(Sample(scrape, "hurray_pool_reserved_bytes{kind=\"cpu\",pool=\"cpu\"}"),
            static_cast<double>(daemon().pool_capacity_bytes()));
  // The get went over one channel or the other; the miss was NOT_FOUND.
  double acquires = 0;
  double misses = 0;
  for (const char* channel : {"grpc", "session"}) {
    acquires += Sample(scrape, fmt::format("hurray_requests_total{{channel=\"{}\",method="
                                           "\"Acquire\",code=\"OK\"}}",
                                           channel))
                    .value_or(0);
    misses += Sample(scrape, fmt::format("hurray_requests_total{{channel=\"{}\",method="
                                         "\"Acquire\",code=\"NOT_FOUND\"}}",
                                         channel))
                  .value_or(0);
  }
  EXPECT_GE(acquires, 1);
  EXPECT_EQ(misses, 1);
  EXPECT_NE(scrape.find("hurray_request_duration_seconds_bucket{channel=\"grpc\",method="
                        "\"Stats\",le=\"+Inf\"}"),
            std::string::npos);

  const std::string promtool = HURRAY_PROMTOOL;
  if (promtool.empty()) GTEST_SKIP() << "promtool not found (Debian package prometheus)";
  const std::string path = daemon().directory() + "/scrape.txt";
  std::ofstream(path) << scrape;
  const std::string command = fmt::format("{} check metrics < {} 2>&1", promtool, path);
  FILE* pipe = ::popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string output;
  char buffer[4096];
  for (std::size_t n; (n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0;)
    output.append(buffer, n);
  EXPECT_EQ(::pclose(pipe), 0) << output;
  EXPECT_EQ(output, "") << output;
}

// A producer that streams with PublishAndAllocate asks for one allocation, its first: every
// next one comes with the publish before it.
TEST_F(MetricsTest, AStreamingProducerSendsOneAllocateRequest) {
  ASSERT_NE(port_, 0);
  auto tensor = client().Allocate(MakeByteTensor(4096));
  ASSERT_OK(tensor);
  constexpr int kPublishes = 10;
  for (int i = 1; i < kPublishes; ++i) {
    auto published = tensor->PublishAndAllocate("it/stream");
    ASSERT_OK(published);
    ASSERT_OK(published->next);
    *tensor = std::move(*published->next);
  }
  ASSERT_OK(tensor->Publish("it/stream"));
  const std::optional<std::string> scrape = Scrape(port_);
  ASSERT_TRUE(scrape.has_value());
  const auto requests = [&](const char* method) {
    return Sample(*scrape, fmt::format("hurray_requests_total{{channel=\"session\",method="
                                       "\"{}\",code=\"OK\"}}",
                                       method));
  };
  EXPECT_EQ(requests("Allocate"), 1.0) << *scrape;
  EXPECT_EQ(requests("Publish"), static_cast<double>(kPublishes)) << *scrape;
  ASSERT_OK(client().Delete("it/stream"));
}

// The audit's slow-header attack: connections that never finish their request (more of them
// than the exposer has threads) hold a thread each only until request_timeout_ms closes
// them, so a scrape behind them is answered within seconds, not never.
TEST_F(MetricsTest, ConnectionsThatNeverFinishTheirRequestDoNotKeepScrapesOut) {
  ASSERT_NE(port_, 0);
  constexpr int kStalled = 12;  // Above kMetricsThreads (8).
  std::vector<int> stalled;
  for (int i = 0; i < kStalled; ++i) {
    const int fd = ConnectLoopback(port_);
    ASSERT_GE(fd, 0) << i;
    const std::string partial = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n";
    ASSERT_EQ(::send(fd, partial.data(), partial.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(partial.size()));
    stalled.push_back(fd);
  }
  const auto start = std::chrono::steady_clock::now();
  const std::optional<std::string> scrape = Scrape(port_);
  const auto took = std::chrono::steady_clock::now() - start;
  std::cout << "scrape behind " << kStalled << " stalled connections took "
            << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms" << '\n'
            << std::flush;
  ASSERT_TRUE(scrape.has_value()) << daemon().Log(4000);
  // The gRPC side's figures are there too: this test's client holds a connection.
  EXPECT_GE(Sample(*scrape, "hurray_grpc_connections").value_or(-1), 0) << *scrape;
  EXPECT_EQ(Sample(*scrape, "hurray_watchers"), 0.0) << *scrape;
  EXPECT_EQ(Sample(*scrape, "hurray_refused_grpc_connections_total"), 0.0) << *scrape;
  // The stalled ones were closed by the daemon: a read sees the end, not a timeout.
  char byte = 0;
  for (const int fd : stalled) {
    EXPECT_GE(::recv(fd, &byte, 1, 0), 0) << std::strerror(errno);
    ::close(fd);
  }
}

TEST_F(MetricsTest, GrafanaDashboardQueriesOnlyExportedMetrics) {
  const std::optional<std::string> scrape = Scrape(port_);
  ASSERT_TRUE(scrape.has_value());
  std::set<std::string> exported;
  const std::regex type_line(R"(^# TYPE (hurray_\w+) (\w+)$)");
  std::istringstream lines(*scrape);
  for (std::string line; std::getline(lines, line);) {
    std::smatch match;
    if (!std::regex_match(line, match, type_line)) continue;
    exported.insert(match[1]);
    if (match[2] == "histogram") {
      for (const char* suffix : {"_bucket", "_sum", "_count"})
        exported.insert(match[1].str() + suffix);
    }
  }
  ASSERT_FALSE(exported.empty()) << *scrape;

  std::ifstream file(std::string(HURRAY_SOURCE_DIR) + "/deploy/grafana/hurray.json");
  ASSERT_TRUE(file.good());
  const nlohmann::json dashboard = nlohmann::json::parse(file);  // Throws (fails) if not JSON.
  const std::regex metric_name(R"(hurray_\w+)");
  int queried = 0;
  for (const auto& panel : dashboard.at("panels")) {
    for (const auto& target : panel.at("targets")) {
      const std::string expression = target.at("expr");
      for (std::sregex_iterator it(expression.begin(), expression.end(), metric_name), end;
           it != end; ++it) {
        ++queried;
        EXPECT_TRUE(exported.contains(it->str()))
            << "panel \"" << panel.at("title").get<std::string>() << "\" queries " << it->str()
            << ", which hurrayd does not export";
      }
    }
  }
  EXPECT_GT(queried, 10);
}

}  // namespace
}  // namespace hurray::integration
