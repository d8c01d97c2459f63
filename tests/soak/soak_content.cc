#include "soak_content.h"

#include <fmt/format.h>

#include <bit>
#include <cstring>

#include "test_pattern.h"
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

// Whether `buffer` holds the pattern of `seed` (FillBuffer's, buffer 0), compared a word at
// a time: consumers check every byte of every view they acquire, so the check must cost
// little beside an acquire. CheckBuffer then says what differs.
bool MatchesPattern(std::span<const std::byte> buffer, std::uint64_t seed) {
  static_assert(std::endian::native == std::endian::little,
                "FillBuffer writes words little-endian");
  const std::size_t words = buffer.size() / 8;
  for (std::size_t word = 0; word < words; ++word) {
    std::uint64_t actual = 0;
    std::memcpy(&actual, buffer.data() + word * 8, sizeof actual);
    if (actual != hurray_it_pattern_word(seed, 0, word)) return false;
  }
  for (std::size_t offset = words * 8; offset < buffer.size(); ++offset) {
    if (std::to_integer<std::uint8_t>(buffer[offset]) != hurray_it_pattern_byte(seed, 0, offset)) {
      return false;
    }
  }
  return true;
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
  if (MatchesPattern(buffer, SoakSeed(name, version))) return {};
  const std::string wrong = integration::CheckBuffer(buffer, SoakSeed(name, version), 0);
  return fmt::format("{} v{}: {}", name, version, wrong);
}

}  // namespace hurray::soak
