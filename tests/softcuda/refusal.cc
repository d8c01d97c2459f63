#include "refusal.h"

#include <unistd.h>

#include <charconv>
#include <cstdlib>

namespace softcuda {

CUresult Refuse(CUresult result, std::string_view call, std::string_view rule) {
  std::string line = "softcuda: ";
  line.append(call).append(": ").append(rule).append("\n");
  // One write, so that lines of concurrent calls never interleave.
  (void)!write(STDERR_FILENO, line.data(), line.size());
  return result;
}

std::optional<std::string> Environment(const char* name) {
  // NOLINTNEXTLINE(concurrency-mt-unsafe): softcuda never changes its environment.
  const char* value = std::getenv(name);
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

std::uint64_t EnvironmentNumber(const char* name, std::uint64_t fallback) {
  const std::optional<std::string> text = Environment(name);
  if (!text) return fallback;
  std::uint64_t value = 0;
  const char* end = text->data() + text->size();
  const auto [stop, error] = std::from_chars(text->data(), end, value);
  if (error != std::errc() || stop != end) {
    (void)Refuse(CUDA_ERROR_INVALID_VALUE, "environment",
                 std::string(name) + "=" + *text + " is not a decimal number: ignored");
    return fallback;
  }
  return value;
}

}  // namespace softcuda
