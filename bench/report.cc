#include "report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

namespace hurray::bench {
namespace {

using Json = nlohmann::ordered_json;

constexpr int kLabelWidth = 66;
constexpr int kUnitWidth = 9;
constexpr int kNumberWidth = 10;
constexpr int kCountWidth = 7;

// Three or four significant digits, no exponent: "4.12", "61.8", "812", "13,204".
std::string FormatNumber(double value) {
  if (std::isnan(value)) return "-";
  char text[64];
  const double magnitude = std::fabs(value);
  if (magnitude >= 10000) {
    std::snprintf(text, sizeof(text), "%.0f", value);
    std::string digits = text;
    const std::size_t sign = digits[0] == '-' ? 1 : 0;
    for (int at = static_cast<int>(digits.size()) - 3; at > static_cast<int>(sign); at -= 3) {
      digits.insert(static_cast<std::size_t>(at), ",");
    }
    return digits;
  }
  if (magnitude >= 100) {
    std::snprintf(text, sizeof(text), "%.0f", value);
  } else if (magnitude >= 10) {
    std::snprintf(text, sizeof(text), "%.1f", value);
  } else if (magnitude >= 0.1 || magnitude == 0) {
    std::snprintf(text, sizeof(text), "%.2f", value);
  } else {
    std::snprintf(text, sizeof(text), "%.4f", value);
  }
  return text;
}

std::string PadRight(std::string text, int width) {
  if (static_cast<int>(text.size()) < width) text.append(width - text.size(), ' ');
  return text;
}

std::string PadLeft(std::string text, int width) {
  if (static_cast<int>(text.size()) < width) text.insert(0, width - text.size(), ' ');
  return text;
}

Json SummaryJson(const Summary& summary) {
  return Json{{"median", summary.median}, {"p99", summary.p99},   {"min", summary.min},
              {"max", summary.max},       {"mean", summary.mean}, {"count", summary.count}};
}

// "12.3      45.6     100" for a summary, blanks when absent.
std::string SummaryColumns(const Summary* summary) {
  if (summary == nullptr) {
    return PadLeft("", 2 * kNumberWidth + kCountWidth);
  }
  return PadLeft(FormatNumber(summary->median), kNumberWidth) +
         PadLeft(FormatNumber(summary->p99), kNumberWidth) +
         PadLeft(std::to_string(summary->count), kCountWidth);
}

}  // namespace

std::string Target::ToString() const {
  return std::string(kind == Kind::kAtMost ? "<= " : ">= ") + FormatNumber(value);
}

void Report::SetSectionTitle(int section, std::string title) {
  section_titles_[section] = std::move(title);
}

void Report::SetRunFact(const std::string& key, const std::string& value) {
  for (auto& [existing, text] : run_facts_) {
    if (existing == key) {
      text = value;
      return;
    }
  }
  run_facts_.emplace_back(key, value);
}

void Report::AddFigure(const FigureSpec& spec, Placement placement, const Summary& summary) {
  auto found = std::ranges::find_if(
      figures_, [&](const Figure& figure) { return figure.spec.key == spec.key; });
  if (found == figures_.end()) {
    figures_.push_back(Figure{.spec = spec, .by_placement = {}});
    found = figures_.end() - 1;
  }
  found->by_placement[placement] = summary;
}

std::optional<double> Report::Median(const std::string& key, Placement placement) const {
  for (const Figure& figure : figures_) {
    if (figure.spec.key != key) continue;
    auto summary = figure.by_placement.find(placement);
    if (summary == figure.by_placement.end() || summary->second.count == 0) return std::nullopt;
    return summary->second.median;
  }
  return std::nullopt;
}

void Report::AddRatio(const RatioSpec& spec) {
  Ratio ratio{.spec = spec, .by_placement = {}};
  for (Placement placement : {Placement::kPinned, Placement::kUnpinned, Placement::kAny}) {
    const auto numerator = Median(spec.numerator, placement);
    const auto denominator = Median(spec.denominator, placement);
    if (numerator && denominator && *denominator != 0) {
      ratio.by_placement[placement] = *numerator / *denominator;
    }
  }
  ratios_.push_back(std::move(ratio));
}

void Report::AddPeerReference(const PeerReferenceSpec& spec) {
  PeerReference reference{.spec = spec, .ours = {}};
  for (Placement placement : kBothPlacements) {
    if (auto ours = Median(spec.ours, placement)) reference.ours[placement] = *ours;
  }
  peer_references_.push_back(std::move(reference));
}

void Report::AddNote(int section, std::string note) { notes_[section].push_back(std::move(note)); }

void Report::Print(std::ostream& out) const {
  out << "\n";
  for (const auto& [key, value] : run_facts_) {
    out << PadRight(key + ":", 28) << value << "\n";
  }
  std::vector<int> sections;
  sections.reserve(section_titles_.size() + notes_.size());
  for (const auto& [section, title] : section_titles_) sections.push_back(section);
  for (const auto& [section, notes] : notes_) {
    if (!section_titles_.contains(section)) sections.push_back(section);
  }
  std::ranges::sort(sections);
  const std::string placement_header =
      std::string(kLabelWidth + kUnitWidth, ' ') +
      PadRight("  pinned (one CPU)", 2 * kNumberWidth + kCountWidth) + "  unpinned";
  const std::string column_header =
      PadRight("  figure", kLabelWidth) + PadLeft("unit", kUnitWidth) +
      PadLeft("median", kNumberWidth) + PadLeft("p99", kNumberWidth) + PadLeft("n", kCountWidth) +
      PadLeft("median", kNumberWidth) + PadLeft("p99", kNumberWidth) + PadLeft("n", kCountWidth);

  for (int section : sections) {
    const bool has_content =
        notes_.contains(section) ||
        std::ranges::any_of(figures_,
                            [&](const Figure& figure) { return figure.spec.section == section; }) ||
        std::ranges::any_of(ratios_,
                            [&](const Ratio& ratio) { return ratio.spec.section == section; });
    if (!has_content) continue;
    const auto title = section_titles_.find(section);
    out << "\n" << section << ". " << (title == section_titles_.end() ? "" : title->second) << "\n";
    bool any_rows = false;
    for (const Figure& figure : figures_) {
      if (figure.spec.section != section) continue;
      if (!any_rows) out << placement_header << "\n" << column_header << "\n";
      any_rows = true;
      const auto summary_in = [&](Placement placement) -> const Summary* {
        auto found = figure.by_placement.find(placement);
        return found == figure.by_placement.end() ? nullptr : &found->second;
      };
      const Summary* pinned = summary_in(Placement::kPinned);
      const Summary* unpinned = summary_in(Placement::kUnpinned);
      const Summary* any = summary_in(Placement::kAny);
      std::string label = "  " + figure.spec.label;
      if (any != nullptr) label += " (any placement)";
      out << PadRight(label, kLabelWidth) << PadLeft(figure.spec.unit, kUnitWidth)
          << SummaryColumns(any != nullptr ? any : pinned) << SummaryColumns(unpinned) << "\n";
    }
    for (const Ratio& ratio : ratios_) {
      if (ratio.spec.section != section || ratio.by_placement.empty()) continue;
      if (!any_rows) out << placement_header << "\n" << column_header << "\n";
      any_rows = true;
      std::string verdicts;
      std::string columns;
      for (Placement placement : {Placement::kPinned, Placement::kUnpinned}) {
        auto value = ratio.by_placement.find(placement);
        if (value == ratio.by_placement.end()) {
          value = ratio.by_placement.find(Placement::kAny);
        }
        const bool present = value != ratio.by_placement.end();
        columns += PadLeft(present ? FormatNumber(value->second) + "x" : "-", kNumberWidth) +
                   std::string(kNumberWidth + kCountWidth, ' ');
        if (ratio.spec.target && present) {
          if (!verdicts.empty()) verdicts += "/";
          verdicts += ratio.spec.target->Met(value->second) ? "met" : "NOT met";
        }
      }
      out << PadRight("  ratio: " + ratio.spec.label, kLabelWidth) << PadLeft("", kUnitWidth)
          << columns;
      if (ratio.spec.target)
        out << "  target " << ratio.spec.target->ToString() << ": " << verdicts;
      out << "\n";
    }
    if (auto notes = notes_.find(section); notes != notes_.end()) {
      for (const std::string& note : notes->second) out << "  note: " << note << "\n";
    }
  }

  if (!peer_references_.empty()) {
    out << "\nPeer reference: Apache Arrow Plasma (and a gRPC floor). REFERENCE CONSTANTS, NOT "
           "measured in this run\n(each line says where it was measured); ratio = ours / theirs, "
           "same placement.\n";
    out << PadRight("  figure", kLabelWidth) << PadLeft("unit", kUnitWidth)
        << PadLeft("theirs", kNumberWidth) << PadLeft("ours", kNumberWidth)
        << PadLeft("ratio", kNumberWidth) << "  |" << PadLeft("theirs", kNumberWidth)
        << PadLeft("ours", kNumberWidth) << PadLeft("ratio", kNumberWidth) << "\n";
    out << std::string(kLabelWidth + kUnitWidth, ' ') << PadRight("  pinned (one CPU)", 32)
        << "|  unpinned\n";
    for (const PeerReference& reference : peer_references_) {
      if (reference.ours.empty()) continue;  // Its section did not run.
      out << PadRight("  " + reference.spec.label, kLabelWidth)
          << PadLeft(reference.spec.unit, kUnitWidth);
      for (Placement placement : kBothPlacements) {
        const std::optional<double> theirs =
            placement == Placement::kPinned ? reference.spec.pinned : reference.spec.unpinned;
        auto ours = reference.ours.find(placement);
        const bool have_ours = ours != reference.ours.end();
        out << PadLeft(theirs ? FormatNumber(*theirs) : "-", kNumberWidth)
            << PadLeft(have_ours ? FormatNumber(ours->second) : "-", kNumberWidth)
            << PadLeft(theirs && have_ours ? FormatNumber(ours->second / *theirs) + "x" : "-",
                       kNumberWidth);
        if (placement == Placement::kPinned) out << "  |";
      }
      out << "\n";
      out << "      " << reference.spec.source << "\n";
    }
  }
  out << std::flush;
}

Status Report::WriteJson(const std::string& path) const {
  Json json;
  json["schema"] = "hurray-bench/1";
  Json run = Json::object();
  for (const auto& [key, value] : run_facts_) run[key] = value;
  json["run"] = run;

  Json sections = Json::object();
  for (const auto& [section, title] : section_titles_) {
    Json notes = Json::array();
    if (auto found = notes_.find(section); found != notes_.end()) {
      for (const std::string& note : found->second) notes.push_back(note);
    }
    sections[std::to_string(section)] = Json{{"title", title}, {"notes", notes}};
  }
  json["sections"] = sections;

  Json figures = Json::object();
  for (const Figure& figure : figures_) {
    Json entry{
        {"section", figure.spec.section}, {"label", figure.spec.label}, {"unit", figure.spec.unit}};
    for (const auto& [placement, summary] : figure.by_placement) {
      entry[std::string(PlacementName(placement))] = SummaryJson(summary);
    }
    figures[figure.spec.key] = entry;
  }
  json["figures"] = figures;

  Json ratios = Json::object();
  for (const Ratio& ratio : ratios_) {
    if (ratio.by_placement.empty()) continue;  // A figure it needs was not measured.
    Json entry{{"section", ratio.spec.section},
               {"label", ratio.spec.label},
               {"numerator", ratio.spec.numerator},
               {"denominator", ratio.spec.denominator}};
    if (ratio.spec.target) entry["target"] = ratio.spec.target->ToString();
    for (const auto& [placement, value] : ratio.by_placement) {
      Json result{{"value", value}};
      if (ratio.spec.target) result["target_met"] = ratio.spec.target->Met(value);
      entry[std::string(PlacementName(placement))] = result;
    }
    ratios[ratio.spec.key] = entry;
  }
  json["ratios"] = ratios;

  Json peers = Json::object();
  for (const PeerReference& reference : peer_references_) {
    Json entry{
        {"label", reference.spec.label},   {"unit", reference.spec.unit},
        {"ours", reference.spec.ours},     {"higher_is_better", reference.spec.higher_is_better},
        {"source", reference.spec.source}, {"measured_here", false}};
    for (Placement placement : kBothPlacements) {
      const std::optional<double> theirs =
          placement == Placement::kPinned ? reference.spec.pinned : reference.spec.unpinned;
      Json result = Json::object();
      if (theirs) result["theirs"] = *theirs;
      if (auto ours = reference.ours.find(placement); ours != reference.ours.end()) {
        result["ours"] = ours->second;
        if (theirs) {
          result["ratio"] = ours->second / *theirs;
          result["ours_better"] =
              reference.spec.higher_is_better ? ours->second > *theirs : ours->second < *theirs;
        }
      }
      entry[std::string(PlacementName(placement))] = result;
    }
    peers[reference.spec.key] = entry;
  }
  json["peer_reference"] = peers;

  std::ofstream file(path);
  file << json.dump(2) << "\n";
  file.close();
  if (!file) return InternalError("write " + path + ": failed");
  return {};
}

}  // namespace hurray::bench
