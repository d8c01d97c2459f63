// Model files in and out of the real daemon: ImportTensorFile and `hurrayctl import` of a
// .safetensors model and of a sharded one, checked byte for byte against the source files
// through a consumer's BatchAcquire; every refusal of a broken file leaves the pool empty;
// save then load round trips multi-buffer tensors; an importer killed mid-way publishes
// nothing and leaves nothing allocated; hurrayctl's --json summary and its progress line
// (on a terminal only).
#include "hurray/file_transfer.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <unistd.h>

#include <array>
#include <csignal>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "hurray/safetensors.h"
#include "integration_test.h"
#include "test_tensors.h"
#include "testing/host_facilities.h"
#include "testing/safetensors_writer.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace hurray::integration {
namespace {

using ::hurray::testing::PatternBytes;
using ::hurray::testing::SafetensorsTensorSpec;
using ::hurray::testing::TempDir;

std::uint64_t DtypeBytes(std::string_view dtype) {
  if (dtype == "F64" || dtype == "I64" || dtype == "C64") return 8;
  if (dtype == "F32" || dtype == "I32" || dtype == "U32") return 4;
  if (dtype == "F16" || dtype == "BF16" || dtype == "I16" || dtype == "U16") return 2;
  return 1;  // BOOL, U8, I8, F8_*.
}

// `count` tensors "layers.N.<dtype>" cycling through many dtypes and shapes (one empty),
// each of `elements_per_tensor` elements or fewer.
std::vector<SafetensorsTensorSpec> ModelSpecs(std::size_t count, std::uint64_t elements,
                                              std::uint32_t seed) {
  static constexpr std::array<std::string_view, 12> kDtypes = {
      "F32", "F16", "BF16", "I8", "U8", "I32", "I64", "BOOL", "F64", "F8_E4M3", "U16", "C64"};
  std::vector<SafetensorsTensorSpec> specs;
  for (std::size_t i = 0; i < count; ++i) {
    const std::string dtype(kDtypes[i % kDtypes.size()]);
    const std::uint64_t rows = i == 7 ? 0 : 1 + i % 5;
    const std::uint64_t columns = elements / 5 + i;
    specs.push_back({.name = "layers." + std::to_string(i) + "." + dtype,
                     .dtype = dtype,
                     .shape = {rows, columns},
                     .bytes = PatternBytes(rows * columns * DtypeBytes(dtype),
                                           seed + static_cast<std::uint32_t>(i))});
  }
  return specs;
}

std::string ReadWholeFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()};
}

// Each tensor's bytes as the safetensors files hold them (ReadSafetensorsHeader's offsets).
std::map<std::string, std::string> SourceTensors(const std::vector<std::string>& paths) {
  std::map<std::string, std::string> tensors;
  for (const std::string& path : paths) {
    const std::string bytes = ReadWholeFile(path);
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    EXPECT_GE(fd, 0) << path;
    auto header = ReadSafetensorsHeader(fd, path);
    ::close(fd);
    EXPECT_TRUE(header.has_value()) << path;
    if (!header) continue;
    for (const SafetensorsTensor& tensor : header->tensors) {
      tensors[tensor.name] = bytes.substr(tensor.file_offset, tensor.byte_size);
    }
  }
  return tensors;
}

std::string AsString(std::span<const std::byte> bytes) {
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

google::protobuf::Struct ParseJson(const std::string& text) {
  google::protobuf::Struct object;
  const auto status = google::protobuf::util::JsonStringToMessage(text, &object);
  EXPECT_TRUE(status.ok()) << status.ToString() << " in: " << text;
  return object;
}

double Number(const google::protobuf::Struct& object, const std::string& key) {
  const auto field = object.fields().find(key);
  EXPECT_NE(field, object.fields().end()) << "no \"" << key << "\"";
  return field == object.fields().end() ? -1 : field->second.number_value();
}

class FileTransferTest : public IntegrationTest {
 protected:
  void SetUp() override {
    IntegrationTest::SetUp();
    auto dir = TempDir::Create("hurray-files");
    ASSERT_OK(dir);
    dir_.emplace(*std::move(dir));
  }

  [[nodiscard]] std::string Path(std::string_view name) const { return dir_->Path(name); }

  struct CtlOutcome {
    std::optional<int> status;
    std::string out;
    std::string err;
  };
  // Runs `hurrayctl --socket SOCKET ARGS...`, stdout through a pipe, stderr to a file (so
  // neither is a terminal).
  CtlOutcome RunCtl(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {HURRAYCTL_PATH, "--socket", socket()};
    argv.insert(argv.end(), args.begin(), args.end());
    const std::string err_path = Path("hurrayctl.stderr");
    std::filesystem::remove(err_path);
    auto child = ChildProcess::Start(argv, {.stderr_path = err_path});
    EXPECT_TRUE(child.has_value());
    if (!child) return {};
    CtlOutcome outcome;
    outcome.out = child->ReadToEnd(120s).value_or("");
    outcome.status = child->Wait(120s);
    outcome.err = ReadWholeFile(err_path);
    return outcome;
  }

  // Expects the pool, the pending allocations and the names to be empty (polling).
  void ExpectPoolEmpty(std::string_view after) {
    SCOPED_TRACE(std::string(after));
    ExpectEverythingReturned();
  }

  // A consumer (a session of its own) leases everything under `prefix` at once and finds
  // each source tensor there, byte for byte, and nothing else.
  void ExpectPublishedAsTheFiles(const std::string& prefix,
                                 const std::map<std::string, std::string>& source) {
    const std::unique_ptr<Client> consumer = Connect("consumer");
    ASSERT_NE(consumer, nullptr);
    ASSERT_OK_AND_ASSIGN(TensorViewBatch views, consumer->BatchAcquire({}, prefix));
    ASSERT_EQ(views.size(), source.size());
    for (const TensorView& view : views) {
      ASSERT_TRUE(view.name().starts_with(prefix)) << view.name();
      const auto found = source.find(view.name().substr(prefix.size()));
      ASSERT_NE(found, source.end()) << view.name();
      ASSERT_EQ(view.buffer_count(), 1U);
      EXPECT_TRUE(AsString(view.buffer(0)) == found->second) << view.name() << " differs";
    }
  }

  std::optional<TempDir> dir_;
};

TEST_F(FileTransferTest, ImportedModelOfManyDtypesIsPublishedAtOnceAndEqualsTheFile) {
  const std::string path = Path("model.safetensors");
  ASSERT_OK(testing::WriteSafetensors(path, ModelSpecs(50, 2000, 1), {{"format", "pt"}}));
  std::uint64_t last_done = 0;
  std::uint64_t last_total = 0;
  ASSERT_OK_AND_ASSIGN(const FileTransferSummary summary,
                       ImportTensorFile(client(), path,
                                        {.prefix = "model/",
                                         .pool = {},
                                         .parallelism = 4,
                                         .progress = [&](std::uint64_t done, std::uint64_t total) {
                                           last_done = done;
                                           last_total = total;
                                         }}));
  const auto source = SourceTensors({path});
  EXPECT_EQ(summary.tensors, 50U);
  std::uint64_t total = 0;
  for (const auto& [name, bytes] : source) total += bytes.size();
  EXPECT_EQ(summary.bytes, total);
  EXPECT_EQ(last_done, total);
  EXPECT_EQ(last_total, total);
  EXPECT_EQ(Stats().pending_allocation_count, 0U);
  ExpectPublishedAsTheFiles("model/", source);
}

TEST_F(FileTransferTest, ShardedModelImportsThroughItsIndexWithAJsonSummary) {
  const std::vector<SafetensorsTensorSpec> specs = ModelSpecs(30, 1000, 7);
  std::string weight_map;
  std::vector<std::string> shards;
  for (std::size_t shard = 0; shard < 3; ++shard) {
    const std::string name = "model-0000" + std::to_string(shard + 1) + "-of-00003.safetensors";
    shards.push_back(Path(name));
    const std::vector<SafetensorsTensorSpec> part(
        specs.begin() + static_cast<std::ptrdiff_t>(shard * 10),
        specs.begin() + static_cast<std::ptrdiff_t>(shard * 10 + 10));
    ASSERT_OK(testing::WriteSafetensors(shards.back(), part));
    for (const SafetensorsTensorSpec& spec : part) {
      weight_map += (weight_map.empty() ? "" : ", ") + ("\"" + spec.name + "\": \"" + name + "\"");
    }
  }
  const std::string index = Path("model.safetensors.index.json");
  ASSERT_OK(
      testing::WriteFileBytes(index, "{\"metadata\": {}, \"weight_map\": {" + weight_map + "}}"));

  const CtlOutcome outcome = RunCtl({"import", index, "--prefix", "sharded/", "--json"});
  ASSERT_EQ(outcome.status, 0) << outcome.err;
  EXPECT_EQ(outcome.err, "") << "no progress line off a terminal";
  const google::protobuf::Struct summary = ParseJson(outcome.out);
  const auto source = SourceTensors(shards);
  std::uint64_t total = 0;
  for (const auto& [name, bytes] : source) total += bytes.size();
  EXPECT_EQ(Number(summary, "tensors"), 30);
  EXPECT_EQ(Number(summary, "bytes"), static_cast<double>(total));
  EXPECT_GE(Number(summary, "seconds"), 0);
  EXPECT_GE(Number(summary, "gb_per_s"), 0);
  EXPECT_EQ(summary.fields().at("prefix").string_value(), "sharded/");
  EXPECT_EQ(summary.fields().at("file").string_value(), index);
  ExpectPublishedAsTheFiles("sharded/", source);
}

// A broken file and what its refusal must name.
struct Refusal {
  std::string file;
  std::string prefix;
  StatusCode code;
  std::vector<std::string> fragments;
};

TEST_F(FileTransferTest, EveryRefusalLeavesNothingPublishedAndNothingAllocated) {
  const std::string fixtures = HURRAY_SAFETENSORS_FIXTURES;
  std::vector<Refusal> refusals = {
      {fixtures + "/header_length_past_file.safetensors",
       "m/",
       StatusCode::kInvalidArgument,
       {"header_length_past_file"}},
      {fixtures + "/invalid_json.safetensors",
       "m/",
       StatusCode::kInvalidArgument,
       {"invalid_json"}},
      {fixtures + "/offsets_outside_data.safetensors",
       "m/",
       StatusCode::kInvalidArgument,
       {"\"t\"", "data_offsets"}},
      {fixtures + "/overlapping_offsets.safetensors",
       "m/",
       StatusCode::kInvalidArgument,
       {"data_offsets"}},
      {fixtures + "/byte_length_mismatch.safetensors",
       "m/",
       StatusCode::kInvalidArgument,
       {"\"t\"", "data_offsets"}},
      {fixtures + "/unknown_dtype.safetensors", "m/", StatusCode::kInvalidArgument, {"Q4_K"}},
  };
  // A header length above the 100 MB limit.
  const std::string huge_header = Path("huge_header.safetensors");
  ASSERT_OK(
      testing::WriteFileBytes(huge_header, testing::RawSafetensorsBytes("{}", "", 100'000'001)));
  refusals.push_back({huge_header, "m/", StatusCode::kInvalidArgument, {"huge_header"}});
  // A valid file, but a prefix that makes no tensor name (checked before allocating).
  const std::string valid = Path("valid.safetensors");
  ASSERT_OK(testing::WriteSafetensors(valid, ModelSpecs(5, 100, 3)));
  refusals.push_back(
      {valid, "nonamespace", StatusCode::kInvalidArgument, {"layers.0.F32", "no namespace"}});
  // A model larger than the 64 MiB pool: the second allocation fails after the first held.
  const std::string too_big = Path("too_big.safetensors");
  const std::vector<SafetensorsTensorSpec> big = {
      {.name = "a", .dtype = "U8", .shape = {40 << 20}, .bytes = PatternBytes(40 << 20, 1)},
      {.name = "b", .dtype = "U8", .shape = {40 << 20}, .bytes = PatternBytes(40 << 20, 2)}};
  ASSERT_OK(testing::WriteSafetensors(too_big, big));
  refusals.push_back({too_big, "m/", StatusCode::kResourceExhausted, {"tensor \"b\""}});

  for (const Refusal& refusal : refusals) {
    SCOPED_TRACE(refusal.file);
    const auto imported = ImportTensorFile(client(), refusal.file, {.prefix = refusal.prefix});
    ASSERT_FALSE(imported.has_value());
    EXPECT_EQ(imported.error().code(), refusal.code) << imported.error().ToString();
    for (const std::string& fragment : refusal.fragments) {
      EXPECT_NE(imported.error().message().find(fragment), std::string::npos)
          << fragment << " in " << imported.error().ToString();
    }
    ExpectPoolEmpty("after ImportTensorFile");
    const CtlOutcome outcome = RunCtl({"import", refusal.file, "--prefix", refusal.prefix});
    EXPECT_EQ(outcome.status, 1 << 8) << outcome.err;  // Exit status 1.
    EXPECT_TRUE(outcome.err.starts_with("hurrayctl: " + std::string(StatusCodeName(refusal.code))))
        << outcome.err;
    for (const std::string& fragment : refusal.fragments) {
      EXPECT_NE(outcome.err.find(fragment), std::string::npos) << fragment << " in " << outcome.err;
    }
    EXPECT_EQ(outcome.out, "");
    ExpectPoolEmpty("after hurrayctl import");
  }
}

TEST_F(FileTransferTest, SaveThenLoadRoundTripsMultiBufferTensorsByteForByte) {
  const std::vector<TensorKind> kinds = {TensorKind::kDense, TensorKind::kQuantized,
                                         TensorKind::kCsr};
  for (std::size_t i = 0; i < kinds.size(); ++i) {
    ASSERT_OK_AND_ASSIGN(WritableTensor tensor, client().Allocate(MakeTestDescriptor(kinds[i])));
    for (std::size_t j = 0; j < tensor.buffer_count(); ++j) FillBuffer(tensor.buffer(j), 10 + i, j);
    ASSERT_OK(tensor.Publish("src/" + std::string(TensorKindName(kinds[i]))));
  }
  const std::string saved = Path("saved.hrry");
  ASSERT_OK_AND_ASSIGN(const FileTransferSummary summary, SaveTensors(client(), "src/", saved));
  EXPECT_EQ(summary.tensors, 3U);

  // hurrayctl save of the same set writes the same tensors.
  const CtlOutcome save = RunCtl({"save", "src/", Path("ctl.hrry"), "--json"});
  ASSERT_EQ(save.status, 0) << save.err;
  EXPECT_EQ(Number(ParseJson(save.out), "tensors"), 3);
  EXPECT_EQ(Number(ParseJson(save.out), "bytes"), static_cast<double>(summary.bytes));

  const CtlOutcome load = RunCtl({"load", Path("ctl.hrry"), "--prefix", "copy/", "--json"});
  ASSERT_EQ(load.status, 0) << load.err;
  EXPECT_EQ(Number(ParseJson(load.out), "tensors"), 3);
  ASSERT_OK(ImportTensorFile(client(), saved, {.prefix = "again/"}));

  const std::unique_ptr<Client> consumer = Connect("consumer");
  for (const std::string prefix : {"copy/", "again/"}) {
    ASSERT_OK_AND_ASSIGN(TensorViewBatch views, consumer->BatchAcquire({}, prefix));
    ASSERT_EQ(views.size(), kinds.size()) << prefix;
    for (std::size_t i = 0; i < kinds.size(); ++i) {
      const std::string name = prefix + "src/" + std::string(TensorKindName(kinds[i]));
      const auto view = std::ranges::find(views, name, &TensorView::name);
      ASSERT_NE(view, views.end()) << name;
      EXPECT_EQ(view->descriptor(), MakeTestDescriptor(kinds[i])) << name;
      for (std::size_t j = 0; j < view->buffer_count(); ++j) {
        EXPECT_EQ(CheckBuffer(view->buffer(j), 10 + i, j), "") << name << " buffer " << j;
      }
    }
  }
}

TEST_F(FileTransferTest, SaveOfAnEmptyPrefixIsNotFoundAndWritesNoFile) {
  EXPECT_ERROR(SaveTensors(client(), "nothing/", Path("none.hrry")), StatusCode::kNotFound,
               {"nothing/"});
  EXPECT_FALSE(std::filesystem::exists(Path("none.hrry")));
}

TEST_F(FileTransferTest, LoadRefusesAFileNotNamedHrry) {
  const CtlOutcome outcome = RunCtl({"load", Path("model.safetensors")});
  EXPECT_EQ(outcome.status, 1 << 8);
  EXPECT_NE(outcome.err.find("load reads .hrry files"), std::string::npos) << outcome.err;
}

// hurrayd itself, started with a [[preload]] entry whose file is broken: it exits non-zero
// and says which file, tensor and field.
TEST_F(FileTransferTest, DaemonWithABrokenRequiredPreloadExitsNamingTensorAndField) {
  const std::string broken =
      std::string(HURRAY_SAFETENSORS_FIXTURES) + "/byte_length_mismatch.safetensors";
  const std::string config = Path("preload.toml");
  ASSERT_OK(testing::WriteFileBytes(
      config, fmt::format("socket = \"{}\"\nstate_directory = \"{}\"\n"
                          "[cpu_pool]\ncapacity = \"16MiB\"\n"
                          "[[preload]]\npath = \"{}\"\nprefix = \"broken/\"\n",
                          Path("hurrayd.sock"), Path("state"), broken)));
  const std::string err_path = Path("hurrayd.stderr");
  ASSERT_OK_AND_ASSIGN(ChildProcess daemon,
                       ChildProcess::Start({daemon_options().binary, "--config", config},
                                           {.stderr_path = err_path}));
  const std::optional<int> status = daemon.Wait(60s);
  ASSERT_TRUE(status.has_value()) << "hurrayd kept running with a broken required preload";
  EXPECT_NE(*status, 0) << testing::DescribeWaitStatus(*status);
  const std::string err = ReadWholeFile(err_path);
  EXPECT_NE(err.find(broken), std::string::npos) << err;
  EXPECT_NE(err.find("tensor \"t\""), std::string::npos) << err;
  EXPECT_NE(err.find("data_offsets"), std::string::npos) << err;
}

TEST_F(FileTransferTest, ImporterKilledMidWayPublishesNothingAndFreesEverything) {
  const std::string path = Path("model.safetensors");
  ASSERT_OK(testing::WriteSafetensors(path, ModelSpecs(50, 20000, 5)));
  ASSERT_OK_AND_ASSIGN(ChildProcess importer, StartAgent({"import-and-pause", path, "killed/"}));
  ExpectLine(importer, "reading");
  // Every tensor is allocated and being read; none is visible.
  const DaemonStats during = Stats();
  EXPECT_EQ(during.pending_allocation_count, 50U) << Summary(during);
  EXPECT_EQ(during.tensor_count, 0U) << Summary(during);
  importer.Signal(SIGKILL);
  ASSERT_TRUE(importer.Wait(30s).has_value());
  ExpectPoolEmpty("after kill -9");
  ASSERT_OK_AND_ASSIGN(const TensorListPage page, client().List("killed/"));
  EXPECT_TRUE(page.tensors.empty());
}

// Runs `command` under script(1), so that its stdout and stderr are a terminal; returns
// what the terminal received.
std::optional<std::string> RunOnATerminal(const std::string& command) {
  auto child = ChildProcess::Start({"/usr/bin/script", "-qec", command, "/dev/null"});
  if (!child) return std::nullopt;
  std::optional<std::string> out = child->ReadToEnd(120s);
  if (child->Wait(120s) != 0) return std::nullopt;
  return out;
}

TEST_F(FileTransferTest, ProgressLineIsDrawnOnATerminalAndClearedUnlessQuiet) {
  if (!std::filesystem::exists("/usr/bin/script")) GTEST_SKIP() << "no script(1) (bsdutils)";
  if (auto why = testing::WhyNoPseudoTerminal()) GTEST_SKIP() << *why;
  const std::string path = Path("model.safetensors");
  ASSERT_OK(testing::WriteSafetensors(path, ModelSpecs(10, 1000, 9)));
  const std::string ctl = std::string(HURRAYCTL_PATH) + " --socket " + socket();
  const std::optional<std::string> drawn = RunOnATerminal(ctl + " import " + path + " --prefix a/");
  ASSERT_TRUE(drawn.has_value());
  EXPECT_NE(drawn->find(" left\033[K"), std::string::npos) << *drawn;
  EXPECT_NE(drawn->find("\r\033[Kimported 10 tensors"), std::string::npos) << *drawn;

  const std::optional<std::string> quiet =
      RunOnATerminal(ctl + " import " + path + " --prefix b/ --quiet");
  ASSERT_TRUE(quiet.has_value());
  EXPECT_EQ(quiet->find('\r'), std::string::npos) << *quiet;
  EXPECT_EQ(quiet->find("imported"), std::string::npos) << "--quiet prints no summary";
}

}  // namespace
}  // namespace hurray::integration
