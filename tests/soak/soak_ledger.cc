#include "soak_ledger.h"

#include <fmt/format.h>

#include <charconv>
#include <set>

namespace hurray::soak {
namespace {

struct Line {
  std::string_view verb;
  std::string name;
  std::uint64_t version = 0;
};

// "VERB NAME [VERSION]"; nullopt when the line has another shape.
std::optional<Line> Parse(std::string_view text) {
  const std::size_t first = text.find(' ');
  if (first == std::string_view::npos) return std::nullopt;
  Line line{.verb = text.substr(0, first), .name = {}, .version = 0};
  std::string_view rest = text.substr(first + 1);
  const std::size_t second = rest.find(' ');
  line.name = std::string(rest.substr(0, second));
  if (second == std::string_view::npos) return line;
  const std::string_view number = rest.substr(second + 1);
  const auto [end, error] =
      std::from_chars(number.data(), number.data() + number.size(), line.version);
  if (error != std::errc() || end != number.data() + number.size()) return std::nullopt;
  return line;
}

}  // namespace

std::string SoakLedger::Record(std::string_view text) {
  const std::optional<Line> line = Parse(text);
  if (!line) return fmt::format("unreadable producer line \"{}\"", text);
  Entry& entry = entries_[line->name];
  if (line->verb == "publishing") {
    entry.in_flight = line->version;
  } else if (line->verb == "published") {
    entry =
        Entry{.acknowledged = line->version, .in_flight = 0, .deleting = false, .deleted = false};
    ++publish_count_;
  } else if (line->verb == "deleting") {
    entry.deleting = true;
  } else if (line->verb == "deleted") {
    entry = Entry{.acknowledged = 0, .in_flight = 0, .deleting = false, .deleted = true};
    ++delete_count_;
  } else {
    return fmt::format("unknown producer verb in \"{}\"", text);
  }
  return {};
}

std::string SoakLedger::CheckEntry(const std::string& name, const Entry& entry,
                                   std::uint64_t latest) {
  // What may be there: the acknowledged state, or the outcome of the operation in flight.
  std::set<std::uint64_t> allowed{entry.acknowledged};
  if (entry.in_flight != 0) allowed.insert(entry.in_flight);
  if (entry.deleting) allowed.insert(0);
  if (allowed.contains(latest)) return {};
  const std::string found = latest == 0 ? "absent" : fmt::format("at version {}", latest);
  std::string expected = entry.deleted ? "deleted" : fmt::format("version {}", entry.acknowledged);
  if (entry.in_flight != 0) expected += fmt::format(" or version {} (in flight)", entry.in_flight);
  if (entry.deleting) expected += " or absent (a delete in flight)";
  return fmt::format("{}: {}, expected {}", name, found, expected);
}

std::vector<std::string> SoakLedger::Check(const std::vector<TensorSummary>& listed) const {
  std::vector<std::string> problems;
  std::map<std::string, std::uint64_t, std::less<>> latest;
  for (const TensorSummary& tensor : listed) {
    if (!entries_.contains(tensor.name)) {
      problems.push_back(fmt::format("{}: published, but no producer said so", tensor.name));
    }
    latest[tensor.name] = tensor.latest_version;
  }
  for (const auto& [name, entry] : entries_) {
    const auto found = latest.find(name);
    std::string problem = CheckEntry(name, entry, found == latest.end() ? 0 : found->second);
    if (!problem.empty()) problems.push_back(std::move(problem));
  }
  return problems;
}

}  // namespace hurray::soak
