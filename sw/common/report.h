// The one report type of every workload, bench and tool (after gem5's stats groups and
// nccl-tests): a tree of named groups, each holding named metrics (value, unit, one-line
// description) and free-form fields (strings, tables as arrays of objects), written as JSON and as
// a short human summary from the same numbers.
//
// JSON: each metric is just its value at its key, each field its Json, each group a nested object,
// all in insertion order, so consumers read rep["cycles"] or rep["golden"]["verdict"]. Units and
// descriptions are not in the report's JSON: units() gives the unit of every metric by dotted
// path ("golden.mismatches") for a consumer that wants them, describe() lists units and
// descriptions as text. A number that is not finite is the string "inf", "-inf" or "nan" in the
// JSON, as in the summary (json_text, json.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "json.h"

namespace tpu {

// The keys every tool uses for the common metrics (see the ReportGroup::set_* helpers).
namespace report_key {
constexpr const char* kCycles = "cycles";
constexpr const char* kIdealCycles = "ideal_cycles";
constexpr const char* kFractionOfBound = "fraction_of_bound";
constexpr const char* kBusBytesPerCycle = "bus_bytes_per_cycle";
constexpr const char* kAlgBytesPerCycle = "alg_bytes_per_cycle";
constexpr const char* kMfu = "mfu";
constexpr const char* kMismatches = "mismatches";
constexpr const char* kGolden = "golden";
constexpr const char* kVerdict = "verdict";
constexpr const char* kOutputs = "outputs";
}  // namespace report_key

// A metric's scalar value: an integer (signed or unsigned), a double, a bool or a string.
class MetricValue {
 public:
  enum class Kind { kInt, kUint, kDouble, kBool, kString };

  template <typename T,
            typename std::enable_if<std::is_integral<T>::value && !std::is_same<T, bool>::value,
                                    int>::type = 0>
  MetricValue(T v) {
    if constexpr (std::is_signed<T>::value) {
      kind_ = Kind::kInt;
      i_ = static_cast<int64_t>(v);
    } else {
      kind_ = Kind::kUint;
      u_ = static_cast<uint64_t>(v);
    }
  }
  MetricValue(double d) : kind_(Kind::kDouble), d_(d) {}
  MetricValue(bool b) : kind_(Kind::kBool), b_(b) {}
  MetricValue(const char* s) : kind_(Kind::kString), s_(s) {}
  MetricValue(std::string s) : kind_(Kind::kString), s_(std::move(s)) {}

  Kind kind() const { return kind_; }
  bool is_number() const {
    return kind_ == Kind::kInt || kind_ == Kind::kUint || kind_ == Kind::kDouble;
  }
  // The number as a double; throws std::logic_error for a bool or a string.
  double as_double() const;
  const std::string& as_string() const { return s_; }  // "" unless kind() is kString
  Json to_json() const;
  // For the summary: integers exactly, doubles with at most 3 decimals (trailing zeros dropped;
  // 3 significant digits below 0.01), bools as true/false, strings as they are.
  std::string text() const;

 private:
  Kind kind_ = Kind::kInt;
  int64_t i_ = 0;
  uint64_t u_ = 0;
  double d_ = 0.0;
  bool b_ = false;
  std::string s_;
};

// One named metric of a group.
struct Metric {
  std::string name;
  MetricValue value;
  std::string unit;         // "cycles", "bytes", "B/cycle", "fraction", "" (a count, a verdict)
  std::string description;  // one line
  bool summary = false;     // shown in the human summary
};

// A named set of metrics, fields and child groups, in insertion order. Names are non-empty,
// contain no '.', and are unique within a group across metrics, fields and groups.
class ReportGroup {
 public:
  explicit ReportGroup(std::string name = "");
  ReportGroup(const ReportGroup&) = delete;
  ReportGroup& operator=(const ReportGroup&) = delete;
  ReportGroup(ReportGroup&&) = default;
  ReportGroup& operator=(ReportGroup&&) = default;
  virtual ~ReportGroup() = default;

  const std::string& name() const { return name_; }

  // Adds a metric; throws std::invalid_argument if the name is taken or malformed.
  ReportGroup& metric(const std::string& name, MetricValue value, const std::string& unit,
                      const std::string& description, bool summary = false);
  // Adds a free-form field (a string, an array of per-chip objects, ...); same naming rules.
  ReportGroup& field(const std::string& name, Json value);
  // The child group of that name, created empty at the end on first use; throws
  // std::invalid_argument if a metric or field holds the name. The reference stays valid for the
  // group's lifetime.
  ReportGroup& group(const std::string& name);

  // The metric at a dotted path below this group ("golden.verdict"), or nullptr.
  const Metric* find(const std::string& path) const;

  // Common metrics, under their report_key names; all are marked for the summary.
  // cycles, ideal_cycles and fraction_of_bound = ideal / cycles (0 when cycles is 0).
  ReportGroup& set_cycles(uint64_t cycles, MetricValue ideal_cycles);
  // alg_bytes_per_cycle (S / t) and bus_bytes_per_cycle (algbw * busbw factor); see tpu/perf.h.
  ReportGroup& set_bandwidth(double alg_bytes_per_cycle, double bus_bytes_per_cycle);
  ReportGroup& set_mfu(double mfu);
  ReportGroup& set_mismatches(uint64_t mismatches);
  // Group "golden": verdict "pass"/"fail", outputs compared, mismatches.
  ReportGroup& set_golden(bool pass, uint64_t outputs, uint64_t mismatches);

  Json json() const;             // this group as a JSON object (see the file comment)
  Json units() const;            // {"dotted.path": "unit", ...} for every metric below this group
  std::string describe() const;  // one line per metric: dotted path, [unit], description

 protected:
  // Appends the summary-marked metrics below this group as (dotted path, value text, unit).
  void collect_summary(const std::string& prefix,
                       std::vector<std::vector<std::string>>& rows) const;

 private:
  struct Entry {
    enum class Kind { kMetric, kField, kGroup } kind;
    std::string name;
    std::unique_ptr<Metric> metric;
    Json field;
    std::unique_ptr<ReportGroup> group;
  };
  void check_new_name(const std::string& name) const;
  void collect_units(const std::string& prefix, Json& out) const;
  void collect_describe(const std::string& prefix, std::string& out) const;

  std::string name_;
  std::vector<Entry> entries_;
};

// A workload's report: the root group plus a title for the summary.
class Report : public ReportGroup {
 public:
  explicit Report(std::string title) : title_(std::move(title)) {}
  const std::string& title() const { return title_; }

  // The title line, then "  <dotted name>  <value> <unit>" for each summary-marked metric in
  // tree order, names left-aligned and values right-aligned in columns.
  std::string summary() const;
  // Writes json_text(json()) and a newline to `path`; throws std::runtime_error naming the path if
  // it cannot be opened or written.
  void write(const std::string& path) const;

 private:
  std::string title_;
};

}  // namespace tpu
