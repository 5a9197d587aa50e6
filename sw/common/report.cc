#include "report.h"

#include "output.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <stdexcept>

namespace tpu {

double MetricValue::as_double() const {
  switch (kind_) {
    case Kind::kInt:
      return static_cast<double>(i_);
    case Kind::kUint:
      return static_cast<double>(u_);
    case Kind::kDouble:
      return d_;
    case Kind::kBool:
    case Kind::kString:
      break;
  }
  throw std::logic_error("MetricValue: as_double() of a bool or string metric");
}

Json MetricValue::to_json() const {
  switch (kind_) {
    case Kind::kInt:
      return Json(i_);
    case Kind::kUint:
      return Json(u_);
    case Kind::kDouble:
      return Json(d_);
    case Kind::kBool:
      return Json(b_);
    case Kind::kString:
      return Json(s_);
  }
  return Json();
}

std::string MetricValue::text() const {
  switch (kind_) {
    case Kind::kInt:
      return std::to_string(i_);
    case Kind::kUint:
      return std::to_string(u_);
    case Kind::kBool:
      return b_ ? "true" : "false";
    case Kind::kString:
      return s_;
    case Kind::kDouble:
      break;
  }
  if (std::isnan(d_)) return "nan";
  if (std::isinf(d_)) return d_ > 0 ? "inf" : "-inf";
  if (d_ == 0) return "0";
  char buf[64];
  const double a = std::fabs(d_);
  if (a < 0.01 || a >= 1e12) {
    std::snprintf(buf, sizeof buf, "%.3g", d_);
    return buf;
  }
  std::snprintf(buf, sizeof buf, "%.3f", d_);
  std::string s = buf;
  s.erase(s.find_last_not_of('0') + 1);  // "%.3f" always has a '.', so this stops at it
  if (s.back() == '.') s.pop_back();
  return s;
}

ReportGroup::ReportGroup(std::string name) : name_(std::move(name)) {}

void ReportGroup::check_new_name(const std::string& name) const {
  const std::string where = name_.empty() ? "report" : "report group '" + name_ + "'";
  if (name.empty()) throw std::invalid_argument(where + ": empty name; names are non-empty");
  if (name.find('.') != std::string::npos) {
    throw std::invalid_argument(where + ": name '" + name +
                                "' contains '.'; '.' separates groups in a path");
  }
  for (const Entry& e : entries_) {
    if (e.name == name) {
      throw std::invalid_argument(where + ": duplicate name '" + name +
                                  "'; a name is used once per group");
    }
  }
}

ReportGroup& ReportGroup::metric(const std::string& name, MetricValue value,
                                 const std::string& unit, const std::string& description,
                                 bool summary) {
  check_new_name(name);
  Entry e{Entry::Kind::kMetric, name, nullptr, Json(), nullptr};
  e.metric.reset(new Metric{name, std::move(value), unit, description, summary});
  entries_.push_back(std::move(e));
  return *this;
}

ReportGroup& ReportGroup::field(const std::string& name, Json value) {
  check_new_name(name);
  entries_.push_back(Entry{Entry::Kind::kField, name, nullptr, std::move(value), nullptr});
  return *this;
}

ReportGroup& ReportGroup::group(const std::string& name) {
  for (Entry& e : entries_) {
    if (e.name == name && e.kind == Entry::Kind::kGroup) return *e.group;
  }
  check_new_name(name);
  Entry e{Entry::Kind::kGroup, name, nullptr, Json(), std::make_unique<ReportGroup>(name)};
  entries_.push_back(std::move(e));
  return *entries_.back().group;
}

const Metric* ReportGroup::find(const std::string& path) const {
  const std::size_t dot = path.find('.');
  const std::string head = path.substr(0, dot);
  for (const Entry& e : entries_) {
    if (e.name != head) continue;
    if (dot == std::string::npos) return e.kind == Entry::Kind::kMetric ? e.metric.get() : nullptr;
    return e.kind == Entry::Kind::kGroup ? e.group->find(path.substr(dot + 1)) : nullptr;
  }
  return nullptr;
}

ReportGroup& ReportGroup::set_cycles(uint64_t cycles, MetricValue ideal_cycles) {
  if (!ideal_cycles.is_number()) {
    throw std::invalid_argument("set_cycles: ideal_cycles must be a number");
  }
  for (const char* k :
       {report_key::kCycles, report_key::kIdealCycles, report_key::kFractionOfBound}) {
    check_new_name(k);  // all or nothing
  }
  const double frac = cycles ? ideal_cycles.as_double() / static_cast<double>(cycles) : 0.0;
  metric(report_key::kCycles, cycles, "cycles", "measured cycles of the run", true);
  metric(report_key::kIdealCycles, std::move(ideal_cycles), "cycles",
         "performance-model bound for the same work on the same hardware", true);
  metric(report_key::kFractionOfBound, frac, "fraction",
         "ideal_cycles / cycles: 1 means the run met its bound", true);
  return *this;
}

ReportGroup& ReportGroup::set_bandwidth(double alg_bytes_per_cycle, double bus_bytes_per_cycle) {
  check_new_name(report_key::kAlgBytesPerCycle);  // all or nothing
  check_new_name(report_key::kBusBytesPerCycle);
  metric(report_key::kAlgBytesPerCycle, alg_bytes_per_cycle, "B/cycle",
         "algorithm bandwidth: buffer bytes S / cycles (nccl-tests algbw)", true);
  metric(report_key::kBusBytesPerCycle, bus_bytes_per_cycle, "B/cycle",
         "bus bandwidth: algbw * the collective's factor (nccl-tests busbw)", true);
  return *this;
}

ReportGroup& ReportGroup::set_mfu(double mfu) {
  return metric(report_key::kMfu, mfu, "fraction",
                "useful MACs / (chips * peak MACs per cycle * cycles)", true);
}

ReportGroup& ReportGroup::set_mismatches(uint64_t mismatches) {
  return metric(report_key::kMismatches, mismatches, "",
                "output elements that differ from the golden model", true);
}

ReportGroup& ReportGroup::set_golden(bool pass, uint64_t outputs, uint64_t mismatches) {
  group(report_key::kGolden)
      .metric(report_key::kVerdict, pass ? "pass" : "fail", "",
              "golden check: pass when every output matches the golden model bit for bit", true)
      .metric(report_key::kOutputs, outputs, "", "output elements compared")
      .metric(report_key::kMismatches, mismatches, "",
              "output elements that differ from the golden model", true);
  return *this;
}

Json ReportGroup::json() const {
  Json out = Json::object();
  for (const Entry& e : entries_) {
    switch (e.kind) {
      case Entry::Kind::kMetric:
        out[e.name] = e.metric->value.to_json();
        break;
      case Entry::Kind::kField:
        out[e.name] = e.field;
        break;
      case Entry::Kind::kGroup:
        out[e.name] = e.group->json();
        break;
    }
  }
  return out;
}

void ReportGroup::collect_units(const std::string& prefix, Json& out) const {
  for (const Entry& e : entries_) {
    if (e.kind == Entry::Kind::kMetric) out[prefix + e.name] = e.metric->unit;
    if (e.kind == Entry::Kind::kGroup) e.group->collect_units(prefix + e.name + ".", out);
  }
}

Json ReportGroup::units() const {
  Json out = Json::object();
  collect_units("", out);
  return out;
}

void ReportGroup::collect_describe(const std::string& prefix, std::string& out) const {
  for (const Entry& e : entries_) {
    if (e.kind == Entry::Kind::kMetric) {
      out += prefix + e.name;
      if (!e.metric->unit.empty()) out += " [" + e.metric->unit + "]";
      out += ": " + e.metric->description + "\n";
    }
    if (e.kind == Entry::Kind::kGroup) e.group->collect_describe(prefix + e.name + ".", out);
  }
}

std::string ReportGroup::describe() const {
  std::string out;
  collect_describe("", out);
  return out;
}

void ReportGroup::collect_summary(const std::string& prefix,
                                  std::vector<std::vector<std::string>>& rows) const {
  for (const Entry& e : entries_) {
    if (e.kind == Entry::Kind::kMetric && e.metric->summary) {
      rows.push_back({prefix + e.name, e.metric->value.text(), e.metric->unit});
    }
    if (e.kind == Entry::Kind::kGroup) e.group->collect_summary(prefix + e.name + ".", rows);
  }
}

std::string Report::summary() const {
  std::vector<std::vector<std::string>> rows;
  collect_summary("", rows);
  std::size_t name_w = 0;
  std::size_t value_w = 0;
  for (const auto& r : rows) {
    name_w = std::max(name_w, r[0].size());
    value_w = std::max(value_w, r[1].size());
  }
  std::string out = title_ + "\n";
  for (const auto& r : rows) {
    out += "  " + r[0] + std::string(name_w - r[0].size() + 2, ' ');
    out += std::string(value_w - r[1].size(), ' ') + r[1];
    if (!r[2].empty()) out += " " + r[2];
    out += "\n";
  }
  return out;
}

void Report::write(const std::string& path) const {
  if (files_muted()) return;
  std::ofstream f(path);
  if (!f) {
    throw std::runtime_error("report: cannot open '" + path +
                             "' for writing: " + std::strerror(errno));
  }
  f << json_text(json()) << "\n";
  f.close();  // flushes: a full disk or a short write shows up here
  if (!f)
    throw std::runtime_error("report: writing '" + path + "' failed (" + std::strerror(errno) +
                             ")");
}

}  // namespace tpu
