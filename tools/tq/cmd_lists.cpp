// The listing commands: what this build and this machine can run.
//   tq isas      the SIMD instruction sets this CPU can run, one per line,
//                "scalar" first (the names --isa accepts)
//   tq backends  every backend of this build (the library's registry), whether
//                it runs here and, when not, why; --json: an array of objects
#include <CLI/CLI.hpp>
#include <cstdio>
#include <functional>
#include <memory>

#include "backend.hpp"
#include "common.hpp"

namespace tq {
namespace {

// A command whose only option is --json: prints `list()` as JSON, or as text
// through `print_text`.
Command listing(CLI::App& parent, const char* name, const char* help, const char* json_help,
                std::function<json()> list, std::function<void(const json&)> print_text) {
  auto as_json = std::make_shared<bool>(false);
  CLI::App* app = parent.add_subcommand(name, help);
  app->add_flag("--json", *as_json, json_help);
  return Command{app, [as_json, list, print_text] {
                   const json j = list();
                   if (*as_json) {
                     print_json(j);
                   } else {
                     print_text(j);
                   }
                   return static_cast<int>(kExitOk);
                 }};
}

}  // namespace

Command add_isas(CLI::App& parent) {
  return listing(
      parent, "isas", "SIMD instruction sets this CPU can run (scalar first)", "Print one JSON object",
      [] { return json{{"isas", available_isas()}, {"default_backend", default_backend_name()}}; },
      [](const json& j) {
        for (const json& isa : j["isas"]) std::printf("%s\n", isa.get<std::string>().c_str());
      });
}

Command add_backends(CLI::App& parent) {
  return listing(
      parent, "backends", "Every backend of this build: available here, or why not", "Print one JSON array",
      [] {
        json all = json::array();
        for (const turboquant::Backend* b : turboquant::backends()) {
          all.push_back(json{{"name", b->name()},
                             {"available", b->available()},
                             {"reason", b->unavailable_reason()},
                             {"description", b->description()},
                             {"exact_decode", b->exact_decode()},
                             {"threaded", b->threaded()}});
        }
        return all;
      },
      [](const json& all) {
        for (const json& b : all) {
          const bool ok = b["available"].get<bool>();
          const std::string text = (ok ? b["description"] : b["reason"]).get<std::string>();
          std::printf("%-12s %-3s  %s\n", b["name"].get<std::string>().c_str(), ok ? "yes" : "no", text.c_str());
        }
      });
}

}  // namespace tq
