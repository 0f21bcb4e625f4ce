// tq backends: every backend of this build (the library's registry), whether it
// runs here and, when not, why. --json: an array of objects.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>

#include "backend.hpp"
#include "common.hpp"

namespace tq {

Command add_backends(CLI::App& parent) {
  auto as_json = std::make_shared<bool>(false);
  CLI::App* app = parent.add_subcommand("backends", "Every backend of this build: available here, or why not");
  app->add_flag("--json", *as_json, "Print one JSON array");
  return Command{app, [as_json] {
                   json all = json::array();
                   for (const turboquant::Backend* b : turboquant::backends()) {
                     all.push_back(json{{"name", b->name()},
                                        {"available", b->available()},
                                        {"reason", b->unavailable_reason()},
                                        {"description", b->description()},
                                        {"exact_decode", b->exact_decode()},
                                        {"threaded", b->threaded()}});
                   }
                   if (*as_json) {
                     print_json(all);
                     return static_cast<int>(kExitOk);
                   }
                   for (const json& b : all) {
                     const bool ok = b["available"].get<bool>();
                     const std::string text = (ok ? b["description"] : b["reason"]).get<std::string>();
                     std::printf("%-12s %-3s  %s\n", b["name"].get<std::string>().c_str(), ok ? "yes" : "no",
                                 text.c_str());
                   }
                   return static_cast<int>(kExitOk);
                 }};
}

}  // namespace tq
