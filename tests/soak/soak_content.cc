#include "soak_content.h"

#include <fmt/format.h>

#include "test_tensors.h"

namespace hurray::soak {
namespace {

// FNV-1a of the name, mixed with the version.
std::uint64_t SoakSeed(std::string_view name, std::uint64_t version) {
  std::uint64_t hash = 0xCBF29CE484222325ull;
  for (const char c : name) {
    hash = (hash ^ static_cast<unsigned char>(c)) * 0x100000001B3ull;
  }
  return hash ^ (version * 0x9E3779B97F4A7C15ull);
}

}  // namespace

std::string SoakName(std::uint64_t producer, std::uint64_t incarnation, std::uint64_t slot,
                     std::uint64_t generation) {
  return fmt::format("{}p{}-{}/t{}-{}", kSoakPrefix, producer, incarnation, slot, generation);
}

std::uint64_t SoakByteSize(std::string_view name, std::uint64_t version) {
  return 4096 + (SoakSeed(name, version) % 16) * 4096 + 8 * (version % 64) + 8;
}

void FillSoakTensor(std::span<std::byte> buffer, std::string_view name, std::uint64_t version) {
  integration::FillBuffer(buffer, SoakSeed(name, version), 0);
}

std::string CheckSoakTensor(std::span<const std::byte> buffer, std::string_view name,
                            std::uint64_t version) {
  if (const std::uint64_t expected = SoakByteSize(name, version); buffer.size() != expected) {
    return fmt::format("{} v{}: {} bytes, expected {}", name, version, buffer.size(), expected);
  }
  const std::string wrong = integration::CheckBuffer(buffer, SoakSeed(name, version), 0);
  return wrong.empty() ? wrong : fmt::format("{} v{}: {}", name, version, wrong);
}

}  // namespace hurray::soak
