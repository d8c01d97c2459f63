// Section 8, model files: a model-like .safetensors file (2 GiB, 500 tensors: 400
// bf16 matrices and 100 small norm vectors) brought into the pool from the page cache, timed
// to all-visible (the set published at once), against
//   - the floor: `cat FILE > /dev/null` (the kernel copying the file out of the page cache);
//   - the naive way: read the whole file into private memory, then allocate each tensor and
//     memcpy it into the pool, then publish the set;
// then a .hrry file of the same tensors (SaveTensors) loaded the same way, and a fresh
// consumer's BatchAcquire of what was imported. Every run imports under a prefix of its own
// and the set is deleted after it, so each starts with the same free pool. The target: the
// import takes at most 1.3x the floor.
//
// Worker roles:
//   files-cat PATH                         runs `cat PATH > /dev/null`: "cat_ns"
//   files-import SOCKET PATH PREFIX MODE   MODE "import": ImportTensorFile ("import_ns");
//                                          MODE "naive": read(2) the file into private
//                                          memory, allocate, memcpy, PublishBatch
//                                          ("naive_ns"); prints "tensors"
//   files-save SOCKET PREFIX PATH          SaveTensors of PREFIX to PATH: "save_ns"
//   files-batch SOCKET PREFIX COUNT        BatchAcquire of PREFIX in this fresh process:
//                                          "batch_ns"
//   files-populate SOCKET BYTES            allocate one BYTES tensor in this fresh process
//                                          and fill the page tables of its mapping
//                                          (MADV_POPULATE_WRITE): "populate_ns", the part of
//                                          an import that maps the pool's pages, not reads
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "hurray/file_transfer.h"
#include "hurray/ipc/errno_error.h"
#include "hurray/safetensors.h"
#include "sections.h"
#include "system_info.h"
#include "testing/safetensors_writer.h"

namespace hurray::bench {
namespace {

using std::chrono::seconds;

constexpr int kSection = 8;
constexpr auto kWorkerTimeout = seconds(600);
constexpr double kNanosecondsToMilliseconds = 1e-6;
// Of every 5 tensors, 4 are matrices sharing the bytes and 1 is a norm vector of 16 KiB.
constexpr std::uint64_t kNormBytes = std::uint64_t{16} * 1024;

// The model-like file's tensors: `count` of them, `total_bytes` in all, bf16.
std::vector<testing::SafetensorsTensorSpec> ModelTensors(std::uint64_t count,
                                                         std::uint64_t total_bytes) {
  const std::uint64_t norms = count / 5;
  const std::uint64_t matrices = count - norms;
  const std::uint64_t columns = 2048;
  const std::uint64_t rows = (total_bytes - norms * kNormBytes) / matrices / (columns * 2);
  std::vector<testing::SafetensorsTensorSpec> tensors;
  tensors.reserve(count);
  for (std::uint64_t i = 0; i < count; ++i) {
    const bool norm = i % 5 == 4;
    const std::vector<std::uint64_t> shape = norm ? std::vector<std::uint64_t>{kNormBytes / 2}
                                                  : std::vector<std::uint64_t>{rows, columns};
    const std::uint64_t bytes = norm ? kNormBytes : rows * columns * 2;
    tensors.push_back(
        {.name = fmt::format("layers.{}.{}", i / 5, norm ? "norm" : "w" + std::to_string(i % 5)),
         .dtype = "BF16",
         .shape = shape,
         .bytes = testing::PatternBytes(bytes, static_cast<std::uint32_t>(i))});
  }
  return tensors;
}

// Reads all of `path` into private memory with read(2), as a loader without hurray would.
std::vector<std::byte> ReadWholeFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) WorkerFail(ErrnoError("open", path, errno).message());
  std::vector<std::byte> bytes(std::filesystem::file_size(path));
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t got = ::read(fd, bytes.data() + done, bytes.size() - done);
    if (got <= 0) WorkerFail(ErrnoError("read", path, errno).message());
    done += static_cast<std::size_t>(got);
  }
  ::close(fd);
  return bytes;
}

// The naive import: the whole file in private memory, then a copy of each tensor into the
// pool, then the set published at once. Returns how many tensors.
std::size_t NaiveImport(Client& client, const std::string& path, const std::string& prefix) {
  const std::vector<std::byte> file = ReadWholeFile(path);
  const SafetensorsHeader header =
      CheckOk(ParseSafetensorsHeader(file, file.size()), "ParseSafetensorsHeader");
  std::vector<WritableTensor> tensors;
  std::vector<std::string> names;
  tensors.reserve(header.tensors.size());
  names.reserve(header.tensors.size());
  for (const SafetensorsTensor& tensor : header.tensors) {
    WritableTensor& writable =
        tensors.emplace_back(CheckOk(client.Allocate(tensor.descriptor), "Allocate"));
    if (tensor.byte_size != 0) {
      std::memcpy(writable.buffer(0).data(), file.data() + tensor.file_offset, tensor.byte_size);
    }
    names.push_back(prefix + tensor.name);
  }
  CheckOk(client.PublishBatch(tensors, names), "PublishBatch");
  return names.size();
}

}  // namespace

int FilesCatRole(const WorkerArgs& args) {
  const std::string& path = Arg(args, 0, "PATH");
  const std::int64_t start = NowNanoseconds();
  const pid_t pid = ::fork();
  if (pid < 0) WorkerFail(ErrnoError("fork", "", errno).message());
  if (pid == 0) {
    const int null = ::open("/dev/null", O_WRONLY);
    if (null < 0 || ::dup2(null, STDOUT_FILENO) < 0) ::_exit(127);
    ::execlp("cat", "cat", path.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    WorkerFail("cat " + path + " failed");
  }
  EmitValue("cat_ns", static_cast<double>(NowNanoseconds() - start));
  return 0;
}

int FilesImportRole(const WorkerArgs& args) {
  const std::string& socket = Arg(args, 0, "SOCKET");
  const std::string& path = Arg(args, 1, "PATH");
  const std::string& prefix = Arg(args, 2, "PREFIX");
  const std::string& mode = Arg(args, 3, "MODE");
  if (mode != "import" && mode != "naive") WorkerFail("MODE " + mode + ": import or naive");
  auto client = ConnectWarm(socket, "files-import");
  const std::int64_t start = NowNanoseconds();
  std::size_t tensors = 0;
  if (mode == "import") {
    tensors =
        CheckOk(ImportTensorFile(*client, path, {.prefix = prefix}), "ImportTensorFile").tensors;
  } else {
    tensors = NaiveImport(*client, path, prefix);
  }
  EmitValue(mode + "_ns", static_cast<double>(NowNanoseconds() - start));
  EmitValue("tensors", static_cast<double>(tensors));
  return 0;
}

int FilesSaveRole(const WorkerArgs& args) {
  const std::string& socket = Arg(args, 0, "SOCKET");
  const std::string& prefix = Arg(args, 1, "PREFIX");
  const std::string& path = Arg(args, 2, "PATH");
  auto client = ConnectWarm(socket, "files-save");
  const std::int64_t start = NowNanoseconds();
  CheckOk(SaveTensors(*client, prefix, path), "SaveTensors");
  EmitValue("save_ns", static_cast<double>(NowNanoseconds() - start));
  return 0;
}

int FilesBatchAcquireRole(const WorkerArgs& args) {
  const std::string& socket = Arg(args, 0, "SOCKET");
  const std::string& prefix = Arg(args, 1, "PREFIX");
  const std::uint64_t count = ArgNumber(args, 2, "COUNT");
  auto client = ConnectWarm(socket, "files-batch");
  const std::int64_t start = NowNanoseconds();
  TensorViewBatch batch = CheckOk(client->BatchAcquire({}, prefix), "BatchAcquire");
  EmitValue("batch_ns", static_cast<double>(NowNanoseconds() - start));
  if (batch.size() != count) {
    WorkerFail(fmt::format("BatchAcquire found {} of {} tensors", batch.size(), count));
  }
  return 0;
}

int FilesPopulateRole(const WorkerArgs& args) {
  const std::string& socket = Arg(args, 0, "SOCKET");
  const std::uint64_t bytes = ArgNumber(args, 1, "BYTES");
  auto client = ConnectWarm(socket, "files-populate");
  WritableTensor tensor = CheckOk(
      client->Allocate(CheckOk(TensorDescriptor::Dense(ElementType::kUint8, {bytes}), "Dense")),
      "Allocate");
  const std::span<std::byte> buffer = tensor.buffer(0);
  const std::int64_t start = NowNanoseconds();
  if (::madvise(buffer.data(), buffer.size(), MADV_POPULATE_WRITE) != 0) {
    WorkerFail(ErrnoError("madvise(MADV_POPULATE_WRITE)", "", errno).message());
  }
  EmitValue("populate_ns", static_cast<double>(NowNanoseconds() - start));
  CheckOk(tensor.Cancel(), "Cancel");
  return 0;
}

namespace {

// Deletes every name under `prefix` through the harness's client.
Status DeletePrefix(Harness& harness, const std::string& prefix) {
  HURRAY_ASSIGN_OR_RETURN(Client * client, harness.SetupClient());
  std::vector<std::string> names;
  std::string token;
  do {
    HURRAY_ASSIGN_OR_RETURN(TensorListPage page, client->List(prefix, 1000, token));
    for (const auto& tensor : page.tensors) names.push_back(tensor.name);
    token = page.next_page_token;
  } while (!token.empty());
  harness.DeleteTensors(names);
  return {};
}

struct FileRun {
  std::string key;    // "files.import"
  std::string label;  // "import (hurray), to all-visible"
  WorkerArgs args;    // The worker, with "{prefix}" where the run's prefix goes.
  std::string value;  // The worker's figure: "import_ns".
  bool delete_after = true;
};

// Runs `run` `repetitions` times, each under a prefix of its own deleted afterwards, and
// adds its figure in ms.
Status RunTimed(Harness& harness, const FileRun& run, int repetitions) {
  WorkerResults results;
  for (int i = 0; i < repetitions; ++i) {
    const std::string prefix = fmt::format("bench/files{}/", i);
    WorkerArgs args = run.args;
    for (std::string& arg : args) {
      if (arg == "{prefix}") arg = prefix;
    }
    HURRAY_ASSIGN_OR_RETURN(WorkerResults one,
                            harness.RunWorker(Placement::kUnpinned, args, kWorkerTimeout));
    results.Merge(one);
    if (run.delete_after) HURRAY_RETURN_IF_ERROR(DeletePrefix(harness, prefix));
  }
  harness.report().AddFigure(
      FigureSpec{.key = run.key, .section = kSection, .label = run.label, .unit = "ms"},
      Placement::kUnpinned,
      Scaled(Summarize(results.Values(run.value)), kNanosecondsToMilliseconds));
  return {};
}

void AddRatio(Report& report, const std::string& key, const std::string& label,
              const std::string& numerator, const std::string& denominator,
              std::optional<Target> target = std::nullopt) {
  report.AddRatio(RatioSpec{.key = key,
                            .section = kSection,
                            .label = label,
                            .numerator = numerator,
                            .denominator = denominator,
                            .target = target});
}

// With --huge-pages and a hurrayd that has cpu_pool.huge_pages: the import again, into a
// fresh daemon whose pool has huge pages (512 times fewer page faults to map it).
Status RunImportWithHugePages(Harness& harness, const std::string& model) {
  Report& report = harness.report();
  if (!harness.options().huge_pages) {
    report.AddNote(kSection, "the import with huge pages: run with --huge-pages to measure it");
    return {};
  }
  HURRAY_ASSIGN_OR_RETURN(
      const std::optional<std::string> setting,
      HugePagesSetting(harness.options().hurrayd_path, harness.options().huge_pages_mode));
  if (!setting) return {};
  harness.set_huge_pages_setting(*setting);
  HURRAY_ASSIGN_OR_RETURN(testing::DaemonProcess * daemon, harness.FreshDaemon(true));
  harness.Progress("section 8: import into a pool with huge pages");
  HURRAY_RETURN_IF_ERROR(
      RunTimed(harness,
               {"files.import_huge_pages",
                "import into a pool with huge pages, to all-visible",
                {"files-import", daemon->socket_path(), model, "{prefix}", "import"},
                "import_ns"},
               harness.scale().file_repetitions));
  AddRatio(report, "files.import_huge_pages_vs_cat", "import with huge pages / cat",
           "files.import_huge_pages", "files.cat",
           Target{.kind = Target::Kind::kAtMost, .value = 1.3});
  return {};
}

}  // namespace

Status RunModelFiles(Harness& harness) {
  const Scale& scale = harness.scale();
  Report& report = harness.report();
  harness.StopBulkBaselines();
  HURRAY_ASSIGN_OR_RETURN(testing::DaemonProcess * daemon, harness.FreshDaemon());
  HURRAY_RETURN_IF_ERROR(harness.Place(Placement::kUnpinned));
  const std::string socket = daemon->socket_path();
  const std::string model = harness.WorkPath("model.safetensors");
  const std::string saved = harness.WorkPath("model.hrry");
  const auto count = static_cast<std::uint64_t>(scale.file_tensor_count);

  harness.Progress(fmt::format("section 8: writing a {}-tensor safetensors file of {}", count,
                               FormatBytes(scale.file_bytes)));
  {
    const auto tensors = ModelTensors(count, scale.file_bytes);
    HURRAY_RETURN_IF_ERROR(testing::WriteSafetensors(model, tensors));
  }
  const std::string size = FormatBytes(std::filesystem::file_size(model));
  report.AddNote(kSection, fmt::format("model file: {} tensors (4 of 5 bf16 matrices, 1 of 5 a "
                                       "16 KiB vector), {}, read from the page cache",
                                       count, size));
  // Warm the page cache: every figure reads the file from memory.
  HURRAY_RETURN_IF_ERROR(
      harness.RunWorker(Placement::kUnpinned, {"files-cat", model}, kWorkerTimeout));

  const int repetitions = scale.file_repetitions;
  const std::string tensors = std::to_string(count);
  const FileRun runs[] = {
      {"files.cat", "floor: cat FILE > /dev/null", {"files-cat", model}, "cat_ns"},
      {"files.import",
       "import into the pool (ImportTensorFile), to all-visible",
       {"files-import", socket, model, "{prefix}", "import"},
       "import_ns"},
      {"files.naive",
       "naive: read into private memory, memcpy into the pool, publish",
       {"files-import", socket, model, "{prefix}", "naive"},
       "naive_ns"},
  };
  for (const FileRun& run : runs) {
    harness.Progress("section 8: " + run.label);
    HURRAY_RETURN_IF_ERROR(RunTimed(harness, run, repetitions));
  }
  const std::string file_bytes = std::to_string(std::filesystem::file_size(model));
  HURRAY_RETURN_IF_ERROR(RunTimed(harness,
                                  {"files.populate",
                                   "map as many pool pages alone (fresh process)",
                                   {"files-populate", socket, file_bytes},
                                   "populate_ns",
                                   false},
                                  repetitions));

  // A consumer's BatchAcquire of an imported set, then the set saved to a .hrry file and
  // loaded like the import.
  harness.Progress("section 8: BatchAcquire, save and load a .hrry file");
  const std::string kept = "bench/files-kept/";
  HURRAY_RETURN_IF_ERROR(harness.RunWorker(
      Placement::kUnpinned, {"files-import", socket, model, kept, "import"}, kWorkerTimeout));
  HURRAY_RETURN_IF_ERROR(RunTimed(harness,
                                  {"files.batch_acquire",
                                   "a fresh consumer's BatchAcquire of the imported set",
                                   {"files-batch", socket, kept, tensors},
                                   "batch_ns",
                                   false},
                                  repetitions));
  HURRAY_RETURN_IF_ERROR(RunTimed(harness,
                                  {"files.save",
                                   "save the set to a .hrry file (SaveTensors, synced)",
                                   {"files-save", socket, kept, saved},
                                   "save_ns",
                                   false},
                                  1));
  HURRAY_RETURN_IF_ERROR(DeletePrefix(harness, kept));
  HURRAY_RETURN_IF_ERROR(
      harness.RunWorker(Placement::kUnpinned, {"files-cat", saved}, kWorkerTimeout));
  HURRAY_RETURN_IF_ERROR(RunTimed(harness,
                                  {"files.load",
                                   "load the .hrry file (checksums verified), to all-visible",
                                   {"files-import", socket, saved, "{prefix}", "import"},
                                   "import_ns"},
                                  repetitions));

  HURRAY_RETURN_IF_ERROR(RunImportWithHugePages(harness, model));

  AddRatio(report, "files.import_vs_cat", "import / cat (target <= 1.3)", "files.import",
           "files.cat", Target{.kind = Target::Kind::kAtMost, .value = 1.3});
  AddRatio(report, "files.populate_vs_cat", "map the pages alone / cat", "files.populate",
           "files.cat");
  AddRatio(report, "files.naive_vs_cat", "naive / cat", "files.naive", "files.cat");
  AddRatio(report, "files.naive_vs_import", "naive / import", "files.naive", "files.import");
  AddRatio(report, "files.load_vs_cat", ".hrry load / cat", "files.load", "files.cat");
  for (const char* key :
       {"files.cat", "files.import", "files.import_huge_pages", "files.naive", "files.load"}) {
    if (auto median = report.Median(key, Placement::kUnpinned)) {
      report.AddNote(kSection, fmt::format("{}: {:.2f} GB/s", key,
                                           static_cast<double>(std::filesystem::file_size(model)) /
                                               (*median * 1e6)));
    }
  }
  std::filesystem::remove(model);
  std::filesystem::remove(saved);
  return harness.StopDaemon();
}

}  // namespace hurray::bench
