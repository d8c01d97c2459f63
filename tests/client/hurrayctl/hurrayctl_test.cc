// Integration tests of hurrayctl: the real hurrayd on a socket in a temporary directory, and
// the real hurrayctl binary run as a separate process, its stdout, stderr and exit status
// captured. HURRAYD_PATH and HURRAYCTL_PATH come from the build.
#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "hurray/client.h"
#include "hurray/v1/exchange.pb.h"
#include "hurrayctl/npy.h"
#include "testing/child_process.h"
#include "testing/daemon_expectations.h"
#include "testing/daemon_process.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace hurray {
namespace {

using ::hurray::testing::ChildProcess;
using ::hurray::testing::DaemonProcess;
using ::hurray::testing::TempDir;
using std::chrono::milliseconds;
using std::chrono::steady_clock;

constexpr auto kProcessTimeout = std::chrono::seconds(30);

std::string ReadFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()};
}

void WriteFile(const std::string& path, std::string_view bytes) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

bool Contains(std::string_view text, std::string_view fragment) {
  return text.find(fragment) != std::string_view::npos;
}

// Parses JSON text into a generic google.protobuf.Struct; fails the test if it is not a JSON
// object.
google::protobuf::Struct ParseJson(const std::string& text) {
  google::protobuf::Struct object;
  auto status = google::protobuf::util::JsonStringToMessage(text, &object);
  EXPECT_TRUE(status.ok()) << status.ToString() << " in: " << text;
  return object;
}

// A .npy file's bytes: the header NpyHeaderFor writes, then `data`.
std::string NpyFileBytes(ElementType type, const std::vector<std::uint64_t>& shape,
                         std::string_view data) {
  auto header = NpyHeaderFor(type, shape);
  EXPECT_TRUE(header.has_value());
  return header.value_or("") + std::string(data);
}

// 12 float32 values -1.0, -0.75, ..., 1.75: a (3, 4) matrix.
std::string MatrixData() {
  std::string data;
  for (int i = 0; i < 12; ++i) {
    const float value = static_cast<float>(i) * 0.25f - 1.0f;
    char bytes[sizeof(float)];
    std::memcpy(bytes, &value, sizeof(float));
    data.append(bytes, sizeof(float));
  }
  return data;
}

// A process whose stdout and stderr go to files.
struct Process {
  ChildProcess child;
  std::string stdout_path;
  std::string stderr_path;
};

struct Finished {
  int exit_code = -1;  // -1 when killed by a signal.
  std::string out;
  std::string err;
};

class HurrayctlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(dir_, TempDir::Create("hurrayctl_test"));
    ASSERT_OK_AND_ASSIGN(daemon_,
                         DaemonProcess::Start({.binary = HURRAYD_PATH, .name = "hurrayctl-test"}));
    socket_ = daemon_->socket_path();
  }

  void TearDown() override {
    if (daemon_) ::hurray::testing::ExpectStopsCleanly(*daemon_);
  }

  // Starts `argv` with stdout and stderr going to fresh files in dir_, HURRAY_SOCKET removed
  // from the environment and `extra_env` added to it.
  Result<Process> Spawn(const std::vector<std::string>& argv,
                        const std::vector<std::string>& extra_env = {}) {
    const int index = next_output_++;
    const std::string stdout_path = Path("out." + std::to_string(index));
    const std::string stderr_path = Path("err." + std::to_string(index));
    HURRAY_ASSIGN_OR_RETURN(ChildProcess child,
                            ChildProcess::Start(argv, {.stdout_path = stdout_path,
                                                       .stderr_path = stderr_path,
                                                       .environment = extra_env,
                                                       .unset_environment = {"HURRAY_SOCKET"}}));
    return Process{std::move(child), stdout_path, stderr_path};
  }

  // Waits for `process` to exit (killing it after kProcessTimeout) and collects its output.
  Finished Wait(Process& process) {
    Finished finished;
    std::optional<int> status = process.child.Wait(kProcessTimeout);
    if (!status) {
      ADD_FAILURE() << process.child.command_line() << " did not exit in time; killing it";
      process.child.Kill();
      status = process.child.Wait(milliseconds(0));
    }
    finished.exit_code = WIFEXITED(*status) ? WEXITSTATUS(*status) : -1;
    finished.out = ReadFile(process.stdout_path);
    finished.err = ReadFile(process.stderr_path);
    return finished;
  }

  // Runs hurrayctl with --socket and `args`, and waits for it.
  Finished Ctl(const std::vector<std::string>& args) {
    auto process = Spawn(CtlArgv(args));
    if (!process) {
      ADD_FAILURE() << "hurrayctl: " << process.error().ToString();
      return {};
    }
    return Wait(*process);
  }

  [[nodiscard]] std::vector<std::string> CtlArgv(const std::vector<std::string>& args) const {
    std::vector<std::string> argv = {HURRAYCTL_PATH, "--socket", socket_};
    argv.insert(argv.end(), args.begin(), args.end());
    return argv;
  }

  // Waits until `process` printed `fragment` on stdout.
  bool WaitForOutput(const Process& process, std::string_view fragment) {
    const auto deadline = steady_clock::now() + std::chrono::seconds(10);
    while (steady_clock::now() < deadline) {
      if (Contains(ReadFile(process.stdout_path), fragment)) return true;
      std::this_thread::sleep_for(milliseconds(10));
    }
    return false;
  }

  [[nodiscard]] std::string Path(std::string_view name) const { return dir_->Path(name); }

  std::optional<TempDir> dir_;  // The test's files.
  std::unique_ptr<DaemonProcess> daemon_;
  std::string socket_;
  int next_output_ = 0;
};

TEST_F(HurrayctlTest, PutListDescribeGetRemove) {
  const std::string put_file = Path("matrix.npy");
  const std::string data = MatrixData();
  const std::string original = NpyFileBytes(ElementType::kFloat32, {3, 4}, data);
  WriteFile(put_file, original);

  Finished put = Ctl({"put", "test/matrix", put_file});
  ASSERT_EQ(put.exit_code, 0) << put.err;
  EXPECT_TRUE(Contains(put.out, "test/matrix")) << put.out;
  EXPECT_TRUE(Contains(put.out, "version 1")) << put.out;

  Finished ls = Ctl({"ls"});
  ASSERT_EQ(ls.exit_code, 0) << ls.err;
  for (const char* column :
       {"NAME", "OWNER", "VERSION", "TYPE", "SHAPE", "SIZE", "LEASES", "PUBLISHED"}) {
    EXPECT_TRUE(Contains(ls.out, column)) << ls.out;
  }
  EXPECT_TRUE(Contains(ls.out, "test/matrix")) << ls.out;
  EXPECT_TRUE(Contains(ls.out, "float32")) << ls.out;
  EXPECT_TRUE(Contains(ls.out, "[3, 4]")) << ls.out;
  EXPECT_TRUE(Contains(ls.out, "48 B")) << ls.out;

  Finished describe = Ctl({"describe", "test/matrix"});
  ASSERT_EQ(describe.exit_code, 0) << describe.err;
  EXPECT_TRUE(Contains(describe.out, "float32[3, 4]")) << describe.out;
  EXPECT_TRUE(Contains(describe.out, "buffers:")) << describe.out;
  EXPECT_TRUE(Contains(describe.out, "versions:")) << describe.out;

  const std::string get_file = Path("copy.npy");
  Finished get = Ctl({"get", "test/matrix", get_file});
  ASSERT_EQ(get.exit_code, 0) << get.err;
  const std::string copy = ReadFile(get_file);
  const std::vector<std::uint8_t> copy_bytes(copy.begin(), copy.end());
  auto header = ParseNpyHeader(copy_bytes, copy_bytes.size());
  ASSERT_OK(header);
  EXPECT_EQ(header->element_type, ElementType::kFloat32);
  EXPECT_EQ(header->shape, (std::vector<std::uint64_t>{3, 4}));
  EXPECT_EQ(copy.substr(header->data_offset), data);
  EXPECT_EQ(copy, original);

  Finished stats = Ctl({"--json", "stats"});
  ASSERT_EQ(stats.exit_code, 0) << stats.err;
  const google::protobuf::Struct stats_json = ParseJson(stats.out);
  ASSERT_TRUE(stats_json.fields().count("pools") == 1) << stats.out;
  EXPECT_GE(stats_json.fields().at("pools").list_value().values_size(), 1);

  Finished rm = Ctl({"rm", "test/matrix"});
  ASSERT_EQ(rm.exit_code, 0) << rm.err;
  EXPECT_TRUE(Contains(rm.out, "deleted 1 version")) << rm.out;

  Finished empty = Ctl({"ls"});
  ASSERT_EQ(empty.exit_code, 0) << empty.err;
  EXPECT_FALSE(Contains(empty.out, "test/matrix")) << empty.out;

  const std::string missing_file = Path("missing.npy");
  Finished missing = Ctl({"get", "test/matrix", missing_file});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_TRUE(Contains(missing.err, "hurrayctl: NOT_FOUND: ")) << missing.err;
  EXPECT_FALSE(std::filesystem::exists(missing_file));
}

TEST_F(HurrayctlTest, JsonOutputsParse) {
  WriteFile(Path("v.npy"), NpyFileBytes(ElementType::kInt16, {5}, std::string(10, '\x01')));
  Finished put = Ctl({"--json", "put", "test/vector", Path("v.npy")});
  ASSERT_EQ(put.exit_code, 0) << put.err;
  const google::protobuf::Struct put_json = ParseJson(put.out);
  EXPECT_EQ(put_json.fields().at("name").string_value(), "test/vector");
  EXPECT_EQ(put_json.fields().at("version").number_value(), 1.0);

  // Global options may follow the command as well.
  Finished ls = Ctl({"ls", "test/", "--json"});
  ASSERT_EQ(ls.exit_code, 0) << ls.err;
  hurray::v1::ListResponse list;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(ls.out, &list).ok()) << ls.out;
  ASSERT_EQ(list.tensors_size(), 1) << ls.out;
  EXPECT_EQ(list.tensors(0).name(), "test/vector");
  EXPECT_EQ(list.tensors(0).element_type(), hurray::v1::ELEMENT_TYPE_INT16);
  EXPECT_TRUE(Contains(ls.out, "\"latest_version\"")) << "proto field names: " << ls.out;

  Finished describe = Ctl({"--json", "describe", "test/vector", "--version", "1"});
  ASSERT_EQ(describe.exit_code, 0) << describe.err;
  hurray::v1::DescribeResponse described;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(describe.out, &described).ok())
      << describe.out;
  EXPECT_EQ(described.tensor().name(), "test/vector");
  EXPECT_EQ(described.tensor().version(), 1u);
  EXPECT_EQ(described.versions_size(), 1);

  Finished get = Ctl({"--json", "get", "test/vector", Path("out.npy")});
  ASSERT_EQ(get.exit_code, 0) << get.err;
  const google::protobuf::Struct get_json = ParseJson(get.out);
  EXPECT_EQ(get_json.fields().at("file").string_value(), Path("out.npy"));
  EXPECT_EQ(get_json.fields().at("bytes").number_value(),
            static_cast<double>(std::filesystem::file_size(Path("out.npy"))));

  Finished rm = Ctl({"--json", "rm", "test/vector"});
  ASSERT_EQ(rm.exit_code, 0) << rm.err;
  EXPECT_EQ(ParseJson(rm.out).fields().at("versions_deleted").number_value(), 1.0);

  Finished empty = Ctl({"--json", "ls"});
  ASSERT_EQ(empty.exit_code, 0) << empty.err;
  EXPECT_TRUE(Contains(empty.out, "\"tensors\":[]")) << empty.out;
}

TEST_F(HurrayctlTest, MalformedFilesFailAndTheDaemonKeepsServing) {
  std::string bad = NpyFileBytes(ElementType::kFloat32, {3, 4}, MatrixData());
  bad.replace(bad.find("'shape'"), 7, "'shapf'");
  WriteFile(Path("bad_key.npy"), bad);
  Finished bad_key = Ctl({"put", "test/bad", Path("bad_key.npy")});
  EXPECT_EQ(bad_key.exit_code, 1);
  EXPECT_TRUE(Contains(bad_key.err, "hurrayctl: INVALID_ARGUMENT: ")) << bad_key.err;
  EXPECT_TRUE(Contains(bad_key.err, "bad_key.npy")) << bad_key.err;
  EXPECT_TRUE(Contains(bad_key.err, "unknown key 'shapf'")) << bad_key.err;

  const std::string good = NpyFileBytes(ElementType::kFloat32, {3, 4}, MatrixData());
  WriteFile(Path("short.npy"), good.substr(0, good.size() - 4));
  Finished short_file = Ctl({"put", "test/bad", Path("short.npy")});
  EXPECT_EQ(short_file.exit_code, 1);
  EXPECT_TRUE(Contains(short_file.err, "file holds 44 data bytes but shape (3, 4) of <f4 needs 48"))
      << short_file.err;

  std::string big_endian_file = good;
  big_endian_file.replace(big_endian_file.find("'<f4'"), 5, "'>f4'");
  WriteFile(Path("big_endian.npy"), big_endian_file);
  Finished big_endian = Ctl({"put", "test/bad", Path("big_endian.npy")});
  EXPECT_EQ(big_endian.exit_code, 1);
  EXPECT_TRUE(Contains(big_endian.err, "big-endian")) << big_endian.err;

  WriteFile(Path("text.npy"), "not a numpy file at all\n");
  Finished text = Ctl({"put", "test/bad", Path("text.npy")});
  EXPECT_EQ(text.exit_code, 1);
  EXPECT_TRUE(Contains(text.err, "not a .npy file")) << text.err;

  Finished absent = Ctl({"put", "test/bad", Path("absent.npy")});
  EXPECT_EQ(absent.exit_code, 1);
  EXPECT_TRUE(Contains(absent.err, "hurrayctl: NOT_FOUND: open " + Path("absent.npy")))
      << absent.err;

  Finished directory = Ctl({"put", "test/bad", dir_->path()});
  EXPECT_EQ(directory.exit_code, 1);
  EXPECT_TRUE(Contains(directory.err, "not a regular file")) << directory.err;

  // The daemon still serves, holds nothing of the failed puts, and takes a good file.
  Finished stats = Ctl({"--json", "stats"});
  ASSERT_EQ(stats.exit_code, 0) << stats.err;
  hurray::v1::StatsResponse parsed;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(stats.out, &parsed).ok());
  EXPECT_EQ(parsed.tensor_count(), 0u);
  EXPECT_EQ(parsed.pending_allocation_count(), 0u);
  WriteFile(Path("good.npy"), good);
  Finished put = Ctl({"put", "test/good", Path("good.npy")});
  EXPECT_EQ(put.exit_code, 0) << put.err;
}

TEST_F(HurrayctlTest, UsageErrorsExitTwo) {
  Finished unknown = Ctl({"frobnicate"});
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_TRUE(Contains(unknown.err, "frobnicate")) << unknown.err;

  EXPECT_EQ(Ctl({}).exit_code, 2);
  EXPECT_EQ(Ctl({"describe"}).exit_code, 2);
  EXPECT_EQ(Ctl({"put", "test/x"}).exit_code, 2);
  EXPECT_EQ(Ctl({"ls", "--frobnicate"}).exit_code, 2);
  EXPECT_EQ(Ctl({"rm", "test/x", "--version", "0"}).exit_code, 2);
  EXPECT_EQ(Ctl({"rm", "test/x", "--version", "-1"}).exit_code, 2);
  EXPECT_EQ(Ctl({"get", "test/x", Path("x.npy"), "--wait", "soon"}).exit_code, 2);

  Finished help = Ctl({"--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_TRUE(Contains(help.out, "put")) << help.out;
}

// The probe an operator (or a Kubernetes exec probe) runs: grpc.health.v1 Check, its answer
// in words and in the exit status.
TEST_F(HurrayctlTest, HealthSaysServingAndExitsByIt) {
  Finished daemon = Ctl({"health"});
  EXPECT_EQ(daemon.exit_code, 0) << daemon.err;
  EXPECT_EQ(daemon.out, "SERVING\n");
  Finished exchange = Ctl({"health", "hurray.v1.Exchange"});
  EXPECT_EQ(exchange.exit_code, 0) << exchange.err;
  EXPECT_EQ(exchange.out, "SERVING\n");
  Finished json = Ctl({"--json", "health"});
  EXPECT_EQ(json.exit_code, 0) << json.err;
  EXPECT_EQ(ParseJson(json.out).fields().at("status").string_value(), "SERVING");

  Finished unknown = Ctl({"health", "no.such.Service"});
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_TRUE(Contains(unknown.err, "hurrayctl: NOT_FOUND")) << unknown.err;

  ASSERT_OK_AND_ASSIGN(Process process,
                       Spawn({HURRAYCTL_PATH, "--socket", Path("nobody.sock"), "health"}));
  Finished nobody = Wait(process);
  EXPECT_EQ(nobody.exit_code, 1);
  EXPECT_TRUE(Contains(nobody.err, "no hurrayd answers at " + Path("nobody.sock"))) << nobody.err;
}

TEST_F(HurrayctlTest, UnreachableDaemonIsUnavailable) {
  ASSERT_OK_AND_ASSIGN(Process process,
                       Spawn({HURRAYCTL_PATH, "--socket", Path("nobody.sock"), "stats"}));
  Finished stats = Wait(process);
  EXPECT_EQ(stats.exit_code, 1);
  EXPECT_TRUE(Contains(stats.err, "hurrayctl: UNAVAILABLE: no hurrayd answers at " +
                                      Path("nobody.sock") + " (connect "))
      << stats.err;
  EXPECT_TRUE(Contains(stats.err, "No such file or directory")) << stats.err;
  EXPECT_TRUE(Contains(stats.err, "). Is it running?")) << stats.err;
  EXPECT_TRUE(Contains(stats.err, "Start it with `hurrayd`")) << stats.err;
  EXPECT_TRUE(Contains(stats.err, "--socket PATH or $HURRAY_SOCKET")) << stats.err;

  // The same words from the commands that go through the full client.
  ASSERT_OK_AND_ASSIGN(Process rm_process,
                       Spawn({HURRAYCTL_PATH, "--socket", Path("nobody.sock"), "rm", "test/x"}));
  Finished rm = Wait(rm_process);
  EXPECT_EQ(rm.exit_code, 1);
  EXPECT_TRUE(Contains(rm.err, "no hurrayd answers at " + Path("nobody.sock"))) << rm.err;
}

// The keys of every JSON object in `json`, in the order they appear.
std::vector<std::string> JsonKeys(const std::string& json) {
  std::vector<std::string> keys;
  for (std::size_t at = json.find("\":"); at != std::string::npos; at = json.find("\":", at + 1)) {
    const std::size_t start = json.rfind('"', at - 1);
    keys.push_back(json.substr(start + 1, at - start - 1));
  }
  return keys;
}

TEST_F(HurrayctlTest, JsonKeysComeInTheSameOrderEveryRun) {
  WriteFile(Path("v.npy"), NpyFileBytes(ElementType::kInt16, {5}, std::string(10, '\x01')));
  Finished first_put = Ctl({"--json", "put", "test/a", Path("v.npy")});
  Finished second_put = Ctl({"--json", "put", "test/b", Path("v.npy")});
  ASSERT_EQ(first_put.exit_code, 0) << first_put.err;
  ASSERT_EQ(second_put.exit_code, 0) << second_put.err;
  EXPECT_EQ(JsonKeys(first_put.out), (std::vector<std::string>{"bytes", "name", "version"}))
      << first_put.out;
  EXPECT_EQ(JsonKeys(second_put.out), JsonKeys(first_put.out));

  Finished get = Ctl({"--json", "get", "test/a", Path("out.npy")});
  ASSERT_EQ(get.exit_code, 0) << get.err;
  EXPECT_EQ(JsonKeys(get.out), (std::vector<std::string>{"bytes", "file", "name", "version"}))
      << get.out;

  for (const std::vector<std::string>& command :
       {std::vector<std::string>{"--json", "stats"}, std::vector<std::string>{"--json", "ls"},
        std::vector<std::string>{"--json", "describe", "test/a"}}) {
    Finished first = Ctl(command);
    Finished second = Ctl(command);
    ASSERT_EQ(first.exit_code, 0) << first.err;
    EXPECT_FALSE(JsonKeys(first.out).empty()) << first.out;
    EXPECT_EQ(JsonKeys(second.out), JsonKeys(first.out)) << first.out << second.out;
  }
}

TEST_F(HurrayctlTest, TopRefusesWhenStdoutIsNotATerminal) {
  Finished top = Ctl({"top"});
  EXPECT_EQ(top.exit_code, 1);
  EXPECT_TRUE(Contains(top.err,
                       "hurrayctl: FAILED_PRECONDITION: top draws a live view on a "
                       "terminal, and stdout is not one"))
      << top.err;
  EXPECT_EQ(Ctl({"top", "--interval", "0"}).exit_code, 2);
}

TEST_F(HurrayctlTest, ListShowsAges) {
  WriteFile(Path("v.npy"), NpyFileBytes(ElementType::kInt16, {5}, std::string(10, '\x01')));
  ASSERT_EQ(Ctl({"put", "test/aged", Path("v.npy")}).exit_code, 0);
  Finished ls = Ctl({"ls"});
  ASSERT_EQ(ls.exit_code, 0) << ls.err;
  EXPECT_TRUE(Contains(ls.out, "s ago")) << ls.out;
  Finished describe = Ctl({"describe", "test/aged"});
  ASSERT_EQ(describe.exit_code, 0) << describe.err;
  EXPECT_TRUE(Contains(describe.out, "s ago)")) << describe.out;
}

TEST_F(HurrayctlTest, UsesHurraySocketWhenNoSocketIsGiven) {
  ASSERT_OK_AND_ASSIGN(Process process,
                       Spawn({HURRAYCTL_PATH, "stats"}, {"HURRAY_SOCKET=" + socket_}));
  Finished stats = Wait(process);
  EXPECT_EQ(stats.exit_code, 0) << stats.err;
  EXPECT_TRUE(Contains(stats.out, "pools:")) << stats.out;
}

TEST_F(HurrayctlTest, RoundTripsScalarsEmptyAndLargeTensors) {
  struct Case {
    std::string name;
    ElementType type;
    std::vector<std::uint64_t> shape;
    std::string data;
  };
  std::string large(8 << 20, '\0');
  for (std::size_t i = 0; i < large.size(); ++i) large[i] = static_cast<char>(i * 7 + i / 4096);
  const std::vector<Case> cases = {
      {"test/scalar",
       ElementType::kFloat64,
       {},
       std::string("\x00\x00\x00\x00\x00\x00\xf0\x3f", 8)},
      {"test/empty", ElementType::kInt32, {0}, ""},
      {"test/flags", ElementType::kBool, {3}, std::string("\x01\x00\x01", 3)},
      {"test/large", ElementType::kUint8, {2048, 4096}, large},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string original = NpyFileBytes(c.type, c.shape, c.data);
    WriteFile(Path("in.npy"), original);
    Finished put = Ctl({"put", c.name, Path("in.npy")});
    ASSERT_EQ(put.exit_code, 0) << put.err;
    Finished get = Ctl({"get", c.name, Path("out.npy")});
    ASSERT_EQ(get.exit_code, 0) << get.err;
    EXPECT_TRUE(ReadFile(Path("out.npy")) == original);
  }
}

TEST_F(HurrayctlTest, ListReadsEveryPage) {
  // hurrayctl asks for pages of 1000: 1005 names take two.
  auto client = Client::Connect(Client::Options{.socket_path = socket_});
  ASSERT_OK(client);
  auto descriptor = TensorDescriptor::Dense(ElementType::kUint8, {1});
  ASSERT_OK(descriptor);
  constexpr int kNames = 1005;
  for (int i = 0; i < kNames; ++i) {
    auto tensor = (*client)->Allocate(*descriptor);
    ASSERT_OK(tensor);
    char name[32];
    std::snprintf(name, sizeof(name), "page/t%04d", i);
    ASSERT_OK(tensor->Publish(name));
  }
  Finished json = Ctl({"--json", "ls", "page/"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  hurray::v1::ListResponse list;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(json.out, &list).ok());
  ASSERT_EQ(list.tensors_size(), kNames);
  EXPECT_EQ(list.tensors(0).name(), "page/t0000");
  EXPECT_EQ(list.tensors(kNames - 1).name(), "page/t1004");
  EXPECT_TRUE(list.next_page_token().empty());

  Finished text = Ctl({"ls", "page/"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_EQ(std::count(text.out.begin(), text.out.end(), '\n'), kNames + 1);  // With header.
}

TEST_F(HurrayctlTest, DescribeAndGetReachSupersededVersions) {
  const std::string first = NpyFileBytes(ElementType::kFloat32, {3, 4}, MatrixData());
  WriteFile(Path("first.npy"), first);
  ASSERT_EQ(Ctl({"put", "test/versioned", Path("first.npy")}).exit_code, 0);
  // A lease keeps version 1 alive once version 2 supersedes it.
  auto client = Client::Connect(Client::Options{.socket_path = socket_});
  ASSERT_OK(client);
  auto lease = (*client)->Acquire("test/versioned");
  ASSERT_OK(lease);
  const std::string second = NpyFileBytes(ElementType::kInt8, {2}, std::string("\x05\x06", 2));
  WriteFile(Path("second.npy"), second);
  Finished put = Ctl({"put", "test/versioned", Path("second.npy")});
  ASSERT_EQ(put.exit_code, 0) << put.err;
  EXPECT_TRUE(Contains(put.out, "version 2")) << put.out;

  Finished describe = Ctl({"describe", "test/versioned"});
  ASSERT_EQ(describe.exit_code, 0) << describe.err;
  EXPECT_TRUE(Contains(describe.out, "int8[2]")) << describe.out;
  EXPECT_TRUE(Contains(describe.out, "superseded")) << describe.out;
  EXPECT_TRUE(Contains(describe.out, "current")) << describe.out;

  Finished old = Ctl({"describe", "test/versioned", "--version", "1"});
  ASSERT_EQ(old.exit_code, 0) << old.err;
  EXPECT_TRUE(Contains(old.out, "float32[3, 4]")) << old.out;

  ASSERT_EQ(Ctl({"get", "test/versioned", Path("v1.npy"), "--version", "1"}).exit_code, 0);
  EXPECT_EQ(ReadFile(Path("v1.npy")), first);
  ASSERT_EQ(Ctl({"get", "test/versioned", Path("v2.npy")}).exit_code, 0);
  EXPECT_EQ(ReadFile(Path("v2.npy")), second);

  Finished rm = Ctl({"rm", "test/versioned", "--version", "2"});
  ASSERT_EQ(rm.exit_code, 0) << rm.err;
  EXPECT_TRUE(Contains(rm.out, "deleted 1 version of test/versioned")) << rm.out;
}

TEST_F(HurrayctlTest, GetRefusesTypesWithoutANumPyDtype) {
  auto client = Client::Connect(Client::Options{.socket_path = socket_});
  ASSERT_OK(client);
  auto descriptor = TensorDescriptor::Dense(ElementType::kBfloat16, {4});
  ASSERT_OK(descriptor);
  auto tensor = (*client)->Allocate(*descriptor);
  ASSERT_OK(tensor);
  ASSERT_OK(tensor->Publish("test/bf16"));

  Finished get = Ctl({"get", "test/bf16", Path("bf16.npy")});
  EXPECT_EQ(get.exit_code, 1);
  EXPECT_TRUE(Contains(get.err, "hurrayctl: FAILED_PRECONDITION: ")) << get.err;
  EXPECT_TRUE(Contains(get.err, "bfloat16")) << get.err;
  EXPECT_FALSE(std::filesystem::exists(Path("bf16.npy")));
}

TEST_F(HurrayctlTest, GetWaitsForTheTensor) {
  Finished timed_out = Ctl({"get", "test/later", Path("later.npy"), "--wait", "50"});
  EXPECT_EQ(timed_out.exit_code, 1);
  EXPECT_TRUE(Contains(timed_out.err, "DEADLINE_EXCEEDED")) << timed_out.err;

  ASSERT_OK_AND_ASSIGN(Process waiting,
                       Spawn(CtlArgv({"get", "test/later", Path("later.npy"), "--wait", "20000"})));
  std::this_thread::sleep_for(milliseconds(200));
  WriteFile(Path("in.npy"), NpyFileBytes(ElementType::kFloat32, {3, 4}, MatrixData()));
  ASSERT_EQ(Ctl({"put", "test/later", Path("in.npy")}).exit_code, 0);
  Finished get = Wait(waiting);
  EXPECT_EQ(get.exit_code, 0) << get.err;
  EXPECT_EQ(ReadFile(Path("later.npy")), ReadFile(Path("in.npy")));
}

TEST_F(HurrayctlTest, WatchPrintsEventsUntilInterrupted) {
  ASSERT_OK_AND_ASSIGN(Process watch, Spawn(CtlArgv({"--json", "watch", "test/"})));
  // The watch is live once it reports a publish; until then, publish probes.
  auto client = Client::Connect(Client::Options{.socket_path = socket_});
  ASSERT_OK(client);
  auto descriptor = TensorDescriptor::Dense(ElementType::kUint8, {1});
  ASSERT_OK(descriptor);
  const auto deadline = steady_clock::now() + std::chrono::seconds(10);
  while (!Contains(ReadFile(watch.stdout_path), "test/probe")) {
    ASSERT_LT(steady_clock::now(), deadline) << "no event: " << ReadFile(watch.stderr_path);
    auto tensor = (*client)->Allocate(*descriptor);
    ASSERT_OK(tensor);
    ASSERT_OK(tensor->Publish("test/probe"));
    std::this_thread::sleep_for(milliseconds(50));
  }

  WriteFile(Path("in.npy"), NpyFileBytes(ElementType::kFloat32, {3, 4}, MatrixData()));
  ASSERT_EQ(Ctl({"put", "other/unwatched", Path("in.npy")}).exit_code, 0);
  ASSERT_EQ(Ctl({"put", "test/watched", Path("in.npy")}).exit_code, 0);
  ASSERT_EQ(Ctl({"rm", "test/watched"}).exit_code, 0);
  ASSERT_TRUE(WaitForOutput(watch, "KIND_DELETED")) << ReadFile(watch.stdout_path);

  ASSERT_EQ(::kill(watch.child.pid(), SIGINT), 0);
  Finished finished = Wait(watch);
  EXPECT_EQ(finished.exit_code, 0) << finished.err;
  EXPECT_FALSE(Contains(finished.out, "other/unwatched")) << finished.out;

  std::vector<hurray::v1::WatchEvent> events;
  std::istringstream lines(finished.out);
  for (std::string line; std::getline(lines, line);) {
    hurray::v1::WatchEvent event;
    ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(line, &event).ok()) << line;
    if (event.name() == "test/watched") events.push_back(event);
  }
  ASSERT_EQ(events.size(), 2u) << finished.out;
  EXPECT_EQ(events[0].kind(), hurray::v1::WatchEvent::KIND_PUBLISHED);
  EXPECT_EQ(events[0].version(), 1u);
  EXPECT_EQ(events[1].kind(), hurray::v1::WatchEvent::KIND_DELETED);
}

TEST_F(HurrayctlTest, WatchStopsOnSigtermWithTextLines) {
  ASSERT_OK_AND_ASSIGN(Process watch, Spawn(CtlArgv({"watch"})));
  auto client = Client::Connect(Client::Options{.socket_path = socket_});
  ASSERT_OK(client);
  auto descriptor = TensorDescriptor::Dense(ElementType::kUint8, {1});
  ASSERT_OK(descriptor);
  const auto deadline = steady_clock::now() + std::chrono::seconds(10);
  while (!Contains(ReadFile(watch.stdout_path), "published test/probe version")) {
    ASSERT_LT(steady_clock::now(), deadline) << "no event: " << ReadFile(watch.stderr_path);
    auto tensor = (*client)->Allocate(*descriptor);
    ASSERT_OK(tensor);
    ASSERT_OK(tensor->Publish("test/probe"));
    std::this_thread::sleep_for(milliseconds(50));
  }
  ASSERT_EQ(::kill(watch.child.pid(), SIGTERM), 0);
  Finished finished = Wait(watch);
  EXPECT_EQ(finished.exit_code, 0) << finished.err;
}

}  // namespace
}  // namespace hurray
