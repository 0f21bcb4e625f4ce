// tq: inspect, encode, decode and validate TurboQuant caches against the
// golden model (issue 3). Exit codes: 0 ok, 1 a validation failed, 2 bad input
// or usage (one line on stderr naming the file, argument and value), 3 a
// requested backend is not available here.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <new>
#include <string>
#include <vector>

#include "common.hpp"

namespace {

// One printable line: newlines become spaces; other control bytes (C0, DEL,
// and C1 as UTF-8: U+0080..U+009F, which some terminals obey too) and bytes
// that are not valid UTF-8 (a garbage file quoted in a parser's message)
// become \xNN, so that no input can send escape sequences to the terminal.
std::string one_line(const std::string& s) {
  std::string out;
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '\n' || c == '\r' || c == '\t') {
      out += ' ';
      ++i;
      continue;
    }
    // The length of a valid UTF-8 sequence starting here (1 for printable ASCII), else 0.
    std::size_t n = 0;
    if (c >= 0x20 && c < 0x7f) {
      n = 1;
    } else if (c >= 0xc2 && c <= 0xf4) {
      const std::size_t len = c < 0xe0 ? 2 : (c < 0xf0 ? 3 : 4);
      n = len;
      for (std::size_t k = 1; k < len; ++k) {
        if (i + k >= s.size() || (static_cast<unsigned char>(s[i + k]) & 0xc0) != 0x80) n = 0;
      }
      if (n != 0 && c == 0xc2 && static_cast<unsigned char>(s[i + 1]) < 0xa0) n = 0;  // C1 control
    }
    if (n == 0) {
      static const char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
      ++i;
    } else {
      out.append(s, i, n);
      i += n;
    }
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// The first argument must be a command (or --help): say which word is wrong
// and what was probably meant, instead of CLI11's "A subcommand is required".
// Empty when the command line starts well.
std::string check_command_word(const CLI::App& app, int argc, char** argv) {
  std::string names;
  for (const CLI::App* sub : app.get_subcommands({})) {
    if (!sub->get_name().empty()) names += (names.empty() ? "" : ", ") + sub->get_name();
  }
  if (argc < 2) return "no command given; commands: " + names + " (run tq --help)";
  const std::string word = argv[1];
  if (word == "-h" || word == "--help" || word == "--help-all") return "";
  if (word.rfind('-', 0) == 0 && word.size() > 1) {
    return "unknown option '" + word + "': a command comes first (" + names + "; run tq --help)";
  }
  std::string best;
  std::size_t best_distance = 3;  // suggest within 2 edits, or when the word is a prefix
  for (const CLI::App* sub : app.get_subcommands({})) {
    const std::string& name = sub->get_name();
    if (name.empty()) continue;
    if (name == word) return "";
    const std::size_t d = !word.empty() && name.rfind(word, 0) == 0 ? 1 : edit_distance(word, name);
    if (d < best_distance) best_distance = d, best = name;
  }
  return "unknown command '" + word + "'" + (best.empty() ? "" : "; did you mean '" + best + "'?") +
         " (commands: " + names + "; run tq --help)";
}

// "tq validate" once a subcommand was seen, else "tq".
std::string prefix(const CLI::App& app) {
  for (const CLI::App* sub : app.get_subcommands()) return "tq " + sub->get_name();
  return "tq";
}

int report(const CLI::App& app, const std::string& message, int code) {
  std::fflush(stdout);
  std::cerr << prefix(app) << ": " << one_line(message) << std::endl;
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "tq: inspect, encode, decode and validate TurboQuant paged KV caches (vLLM's SoA and AoS layouts; a case "
      "directory names its layout in meta.json) against the golden "
      "model.\nExit codes: 0 ok, 1 validation failed, 2 bad input or usage, 3 backend not available."};
  app.name("tq");
  app.require_subcommand(1);
  app.fallthrough(false);
  const tq::Command commands[] = {tq::add_info(app),   tq::add_codebook(app), tq::add_encode(app),
                                  tq::add_decode(app), tq::add_validate(app), tq::add_inspect(app),
                                  tq::add_bench(app),  tq::add_isas(app),     tq::add_backends(app)};
  if (const std::string problem = check_command_word(app, argc, argv); !problem.empty()) {
    return report(app, problem, tq::kExitBadInput);
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return report(app, std::string(e.what()) + " (run tq --help)", tq::kExitBadInput);
  }
  try {
    for (const tq::Command& c : commands) {
      if (c.app->parsed()) return c.run();
    }
    return report(app, "no command given (run tq --help)", tq::kExitBadInput);
  } catch (const tq::ToolError& e) {
    return report(app, e.what(), e.exit_code());
  } catch (const turboquant::Error& e) {
    return report(app, e.what(),
                  e.code() == turboquant::StatusCode::kBackendUnavailable ? tq::kExitUnavailable : tq::kExitBadInput);
  } catch (const CLI::Error& e) {
    return report(app, e.what(), tq::kExitBadInput);
  } catch (const std::bad_alloc&) {
    return report(app, "out of memory (the input's sizes are too large for this machine)", tq::kExitBadInput);
  } catch (const std::exception& e) {
    return report(app, std::string("unexpected error: ") + e.what(), tq::kExitBadInput);
  }
}
