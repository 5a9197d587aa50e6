#include "cli.h"

#include <fcntl.h>
#include <unistd.h>

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

// "--json needs a value" when an option that takes a value is followed by another option where
// its value should be (`--json --steps 1`): CLI11 takes "--steps" as the value, and the error it
// then reports (a stray "1", "--a requires --w") names the wrong thing.
std::string value_is_an_option(const CLI::App& app, const std::vector<std::string>& args) {
  for (std::size_t i = 0; i + 1 < args.size(); ++i)
    if (args[i].find('=') == std::string::npos && names_option(app, args[i], true) &&
        args[i + 1].rfind("--", 0) == 0 && args[i + 1].size() > 2)
      return args[i] + " needs a value";
  return "";
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
    const std::string v = value_is_an_option(app, args);
    return fail(v.empty() ? e.what() : v);
  }
  const std::string v = value_is_an_option(app, args);
  if (!v.empty()) return fail(v);
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
        char* end = nullptr;
        const double x = v.empty() ? 0.0 : std::strtod(v.c_str(), &end);
        const bool ok = !v.empty() && end == v.c_str() + v.size() && std::isfinite(x) &&
                        (open_lo ? x > lo : x >= lo) && x <= hi;
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
      "");
}

}  // namespace tpu::cli
