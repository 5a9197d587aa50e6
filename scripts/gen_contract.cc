// gen_contract: writes the chip's hardware contract (configs/tpu_contract.yaml) as a
// SystemVerilog package, a C++ header and a CMake include, so that the RTL, the harness and the
// drivers share one description of the command word, errors, statistics and chip variants.
//
//   gen_contract <contract.yaml> <out dir>
//
// Writes <out>/tpu_contract_pkg.sv, <out>/tpu_contract.h and <out>/tpu_contract.cmake; a file
// whose contents would not change is left alone (so its dependents are not rebuilt). Any rule the
// YAML breaks is an error that names the file, the key and the rule.
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <iterator>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

struct Field {
  std::string name, type, doc;
  unsigned lsb = 0, width = 0;
};
struct EnumVal {
  std::string id, doc;
  unsigned value = 0;
};
struct Enum {
  std::string name, id, doc;
  unsigned bits = 0;
  std::vector<EnumVal> values;
};
struct Op {
  std::string name, id, doc;
  unsigned code = 0;
  std::vector<Field> fields;
};
struct Named {  // errors, stats, trace bits
  std::string name, id, doc;
  unsigned code = 0;
};
struct Variant {
  std::string name, sv, doc;
  unsigned id = 0;
  std::vector<std::pair<std::string, unsigned>> params;  // in kVariantParams order
  bool build_mxu = false, build_chip = false;
};

const char* const kVariantParams[] = {"mxu_rows",  "mxu_cols",     "mxu_wbanks",
                                      "mxu_wrows", "vmem_rows",    "amem_rows",
                                      "hbm_channels", "hbm_rows_per_bank"};
const char* const kVariantDocs[] = {
    "MXU rows: the K extent of one weight tile",
    "MXU columns: the N extent of one weight tile",
    "weight banks per MXU cell: tiles loaded ahead (>= 2)",
    "weight rows loaded per cycle (divides mxu_rows)",
    "vector memory rows (each mxu_cols lanes x 32 bit)",
    "accumulator memory rows (each mxu_cols lanes x f32)",
    "HBM channels (power of two)",
    "HBM rows per bank (power of two): capacity"};

constexpr unsigned kWordBits = 128;
constexpr unsigned kOpBits = 4;

std::string g_file;

[[noreturn]] void fail(const std::string& key, const std::string& rule) {
  throw std::runtime_error(g_file + ": " + key + ": " + rule);
}

std::string str(const YAML::Node& n, const std::string& key, const std::string& where) {
  if (!n[key] || !n[key].IsScalar()) fail(where + "." + key, "must be a string");
  return n[key].as<std::string>();
}
std::string opt_str(const YAML::Node& n, const std::string& key) {
  return n[key] ? n[key].as<std::string>() : std::string();
}
unsigned num(const YAML::Node& n, const std::string& key, const std::string& where) {
  if (!n[key] || !n[key].IsScalar()) fail(where + "." + key, "must be a number");
  try {
    return n[key].as<unsigned>();
  } catch (const YAML::Exception&) {
    fail(where + "." + key, "must be a non-negative integer");
  }
}
YAML::Node seq(const YAML::Node& n, const std::string& key) {
  if (!n[key] || !n[key].IsSequence()) fail(key, "must be a list");
  return n[key];
}

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}
// snake_case -> UPPER_SNAKE_CASE.
std::string upper(const std::string& s) {
  std::string o;
  for (char c : s) o += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return o;
}
// One past an enum's largest value.
unsigned count_of(const Enum& e) {
  unsigned n = 0;
  for (const EnumVal& v : e.values) n = std::max(n, v.value + 1);
  return n;
}
// snake_case -> UpperCamelCase.
std::string camel(const std::string& s) {
  std::string o;
  bool up = true;
  for (char c : s) {
    if (c == '_') {
      up = true;
    } else {
      o += up ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : c;
      up = false;
    }
  }
  return o;
}
unsigned bits_for(unsigned max_value) {
  unsigned b = 1;
  while ((max_value >> b) != 0) ++b;
  return b;
}

Field parse_field(const YAML::Node& n, const std::string& where) {
  Field f;
  f.name = str(n, "name", where);
  f.lsb = num(n, "lsb", where + "." + f.name);
  f.width = num(n, "width", where + "." + f.name);
  f.doc = str(n, "doc", where + "." + f.name);
  f.type = opt_str(n, "type");
  if (f.width == 0 || f.width > 32) fail(where + "." + f.name + ".width", "must be 1..32");
  if (f.lsb < kOpBits || f.lsb + f.width > kWordBits)
    fail(where + "." + f.name, "must lie in bits [127:4] (bits [3:0] are the opcode)");
  return f;
}

// Fields of one view must not overlap.
void check_overlap(const std::vector<Field>& fs, const std::string& where) {
  std::vector<std::string> owner(kWordBits);
  std::set<std::string> names;
  for (const auto& f : fs) {
    if (!names.insert(f.name).second) fail(where + "." + f.name, "is named twice");
    for (unsigned b = f.lsb; b < f.lsb + f.width; ++b) {
      if (!owner[b].empty()) fail(where + "." + f.name, "overlaps field " + owner[b]);
      owner[b] = f.name;
    }
  }
}

struct Contract {
  std::vector<Field> generic;
  std::vector<Enum> enums;
  std::vector<Op> ops;
  std::vector<Named> errors, stats, trace, constants;
  std::vector<Variant> variants;
  std::string variant_default;
};

Contract parse(const YAML::Node& root) {
  Contract c;
  if (!root["word_bits"] || root["word_bits"].as<unsigned>() != kWordBits)
    fail("word_bits", "must be 128 (the host port's command width)");
  for (const auto& n : seq(root, "generic")) c.generic.push_back(parse_field(n, "generic"));
  check_overlap(c.generic, "generic");
  for (const auto& n : seq(root, "enums")) {
    Enum e;
    e.name = str(n, "name", "enums");
    e.id = str(n, "id", "enums." + e.name);
    e.doc = str(n, "doc", "enums." + e.name);
    e.bits = num(n, "bits", "enums." + e.name);
    for (const auto& v : seq(n, "values")) {
      EnumVal ev{str(v, "id", "enums." + e.name), str(v, "doc", "enums." + e.name),
                 num(v, "value", "enums." + e.name)};
      if (bits_for(ev.value) > e.bits) fail("enums." + e.name + "." + ev.id, "does not fit bits");
      e.values.push_back(ev);
    }
    c.enums.push_back(e);
  }
  std::set<unsigned> codes;
  for (const auto& n : seq(root, "ops")) {
    Op o;
    o.name = str(n, "name", "ops");
    o.id = str(n, "id", "ops." + o.name);
    o.doc = str(n, "doc", "ops." + o.name);
    o.code = num(n, "code", "ops." + o.name);
    if (o.code >= (1u << kOpBits)) fail("ops." + o.name + ".code", "must fit 4 bits");
    if (!codes.insert(o.code).second) fail("ops." + o.name + ".code", "is used twice");
    for (const auto& f : seq(n, "fields")) o.fields.push_back(parse_field(f, "ops." + o.name));
    check_overlap(o.fields, "ops." + o.name);
    for (const auto& f : o.fields) {
      if (f.type.empty()) continue;
      bool found = false;
      for (const auto& e : c.enums) {
        if (e.name == f.type) {
          found = true;
          if (e.bits != f.width)
            fail("ops." + o.name + "." + f.name + ".type", "enum width differs from width");
        }
      }
      if (!found) fail("ops." + o.name + "." + f.name + ".type", "names no enum");
    }
    c.ops.push_back(o);
  }
  for (const auto& n : seq(root, "errors")) {
    Named e{str(n, "name", "errors"), str(n, "id", "errors"), str(n, "doc", "errors"),
            num(n, "code", "errors")};
    if (e.code > 255) fail("errors." + e.name + ".code", "must fit 8 bits");
    c.errors.push_back(e);
  }
  unsigned i = 0;
  for (const auto& n : seq(root, "stats")) {
    c.stats.push_back({str(n, "name", "stats"), str(n, "id", "stats"), str(n, "doc", "stats"),
                       i++});
  }
  for (const auto& n : seq(root, "trace_done")) {
    c.trace.push_back({"", str(n, "id", "trace_done"), str(n, "doc", "trace_done"),
                       num(n, "bit", "trace_done")});
  }
  for (const auto& n : seq(root, "constants")) {
    c.constants.push_back({str(n, "name", "constants"), str(n, "id", "constants"),
                           str(n, "doc", "constants"), num(n, "value", "constants")});
  }
  std::set<unsigned> ids;
  for (const auto& n : seq(root, "variants")) {
    Variant v;
    v.name = str(n, "name", "variants");
    const std::string w = "variants." + v.name;
    v.id = num(n, "id", w);
    v.sv = str(n, "sv", w);
    v.doc = str(n, "doc", w);
    if (!ids.insert(v.id).second) fail(w + ".id", "is used twice");
    for (const char* p : kVariantParams) v.params.emplace_back(p, num(n, p, w));
    v.build_mxu = n["build_mxu"] && n["build_mxu"].as<bool>();
    v.build_chip = n["build_chip"] && n["build_chip"].as<bool>();
    if (v.params[0].second % v.params[3].second != 0) fail(w + ".mxu_wrows", "must divide mxu_rows");
    c.variants.push_back(v);
  }
  c.variant_default = root["variant_default"] ? root["variant_default"].as<std::string>() : "";
  bool def_found = false;
  for (const auto& v : c.variants) def_found |= v.name == c.variant_default;
  if (!def_found) fail("variant_default", "must name a variant");
  return c;
}

// A struct's fields from bit 127 down, gaps as reserved fields (a packed struct overlays the
// whole word).
std::vector<Field> with_gaps(std::vector<Field> fs) {
  std::vector<Field> out;
  std::vector<bool> used(kWordBits, false);
  for (const auto& f : fs)
    for (unsigned b = f.lsb; b < f.lsb + f.width; ++b) used[b] = true;
  for (unsigned b = kOpBits; b < kWordBits;) {
    if (used[b]) {
      ++b;
      continue;
    }
    unsigned e = b;
    while (e < kWordBits && !used[e]) ++e;
    fs.push_back({"rsvd_" + std::to_string(b), "", "reserved, zero", b, e - b});
    b = e;
  }
  std::sort(fs.begin(), fs.end(), [](const Field& a, const Field& b) { return a.lsb > b.lsb; });
  return fs;
}

std::string sv_range(unsigned lsb, unsigned width) {
  return width == 1 ? "[" + std::to_string(lsb) + "]"
                    : "[" + std::to_string(lsb + width - 1) + ":" + std::to_string(lsb) + "]";
}

// A string as a C++ literal's contents.
std::string esc(const std::string& s) {
  std::string o;
  for (char ch : s) {
    if (ch == '"' || ch == '\\') o += '\\';
    o += ch;
  }
  return o;
}

const char* const kBanner = "Generated by scripts/gen_contract.cc from configs/tpu_contract.yaml. Do not edit.";

std::string gen_sv(const Contract& c) {
  std::ostringstream o;
  o << "// tpu_contract_pkg: the chip's hardware contract (docs/isa.md).\n// " << kBanner
    << "\n// tpu_chip_pkg and tpu_pkg export it; the C++ side is tpu_contract.h, made from the same "
       "file.\npackage tpu_contract_pkg;\n\n";
  o << "  typedef enum logic [" << kOpBits - 1 << ":0] {\n";
  for (size_t i = 0; i < c.ops.size(); ++i) {
    const auto& op = c.ops[i];
    o << "    Op" << op.id << " = " << kOpBits << "'d" << op.code
      << (i + 1 < c.ops.size() ? "," : "") << "  // " << op.doc << "\n";
  }
  o << "  } chip_op_e;\n\n";
  for (const auto& e : c.enums) {
    o << "  // " << e.doc << "\n  typedef enum logic [" << e.bits - 1 << ":0] {\n";
    for (size_t i = 0; i < e.values.size(); ++i) {
      const auto& v = e.values[i];
      o << "    " << e.id << v.id << " = " << e.bits << "'d" << v.value
        << (i + 1 < e.values.size() ? "," : "") << "  // " << v.doc << "\n";
    }
    o << "  } " << e.name << "_e;\n";
    o << "  localparam int unsigned " << upper(e.name) << "_COUNT = " << count_of(e)
      << ";  // one past the largest value\n\n";
  }
  o << "  // Sticky error codes (first error wins; cleared by the host's clear input).\n"
       "  typedef enum logic [7:0] {\n";
  for (size_t i = 0; i < c.errors.size(); ++i) {
    const auto& e = c.errors[i];
    o << "    Err" << e.id << " = 8'd" << e.code << (i + 1 < c.errors.size() ? "," : "")
      << "  // " << e.name << ": " << e.doc << "\n";
  }
  o << "  } chip_err_e;\n\n";
  const unsigned sbits = bits_for(static_cast<unsigned>(c.stats.size()) - 1);
  o << "  // Statistics, read by index on the host port (64-bit counters since reset).\n"
       "  typedef enum logic ["
    << sbits - 1 << ":0] {\n";
  for (size_t i = 0; i < c.stats.size(); ++i) {
    const auto& s = c.stats[i];
    o << "    Stat" << s.id << " = " << sbits << "'d" << s.code
      << (i + 1 < c.stats.size() ? "," : "") << "  // " << s.name << ": " << s.doc << "\n";
  }
  o << "  } chip_stat_e;\n  localparam int unsigned CHIP_NUM_STATS = " << c.stats.size()
    << ";\n\n";
  o << "  // The trace port's done bits (tpu_chip trc_done_o): one pulse per completed command.\n";
  for (const auto& t : c.trace)
    o << "  localparam int unsigned TRC_DONE_" << t.id << " = " << t.code << ";  // " << t.doc
      << "\n";
  o << "\n  // Sizes every chip variant shares.\n";
  for (const auto& k : c.constants)
    o << "  localparam int unsigned " << k.id << " = " << k.code << ";  // " << k.name << ": "
      << k.doc << "\n";
  o << "\n  // One command word, generic fields named by position (docs/isa.md).\n"
       "  typedef struct packed {\n";
  for (const auto& f : with_gaps(c.generic)) {
    o << "    logic " << (f.width > 1 ? "[" + std::to_string(f.width - 1) + ":0] " : "")
      << f.name << ";  // " << sv_range(f.lsb, f.width) << " " << f.doc << "\n";
  }
  o << "    chip_op_e op;  // [3:0]\n  } chip_cmd_t;\n\n";
  o << "  // One packed struct per opcode over the same 128 bits: cast a chip_cmd_t to read its\n"
       "  // fields by name, e.g. `cmd_dma_t d; assign d = cmd_dma_t'(head);`.\n";
  for (const auto& op : c.ops) {
    o << "  typedef struct packed {  // Op" << op.id << ": " << op.doc << "\n";
    for (const auto& f : with_gaps(op.fields)) {
      std::string type = f.type.empty()
                             ? "logic " + (f.width > 1 ? "[" + std::to_string(f.width - 1) + ":0] "
                                                       : std::string())
                             : f.type + "_e ";
      o << "    " << type << f.name << ";  // " << sv_range(f.lsb, f.width) << " " << f.doc
        << "\n";
    }
    o << "    chip_op_e op;  // [3:0]\n  } cmd_" << op.name << "_t;\n";
  }
  o << "\n  // Named chip variants. The enum values are the VariantId the tops are built with.\n"
       "  typedef enum int unsigned {\n";
  for (size_t i = 0; i < c.variants.size(); ++i) {
    const auto& v = c.variants[i];
    o << "    Variant" << v.sv << " = " << v.id << (i + 1 < c.variants.size() ? "," : "")
      << "  // " << v.name << ": " << v.doc << "\n";
  }
  o << "  } variant_e;\n\n  // Everything a variant fixes at compile time.\n"
       "  typedef struct packed {\n";
  for (size_t i = 0; i < std::size(kVariantParams); ++i)
    o << "    int unsigned " << kVariantParams[i] << ";  // " << kVariantDocs[i] << "\n";
  o << "  } chip_cfg_t;\n\n"
       "  function automatic chip_cfg_t variant_cfg(variant_e v);\n"
       "    chip_cfg_t cfg;\n    unique case (v)\n";
  auto body = [&](const Variant& v, const std::string& label) {
    o << "      " << label << ": begin\n";
    for (const auto& p : v.params)
      o << "        cfg." << p.first << " = " << p.second << ";\n";
    o << "      end\n";
  };
  for (const auto& v : c.variants) body(v, "Variant" + v.sv);
  for (const auto& v : c.variants)
    if (v.name == c.variant_default) body(v, "default");
  o << "    endcase\n    return cfg;\n  endfunction\n\nendpackage\n";
  return o.str();
}

std::string gen_h(const Contract& c) {
  std::ostringstream o;
  o << "// The chip's hardware contract as C++ (docs/isa.md): the command word and one struct per\n"
       "// opcode, error codes, statistics, chip variants.\n// "
    << kBanner
    << "\n// The RTL takes the same from tpu_contract_pkg.sv; tb/chip/chip_contract.h adds the "
       "encoders.\n#pragma once\n\n#include <array>\n#include <cstdint>\n#include <cstring>\n#include <tuple>\n\n"
       "namespace tpu {\n\n";
  o << "enum class ChipOp : uint32_t {\n";
  for (const auto& op : c.ops) o << "  k" << op.id << " = " << op.code << ",  // " << op.doc << "\n";
  o << "};\n\n";
  for (const auto& e : c.enums) {
    o << "// " << e.doc << "\nenum class " << camel(e.name) << " : uint32_t {\n";
    for (const auto& v : e.values) o << "  k" << v.id << " = " << v.value << ",  // " << v.doc << "\n";
    o << "};\nconstexpr uint32_t k" << camel(e.name) << "Count = " << count_of(e)
      << ";  // one past the largest value\n\n";
  }
  o << "// Sticky error codes (tpu_chip_pkg::chip_err_e).\nenum class ChipErr : uint32_t {\n";
  for (const auto& e : c.errors) o << "  k" << e.id << " = " << e.code << ",  // " << e.doc << "\n";
  o << "};\n// An error code's name, as messages write it.\n"
       "inline const char* chip_err_name(unsigned code) {\n  switch (code) {\n";
  for (const auto& e : c.errors)
    o << "    case " << e.code << ": return \"" << esc(e.name) << "\";\n";
  o << "    default: return \"unknown\";\n  }\n}\n\n";
  o << "// Statistics indices (tpu_chip_pkg::chip_stat_e; docs/profiling.md says what each "
       "counts).\nenum ChipStat : unsigned {\n";
  for (const auto& s : c.stats) o << "  kStat" << s.id << " = " << s.code << ",  // " << s.doc << "\n";
  o << "  kNumChipStats = " << c.stats.size() << ",\n};\n\n"
    << "// The counters' names (snake_case, as reports write them), by index.\n"
       "inline const char* chip_stat_name(unsigned i) {\n"
       "  static const char* const kNames[kNumChipStats] = {\n";
  for (const auto& s : c.stats) o << "      \"" << esc(s.name) << "\",\n";
  o << "  };\n  return i < kNumChipStats ? kNames[i] : \"unknown\";\n}\n\n";
  o << "// The trace port's done bits (tpu_chip trc_done_o).\n";
  for (const auto& t : c.trace)
    o << "constexpr unsigned kTrcDone" << camel(lower(t.id)) << " = " << t.code << ";  // " << t.doc
      << "\n";
  o << "\n// Sizes every chip variant shares.\n";
  for (const auto& k : c.constants)
    o << "constexpr unsigned k" << k.id << " = " << k.code << ";  // " << k.name << ": " << k.doc
      << "\n";
  o << "\n// One field of a command word: bits [lsb + width - 1 : lsb].\n"
       "struct CmdField {\n  const char* name;\n  unsigned lsb;\n  unsigned width;\n"
       "  const char* doc;\n};\n\n";
  o << "// One command: w[0] = bits [31:0] ... w[3] = bits [127:96].\nstruct ChipCmd {\n"
       "  std::array<uint32_t, 4> w{};\n\n"
       "  // Bits [lsb + width - 1 : lsb] (width <= 32).\n"
       "  uint32_t get(unsigned lsb, unsigned width) const {\n"
       "    const unsigned i = lsb / 32, s = lsb % 32;\n"
       "    uint64_t v = w[i];\n"
       "    if (i + 1 < 4) v |= static_cast<uint64_t>(w[i + 1]) << 32;\n"
       "    return static_cast<uint32_t>((v >> s) & ((uint64_t{1} << width) - 1));\n  }\n"
       "  // Sets those bits to the low `width` bits of v.\n"
       "  void set(unsigned lsb, unsigned width, uint32_t v) {\n"
       "    const unsigned i = lsb / 32, s = lsb % 32;\n"
       "    const uint64_t m = ((uint64_t{1} << width) - 1) << s;\n"
       "    const uint64_t x = (static_cast<uint64_t>(v) << s) & m;\n"
       "    w[i] = (w[i] & ~static_cast<uint32_t>(m)) | static_cast<uint32_t>(x);\n"
       "    if (i + 1 < 4) {\n"
       "      w[i + 1] = (w[i + 1] & ~static_cast<uint32_t>(m >> 32)) | "
       "static_cast<uint32_t>(x >> 32);\n    }\n  }\n"
       "  ChipOp op() const { return static_cast<ChipOp>(get(0, "
    << kOpBits << ")); }\n\n";
  o << "  // The generic view (tpu_chip_pkg::chip_cmd_t): fields named by position.\n"
       "  static ChipCmd make(ChipOp op";
  for (const auto& f : c.generic) o << ", uint32_t " << f.name;
  o << ") {\n    ChipCmd c;\n    c.set(0, " << kOpBits << ", static_cast<uint32_t>(op));\n";
  for (const auto& f : c.generic)
    o << "    c.set(" << f.lsb << ", " << f.width << ", " << f.name << ");\n";
  o << "    return c;\n  }\n};\n\n";
  o << "// One struct per opcode (tpu_chip_pkg::cmd_<name>_t): named fields, encode() to a word "
       "(each\n// field keeps its low `width` bits, reserved bits are zero) and decode() back.\n";
  for (const auto& op : c.ops) {
    const std::string s = "Cmd" + op.id;
    o << "struct " << s << " {  // " << op.doc << "\n"
      << "  static constexpr ChipOp kOp = ChipOp::k" << op.id << ";\n"
      << "  static constexpr const char* kName = \"" << op.name << "\";\n";
    for (const auto& f : op.fields)
      o << "  uint32_t " << f.name << " = 0;  // " << sv_range(f.lsb, f.width) << " " << f.doc
        << "\n";
    o << "  static constexpr std::array<CmdField, " << op.fields.size() << "> kFields{{";
    for (size_t i = 0; i < op.fields.size(); ++i) {
      const auto& f = op.fields[i];
      o << (i ? ",\n" : "\n") << "      {\"" << f.name << "\", " << f.lsb << ", " << f.width
        << ", \"" << esc(f.doc) << "\"}";
    }
    o << "}};\n";
    // field(i): by index, for tests that walk every field.
    o << "  uint32_t& field(unsigned i) {\n";
    if (op.fields.empty()) {
      o << "    static uint32_t none = 0;\n    (void)i;\n    return none;\n";
    } else {
      o << "    switch (i) {\n";
      for (size_t i = 0; i + 1 < op.fields.size(); ++i)
        o << "      case " << i << ": return " << op.fields[i].name << ";\n";
      o << "      default: return " << op.fields.back().name << ";\n    }\n";
    }
    o << "  }\n";
    o << "  ChipCmd encode() const {\n    ChipCmd c;\n    c.set(0, " << kOpBits
      << ", static_cast<uint32_t>(kOp));\n";
    for (const auto& f : op.fields)
      o << "    c.set(" << f.lsb << ", " << f.width << ", " << f.name << ");\n";
    o << "    return c;\n  }\n";
    o << "  static " << s << " decode(const ChipCmd& c) {\n    " << s << " d;\n";
    for (const auto& f : op.fields)
      o << "    d." << f.name << " = c.get(" << f.lsb << ", " << f.width << ");\n";
    if (op.fields.empty()) o << "    (void)c;\n";
    o << "    return d;\n  }\n};\n";
  }
  o << "\n// Every per-opcode struct, in opcode order (for tests that walk them all).\n"
       "using ChipCmdTypes = std::tuple<";
  for (size_t i = 0; i < c.ops.size(); ++i) o << (i ? ", " : "") << "Cmd" << c.ops[i].id;
  o << ">;\n";
  o << "\n// Named chip variants (tpu_pkg::variant_cfg): every compile-time parameter of the RTL.\n"
       "struct ChipVariant {\n  const char* name;  // \"16x16\"\n"
       "  unsigned id;        // the VariantId the verilated tops are built with\n";
  for (size_t i = 0; i < std::size(kVariantParams); ++i)
    o << "  unsigned " << kVariantParams[i] << ";  // " << kVariantDocs[i] << "\n";
  o << "  bool build_mxu;   // CMake builds its MXU bench by default\n"
       "  bool build_chip;  // CMake builds its chip by default\n"
       "  const char* doc;\n};\n"
       "inline constexpr std::array<ChipVariant, "
    << c.variants.size() << "> kChipVariants{{\n";
  for (const auto& v : c.variants) {
    o << "    {\"" << v.name << "\", " << v.id;
    for (const auto& p : v.params) o << ", " << p.second;
    o << ", " << (v.build_mxu ? "true" : "false") << ", " << (v.build_chip ? "true" : "false")
      << ", \"" << esc(v.doc) << "\"},\n";
  }
  o << "}};\n// The variant of that name, or nullptr.\n"
       "inline const ChipVariant* find_chip_variant(const char* name) {\n"
       "  for (const auto& v : kChipVariants)\n"
       "    if (std::strcmp(v.name, name) == 0) return &v;\n  return nullptr;\n}\n\n"
       "}  // namespace tpu\n";
  return o.str();
}

std::string gen_cmake(const Contract& c) {
  std::ostringstream o;
  o << "# " << kBanner << "\n# Chip variants as name:VariantId lists.\n";
  auto list = [&](const char* var, auto pred) {
    o << "set(" << var;
    for (const auto& v : c.variants)
      if (pred(v)) o << " \"" << v.name << ":" << v.id << "\"";
    o << ")\n";
  };
  list("TPU_CONTRACT_VARIANTS", [](const Variant&) { return true; });
  list("TPU_CONTRACT_MXU_VARIANTS", [](const Variant& v) { return v.build_mxu; });
  list("TPU_CONTRACT_CHIP_VARIANTS", [](const Variant& v) { return v.build_chip; });
  return o.str();
}

void write_if_changed(const std::string& path, const std::string& text) {
  std::ifstream in(path, std::ios::binary);
  if (in) {
    std::stringstream ss;
    ss << in.rdbuf();
    if (ss.str() == text) return;
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  if (!out) throw std::runtime_error("cannot write " + path);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: gen_contract <contract.yaml> <out dir>\n";
    return 2;
  }
  g_file = argv[1];
  try {
    const Contract c = parse(YAML::LoadFile(argv[1]));
    const std::string out = argv[2];
    write_if_changed(out + "/tpu_contract_pkg.sv", gen_sv(c));
    write_if_changed(out + "/tpu_contract.h", gen_h(c));
    write_if_changed(out + "/tpu_contract.cmake", gen_cmake(c));
  } catch (const std::exception& e) {
    std::cerr << "gen_contract: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
