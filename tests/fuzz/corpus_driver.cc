// A stand-in for libFuzzer's main(): runs LLVMFuzzerTestOneInput once on every file named on
// the command line and on every regular file below every directory named, in path order.
// This is how the fuzz targets replay their committed corpus with any compiler.
//
// Usage: <target>_corpus_replay <file or directory>...
// Exits 0 after running them all; 1 when an argument cannot be read or names no input at
// all (a corpus that silently went missing must not pass). A broken invariant aborts inside
// the target, after the path of the input has been printed.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <system_error>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);
// Optional, as in libFuzzer: called once before the first input when the target defines it.
extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) __attribute__((weak));

namespace {

namespace fs = std::filesystem;

// The inputs an argument names, sorted; false when it names nothing readable.
bool CollectInputs(const fs::path& argument, std::vector<fs::path>& inputs) {
  std::error_code error;
  if (fs::is_regular_file(argument, error)) {
    inputs.push_back(argument);
    return true;
  }
  if (!fs::is_directory(argument, error)) {
    std::fprintf(stderr, "%s: not a file or directory\n", argument.c_str());
    return false;
  }
  std::vector<fs::path> found;
  for (fs::recursive_directory_iterator it(argument, error), end; !error && it != end;
       it.increment(error)) {
    if (it->is_regular_file(error)) found.push_back(it->path());
  }
  if (error) {
    std::fprintf(stderr, "%s: %s\n", argument.c_str(), error.message().c_str());
    return false;
  }
  std::ranges::sort(found);
  inputs.insert(inputs.end(), found.begin(), found.end());
  return true;
}

bool RunOne(const fs::path& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) {
    std::fprintf(stderr, "%s: cannot open\n", path.c_str());
    return false;
  }
  const std::vector<char> bytes{std::istreambuf_iterator<char>(file),
                                std::istreambuf_iterator<char>()};
  std::printf("%s (%zu bytes)\n", path.c_str(), bytes.size());
  std::fflush(stdout);
  LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (LLVMFuzzerInitialize != nullptr) LLVMFuzzerInitialize(&argc, &argv);
  std::vector<fs::path> inputs;
  for (int i = 1; i < argc; ++i) {
    if (!CollectInputs(argv[i], inputs)) return 1;
  }
  std::size_t ran = 0;
  for (const fs::path& input : inputs) {
    if (!RunOne(input)) return 1;
    ++ran;
  }
  std::printf("ran %zu inputs\n", ran);
  return ran == 0 ? 1 : 0;
}
