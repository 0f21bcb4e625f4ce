// tq isas: the SIMD instruction sets this CPU can run, one per line, "scalar"
// first (the names --isa accepts).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>

#include "backend.hpp"
#include "common.hpp"

namespace tq {

Command add_isas(CLI::App& parent) {
  auto as_json = std::make_shared<bool>(false);
  CLI::App* app = parent.add_subcommand("isas", "SIMD instruction sets this CPU can run (scalar first)");
  app->add_flag("--json", *as_json, "Print one JSON object");
  return Command{app, [as_json] {
                   const std::vector<std::string> isas = available_isas();
                   if (*as_json) {
                     print_json(json{{"isas", isas}, {"default_backend", default_backend_name()}});
                   } else {
                     for (const std::string& isa : isas) std::printf("%s\n", isa.c_str());
                   }
                   return static_cast<int>(kExitOk);
                 }};
}

}  // namespace tq
