// tq: inspect, encode, decode and validate TurboQuant caches against the
// golden model (issue 3). Exit codes: 0 ok, 1 a validation failed, 2 bad input
// or usage (one line on stderr naming the file, argument and value), 3 a
// requested backend is not available here.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <new>
#include <string>

#include "common.hpp"

namespace {

std::string one_line(std::string s) {
  for (char& c : s) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
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
      "tq: inspect, encode, decode and validate TurboQuant paged KV caches (vLLM SoA layout) against the golden "
      "model.\nExit codes: 0 ok, 1 validation failed, 2 bad input or usage, 3 backend not available."};
  app.name("tq");
  app.require_subcommand(1);
  app.fallthrough(false);
  const tq::Command commands[] = {tq::add_info(app),   tq::add_codebook(app), tq::add_encode(app),
                                  tq::add_decode(app), tq::add_validate(app), tq::add_inspect(app),
                                  tq::add_bench(app),  tq::add_isas(app)};
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
