#include "cli.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <sstream>

#include "output.h"

namespace tpu::cli {

namespace {

constexpr std::size_t kColumn = 24;  // where an option's description starts
constexpr std::size_t kWidth = 100;  // the help's lines fit in this (descriptions permitting)

// "  NAME VALUE" padded to the description's column (on the next line when longer), then the
// description; its further lines are indented to the column.
void option_line(std::ostream& out, const std::string& left, const std::string& desc) {
  const std::string l = "  " + left;
  out << l;
  if (desc.empty()) {
    out << "\n";
    return;
  }
  out << (l.size() + 1 > kColumn ? "\n" + std::string(kColumn, ' ')
                                 : std::string(kColumn - l.size(), ' '));
  for (const char c : desc) {
    out.put(c);
    if (c == '\n') out << std::string(kColumn, ' ');
  }
  out << "\n";
}

bool takes_value(const CLI::Option* o) { return o->get_expected_max() != 0; }

// The value's placeholder in the help: the option text, else its type name (M, FILE, ...),
// without the descriptions CLI11 appends for its validators.
std::string placeholder(const CLI::Option* o) {
  if (!o->get_option_text().empty()) return o->get_option_text();
  const std::string t = o->get_type_name();
  return t.substr(0, t.find(':'));
}

// The commands of a tool (hidden ones, group "", left out).
std::vector<const CLI::App*> commands(const CLI::App& app) {
  return app.get_subcommands([](const CLI::App* s) { return !s->get_group().empty(); });
}

class Help : public CLI::Formatter {
 public:
  std::string make_help(const CLI::App* app, std::string name, CLI::AppFormatMode) const override {
    return help(*app, name);
  }
};

// Every app (the tool and its commands) gets the shared rules before the line is parsed.
void prepare(CLI::App& app) {
  app.formatter(std::make_shared<Help>());
  app.allow_extras();  // reported by parse() as "unknown option", naming it
  if (app.get_option_no_throw("--help") == nullptr || app.get_help_ptr() != nullptr) {
    // CLI11's own help flag is acted on after every value was converted and checked; this one
    // stops the parse where it stands, so --help works next to a bad value too.
    app.set_help_flag();
    app.add_flag_callback(
           "-h,--help", [] { throw CLI::CallForHelp(); }, "this help")
        ->trigger_on_parse();
  }
  for (CLI::Option* o : app.get_options([](CLI::Option*) { return true; })) {
    // Every value is kept, so that a second one is reported below rather than as CLI11's
    // "At Most 1 required but received 2".
    if (o->get_multi_option_policy() == CLI::MultiOptionPolicy::Throw)
      o->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    if (!takes_value(o)) o->disable_flag_override();  // --quiet=0 is an error, not "not quiet"
  }
  for (CLI::App* s : app.get_subcommands([](CLI::App*) { return true; })) prepare(*s);
}

// The first option given twice that is not repeatable, in app or the commands it ran.
std::string given_twice(const CLI::App& app) {
  for (const CLI::Option* o : app.get_options())
    if (o->count() > 1 && o->get_multi_option_policy() != CLI::MultiOptionPolicy::TakeAll)
      return o->get_name() + " is given twice";
  for (const CLI::App* s : app.get_subcommands()) {
    const std::string e = given_twice(*s);
    if (!e.empty()) return e;
  }
  return "";
}

// How the innermost command the line ran is called ("tpusim matmul").
std::string called(const CLI::App& app) {
  const auto subs = app.get_subcommands();
  return subs.empty() ? app.get_name() : app.get_name() + " " + called(*subs.front());
}

// Whether `arg` names an option that takes a value (`valued`) or a flag, in app or the commands
// it ran.
bool names_option(const CLI::App& app, const std::string& arg, bool valued) {
  if (const CLI::Option* o = app.get_option_no_throw(arg)) return takes_value(o) == valued;
  for (const CLI::App* s : app.get_subcommands())
    if (names_option(*s, arg, valued)) return true;
  return false;
}

std::string number_text(double x) {
  std::ostringstream s;
  s << x;
  return s.str();
}

// A decimal integer: digits only, no sign, no leading zero (that would be octal to CLI11).
bool decimal(const std::string& v) {
  return !v.empty() && v.find_first_not_of("0123456789") == std::string::npos &&
         (v.size() == 1 || v[0] != '0');
}

bool to_uint(const std::string& v, uint64_t* x) {
  if (!decimal(v) || v.size() > 20) return false;
  errno = 0;
  const unsigned long long r = std::strtoull(v.c_str(), nullptr, 10);
  if (errno == ERANGE) return false;
  *x = r;
  return true;
}

std::string shown(const std::string& v) { return v.empty() ? "''" : v; }

// A real in decimal notation: digits with at most one point (at least one digit), then an
// optional exponent: e or E, an optional sign, digits.
bool decimal_real(const std::string& v) {
  std::size_t i = 0, digits = 0;
  while (i < v.size() && std::isdigit(static_cast<unsigned char>(v[i]))) ++i, ++digits;
  if (i < v.size() && v[i] == '.') ++i;
  while (i < v.size() && std::isdigit(static_cast<unsigned char>(v[i]))) ++i, ++digits;
  if (digits == 0) return false;
  if (i < v.size() && (v[i] == 'e' || v[i] == 'E')) {
    ++i;
    if (i < v.size() && (v[i] == '+' || v[i] == '-')) ++i;
    const std::size_t e = i;
    while (i < v.size() && std::isdigit(static_cast<unsigned char>(v[i]))) ++i;
    if (i == e) return false;
  }
  return i == v.size();
}

// The validators' names that mark what an option's value is (parse() compares their paths).
const char* const kInputTag = "cli:input";
const char* const kOutputTag = "cli:output";
const char* const kOutputDirTag = "cli:output-dir";

bool has_validator(CLI::Option* o, const char* name) {
  try {
    return o->get_validator(name)->get_name() == name;
  } catch (const CLI::OptionNotFound&) {
    return false;
  }
}

// The command of `in` that the word `w` names, if any.
CLI::App* command_named(CLI::App* in, const std::string& w) {
  const auto subs = in->get_subcommands([&](CLI::App* s) { return s->check_name(w); });
  return subs.empty() ? nullptr : subs.front();
}

bool is_help(const std::string& w) { return w == "-h" || w == "--help"; }

// The values of the line as CLI11 will take them, checked before any validator sees one (so an
// output_path never tries `--quiet`): each is non-empty and does not start with "--". Returns the
// error, or "" with *help set to the command to give the help of when a value is -h or --help
// (the help wins wherever it stands), and *name to how that command is called.
std::string check_values(CLI::App& app, const std::vector<std::string>& args, CLI::App** help,
                         std::string* name) {
  CLI::App* in = &app;
  *name = app.get_name();
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") break;  // CLI11: what follows are positional arguments
    if (a.rfind("--", 0) != 0) {
      if (CLI::App* sub = a.empty() || a[0] == '-' ? nullptr : command_named(in, a)) {
        in = sub;
        *name += " " + a;
      }
      continue;
    }
    const std::size_t eq = a.find('=');
    const std::string flag = a.substr(0, eq);
    CLI::Option* o = in->get_option_no_throw(flag);
    if (o == nullptr || !takes_value(o)) continue;  // CLI11 reports it, or it is a flag
    if (eq == std::string::npos && i + 1 == args.size()) continue;  // CLI11: needs a value
    const std::string v = eq == std::string::npos ? args[++i] : a.substr(eq + 1);
    if (is_help(v)) {
      *help = in;
      return "";
    }
    if (v.empty())
      return eq == std::string::npos ? flag + ": the value is empty" : flag + " needs a value";
    if (v.rfind("--", 0) != 0) continue;
    const std::string opt = v.substr(0, v.find('='));
    const bool path = has_validator(o, kInputTag) || has_validator(o, kOutputTag) ||
                      has_validator(o, kOutputDirTag);
    return flag + " needs a value ('" + v + "' " +
           (in->get_option_no_throw(opt) != nullptr ? "is" : "looks like") + " an option" +
           (path ? "; a path that starts with a dash is written ./" + v : "") + ")";
  }
  return "";
}

// The apps the line ran: the tool, its command, ...
std::vector<CLI::App*> apps_run(CLI::App& app) {
  std::vector<CLI::App*> v{&app};
  while (!v.back()->get_subcommands().empty()) v.push_back(v.back()->get_subcommands().front());
  return v;
}

// Where a path leads: absolute, with `.`, `..` and the symbolic links of its existing part
// resolved (std::filesystem::weakly_canonical).
std::filesystem::path resolved(const std::string& p) {
  std::error_code ec;
  const std::filesystem::path abs = std::filesystem::absolute(p, ec);
  const std::filesystem::path r = std::filesystem::weakly_canonical(abs, ec);
  return ec ? abs.lexically_normal() : r;
}

bool same_file(const std::string& a, const std::string& b) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path ra = resolved(a), rb = resolved(b);
  if (fs::is_character_file(ra, ec)) return false;  // /dev/null, /dev/full, a terminal
  if (ra == rb) return true;
  return fs::exists(ra, ec) && fs::exists(rb, ec) && fs::equivalent(ra, rb, ec);  // hard links
}

// Every output against every input and every earlier output, among the options given on the
// line; the first clash, or "".
std::string clashing_paths(CLI::App& app) {
  struct Given {
    std::string flag, path;
  };
  std::vector<Given> inputs, outputs;
  for (CLI::App* a : apps_run(app))
    for (CLI::Option* o : a->get_options([](CLI::Option* x) { return x->count() > 0; })) {
      const bool in = has_validator(o, kInputTag);
      const bool out = has_validator(o, kOutputTag) || has_validator(o, kOutputDirTag);
      for (const std::string& r : o->results()) {
        if (in) inputs.push_back({o->get_name(), r});
        if (out) outputs.push_back({o->get_name(), r});
      }
    }
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const Given& o = outputs[i];
    for (const Given& in : inputs)
      if (same_file(o.path, in.path))
        return o.flag + ": " + o.path + " is the file of " + in.flag + " " + in.path +
               " (an output must not overwrite an input)";
    for (std::size_t j = 0; j < i; ++j)
      if (same_file(o.path, outputs[j].path))
        return o.flag + ": " + o.path + " is the file of " + outputs[j].flag + " " +
               outputs[j].path + " (each output needs a path of its own)";
  }
  return "";
}

}  // namespace

std::string help(const CLI::App& app, const std::string& name) {
  std::ostringstream out;
  const std::vector<const CLI::App*> cmds = commands(app);
  if (cmds.empty())
    out << "usage: " << name << " [options]\n";
  else
    out << "usage: " << name << " COMMAND [options]     (" << name
        << " COMMAND --help: that command's options)\n";
  if (!app.get_description().empty()) out << app.get_description() << "\n";
  if (!cmds.empty()) {
    out << "commands:\n";  // each with the first line of its description
    for (const CLI::App* c : cmds) {
      const std::string d = c->get_description().substr(0, c->get_description().find('\n'));
      out << "  " << c->get_name()
          << std::string(c->get_name().size() < 12 ? 12 - c->get_name().size() : 1, ' ') << d
          << "\n";
    }
  }
  std::vector<const CLI::Option*> opts = app.get_options();
  if (!opts.empty()) {
    out << "options:\n";
    // --help first, then the options as they were declared.
    const CLI::Option* h = app.get_option_no_throw("--help");
    if (h) option_line(out, h->get_name(false, true), h->get_description());
    for (const CLI::Option* o : opts) {
      if (o == h) continue;
      std::string desc = o->get_description();
      if (takes_value(o) && !o->get_default_str().empty()) {
        const std::string d = "(default " + o->get_default_str() + ")";
        const std::size_t last = desc.size() - (desc.rfind('\n') + 1);  // npos + 1 is 0
        desc += kColumn + last + 1 + d.size() > kWidth ? "\n" + d : " " + d;
      }
      option_line(out, o->get_name(false, true) + (takes_value(o) ? " " + placeholder(o) : ""),
                  desc);
    }
  }
  if (!app.get_footer().empty()) out << app.get_footer() << "\n";
  for (const CLI::App* c : cmds) out << "\n" << help(*c, name + " " + c->get_name());
  return out.str();
}

int parse(CLI::App& app, const std::vector<std::string>& args) {
  prepare(app);
  const std::string tool = app.get_name();
  auto fail = [&](const std::string& msg) {
    std::cerr << tool << ": error: " << msg << "\n";
    return 2;
  };
  // A tool with commands and nothing on the line: its help, as the error it is.
  if (args.empty() && !commands(app).empty()) {
    std::cerr << help(app, tool);
    return 2;
  }
  CLI::App* help_of = nullptr;
  std::string help_name;
  const std::string bad_value = check_values(app, args, &help_of, &help_name);
  if (help_of != nullptr) {
    std::cout << help(*help_of, help_name);
    return 0;
  }
  if (!bad_value.empty()) return fail(bad_value);
  try {
    std::vector<std::string> rev(args.rbegin(), args.rend());  // CLI11 takes the line reversed
    app.parse(rev);
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();  // the help of the command on the line, if any
    return 0;
  } catch (const CLI::ArgumentMismatch& e) {
    // CLI11's words for these two are "quiet was given a disallowed flag override" and
    // "--m: 1 required M missing".
    for (const std::string& arg : args) {
      const std::size_t eq = arg.find('=');
      if (eq == std::string::npos) continue;
      if (names_option(app, arg.substr(0, eq), false))
        return fail(arg.substr(0, eq) + " takes no value (" + arg + ")");
      if (eq + 1 == arg.size() && names_option(app, arg.substr(0, eq), true))
        return fail(arg.substr(0, eq) + " needs a value");
    }
    if (!args.empty() && names_option(app, args.back(), true))
      return fail(args.back() + " needs a value");
    return fail(e.what());
  } catch (const CLI::ParseError& e) {
    return fail(e.what());
  }
  const std::vector<std::string> extra = app.remaining(true);
  if (!extra.empty()) {
    const std::string& x = extra.front();
    const std::string see = " (" + called(app) + " --help: the options)";
    if (!x.empty() && x[0] == '-') return fail("unknown option '" + x + "'" + see);
    if (!commands(app).empty() && app.get_subcommands().empty())
      return fail("unknown command '" + x + "' (" + tool + " --help: the commands)");
    return fail("unexpected argument '" + x + "'" + see);
  }
  const std::string twice = given_twice(app);
  if (!twice.empty()) return fail(twice);
  const std::string clash = clashing_paths(app);
  if (!clash.empty()) return fail(clash);
  return -1;
}

CLI::Option* repeatable(CLI::Option* opt) {
  return opt->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)->allow_extra_args(false);
}

CLI::Validator uint_in(uint64_t lo, uint64_t hi) {
  return CLI::Validator(
      [lo, hi](std::string& v) {
        uint64_t x = 0;
        if (to_uint(v, &x) && x >= lo && x <= hi) return std::string();
        return shown(v) + " is not an integer in [" + std::to_string(lo) + ", " +
               std::to_string(hi) + "]";
      },
      "");
}

CLI::Validator real_in(double lo, double hi, bool open_lo) {
  return CLI::Validator(
      [lo, hi, open_lo](std::string& v) {
        const double x = decimal_real(v) ? std::strtod(v.c_str(), nullptr) : 0.0;
        const bool ok =
            decimal_real(v) && std::isfinite(x) && (open_lo ? x > lo : x >= lo) && x <= hi;
        if (ok) return std::string();
        return shown(v) + " is not a number in " + (open_lo ? "(" : "[") + number_text(lo) + ", " +
               number_text(hi) + "]";
      },
      "");
}

CLI::Validator list_of() { return list_of(CLI::Validator()); }

CLI::Validator list_of(const CLI::Validator& item) {
  return CLI::Validator(
      [item](std::string& v) {
        if (v.empty() || v.front() == ',' || v.back() == ',' || v.find(",,") != std::string::npos)
          return shown(v) + " is not a comma-separated list (an item is empty)";
        for (std::string it : split_list(v)) {
          const std::string e = item(it);
          if (!e.empty()) return e;
        }
        return std::string();
      },
      "");
}

std::vector<std::string> split_list(const std::string& v) {
  std::vector<std::string> out;
  std::stringstream ss(v);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(item);
  return out;
}

CLI::Validator span() {
  return CLI::Validator(
      [](std::string& v) {
        const std::size_t colon = v.find(':');
        uint64_t from = 0, to = 0;
        if (colon != std::string::npos && to_uint(v.substr(0, colon), &from) &&
            to_uint(v.substr(colon + 1), &to) && from < to)
          return std::string();
        return shown(v) + " is not FROM:TO (integers, FROM < TO)";
      },
      "");
}

std::pair<uint64_t, uint64_t> split_span(const std::string& v) {
  const std::size_t colon = v.find(':');
  return {std::strtoull(v.substr(0, colon).c_str(), nullptr, 10),
          std::strtoull(v.substr(colon + 1).c_str(), nullptr, 10)};
}

CLI::Validator output_path() {
  return CLI::Validator(
      [](std::string& path) -> std::string {
        namespace fs = std::filesystem;
        std::error_code ec;
        const fs::path p(path);
        const fs::path dir = p.parent_path().empty() ? fs::path(".") : p.parent_path();
        if (!fs::is_directory(dir, ec))
          return shown(path) + ": directory '" + dir.string() + "' does not exist";
        if (fs::is_directory(p, ec)) return path + ": is a directory";
        // Rank 0 alone writes files (several MPI ranks): the others would race it on the test
        // file.
        if (files_muted()) return "";
        // Opened for writing now (not truncated; a file made for the check is removed again),
        // which also catches what permission bits do not say (a read-only file system, root's
        // rights).
        const bool existed = fs::exists(p, ec);
        if (existed && !fs::is_regular_file(p, ec) && !fs::is_character_file(p, ec)) return "";
        const int fd = existed ? ::open(path.c_str(), O_WRONLY | O_NONBLOCK)
                               : ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
        if (fd < 0) return path + ": cannot be written (" + std::strerror(errno) + ")";
        ::close(fd);
        if (!existed) ::unlink(path.c_str());
        return "";
      },
      "", kOutputTag);
}

CLI::Validator output_dir() {
  return CLI::Validator(
      [](std::string& v) -> std::string {
        namespace fs = std::filesystem;
        std::error_code ec;
        const fs::path d(v);
        if (fs::exists(d, ec) && !fs::is_directory(d, ec))
          return v + ": exists and is not a directory";
        const fs::path parent = d.parent_path().empty() ? fs::path(".") : d.parent_path();
        if (!fs::is_directory(d, ec) && !fs::is_directory(parent, ec))
          return v + ": directory '" + parent.string() + "' does not exist";
        if (files_muted()) return "";  // rank 0 alone writes (several MPI ranks)
        // Written now, before a long run: a file made in it and removed, or the directory made
        // and removed (what permission bits do not say: /proc, a read-only file system).
        if (fs::is_directory(d, ec)) {
          std::string probe = (d / ".tpusim_save_XXXXXX").string();
          const int fd = ::mkstemp(probe.data());
          if (fd < 0) return v + ": cannot write into the directory (" + std::strerror(errno) + ")";
          ::close(fd);
          ::unlink(probe.c_str());
          return "";
        }
        if (::mkdir(v.c_str(), 0755) != 0)
          return v + ": cannot make the directory (" + std::strerror(errno) + ")";
        ::rmdir(v.c_str());
        return "";
      },
      "", kOutputDirTag);
}

CLI::Validator input_path() {
  return CLI::Validator([](std::string&) { return std::string(); }, "", kInputTag);
}

}  // namespace tpu::cli
