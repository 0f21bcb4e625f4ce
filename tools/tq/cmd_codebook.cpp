// tq codebook: vLLM's Lloyd-Max codebook for N(0, 1/head_dim) (facts §f):
// fp32 centroids and the midpoints derived from them, as decimals and as
// IEEE-754 binary32 bit patterns.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>

#include "common.hpp"

namespace tq {
namespace {

struct CodebookOptions {
  int bits = 0;
  int head_dim = 0;
  bool json = false;
};

constexpr int kMaxCodebookHeadDim = 1 << 16;

int run_codebook(const CodebookOptions& o) {
  if (o.bits < 1 || o.bits > 4) fail("--bits", std::to_string(o.bits) + " must be in [1, 4]");
  if (o.head_dim < 1 || o.head_dim > kMaxCodebookHeadDim) {
    fail("--head-dim", std::to_string(o.head_dim) + " must be in [1, " + std::to_string(kMaxCodebookHeadDim) + "]");
  }
  const turboquant::Codebook& cb = turboquant::vllm_codebook(o.head_dim, o.bits);
  json centroids = json::array(), centroids_hex = json::array(), midpoints = json::array(),
       midpoints_hex = json::array();
  for (int i = 0; i < cb.size(); ++i) {
    centroids.push_back(static_cast<double>(cb.centroids[i]));
    centroids_hex.push_back(float_hex(cb.centroids[i]));
  }
  for (int i = 0; i + 1 < cb.size(); ++i) {
    midpoints.push_back(static_cast<double>(cb.midpoints[i]));
    midpoints_hex.push_back(float_hex(cb.midpoints[i]));
  }
  if (o.json) {
    print_json(json{{"bits", o.bits},
                    {"head_dim", o.head_dim},
                    {"centroids", centroids},
                    {"centroids_hex", centroids_hex},
                    {"midpoints", midpoints},
                    {"midpoints_hex", midpoints_hex}});
    return kExitOk;
  }
  std::printf(
      "vLLM Lloyd-Max codebook, %d bits, head_dim %d (N(0, 1/%d), fp32; midpoints (c[i] + c[i+1]) / 2 in fp32)\n",
      o.bits, o.head_dim, o.head_dim);
  std::printf("%5s  %16s  %8s    %16s  %8s\n", "index", "centroid", "hex", "midpoint", "hex");
  for (int i = 0; i < cb.size(); ++i) {
    std::printf("%5d  %16.9g  %8s", i, static_cast<double>(cb.centroids[i]), float_hex(cb.centroids[i]).c_str());
    if (i + 1 < cb.size()) {
      std::printf("    %16.9g  %8s", static_cast<double>(cb.midpoints[i]), float_hex(cb.midpoints[i]).c_str());
    }
    std::printf("\n");
  }
  return kExitOk;
}

}  // namespace

Command add_codebook(CLI::App& parent) {
  auto o = std::make_shared<CodebookOptions>();
  CLI::App* app = parent.add_subcommand("codebook", "vLLM's Lloyd-Max key codebook: centroids and midpoints");
  app->add_option("--bits", o->bits, "Bits per code, 1..4")->transform(int32_value())->required();
  app->add_option("--head-dim", o->head_dim, "Head dimension D (the codebook is for N(0, 1/D))")
      ->transform(int32_value())
      ->required();
  app->add_flag("--json", o->json, "Print one JSON object");
  return Command{app, [o] { return run_codebook(*o); }};
}

}  // namespace tq
