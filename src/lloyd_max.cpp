// vLLM's Lloyd-Max codebook solver (facts §f), reproduced bit for bit.
//
// The fp32 tables must equal what vLLM's Python solver produces, so every
// double-precision step below follows that solver's operation order exactly:
// the pdf is (1/sqrt(2*pi*s2)) * exp(-x*x/(2*s2)) through libm's exp (the same
// function Python's math.exp calls), integrals are a sequential trapezoid sum
// of 200 intervals with nodes a + i*h, and on convergence the solver returns
// the iterate from BEFORE the last update (it breaks before assigning).
// Build flags include -ffp-contract=off so no FMA changes a rounding.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <mutex>
#include <numbers>
#include <string>
#include <utility>

#include "turboquant/codebook.hpp"

namespace turboquant {
namespace {

constexpr int kMaxIterations = 200;
constexpr double kTolerance = 1e-10;
constexpr int kTrapezoidIntervals = 200;
constexpr double kMinCellMass = 1e-15;

// Density of N(0, s2). Kept as one expression in the reference's order:
// normaliser first, then exp of (-x)*x / (2*s2).
double gaussian_pdf(double x, double s2) {
  return (1.0 / std::sqrt(2.0 * std::numbers::pi * s2)) * std::exp(-x * x / (2.0 * s2));
}

// Trapezoid rule on [a, b]: endpoints halved, interior nodes accumulated left
// to right, the sum scaled by h only at the end (the reference's rounding).
template <typename F>
double trapezoid(F f, double a, double b) {
  const double h = (b - a) / kTrapezoidIntervals;
  double sum = 0.5 * (f(a) + f(b));
  for (int i = 1; i < kTrapezoidIntervals; ++i) sum += f(a + static_cast<double>(i) * h);
  return sum * h;
}

std::string format_float(float v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(v));
  return buf;
}

Status invalid(std::string message) { return Status(StatusCode::kInvalidArgument, std::move(message)); }

}  // namespace

std::vector<double> solve_lloyd_max(int head_dim, int bits) {
  if (head_dim < 1) check(invalid("head_dim = " + std::to_string(head_dim) + ": must be >= 1"));
  if (bits < 1 || bits > 4) check(invalid("bits = " + std::to_string(bits) + ": must be in 1..4"));

  const int n = 1 << bits;
  const double s2 = 1.0 / head_dim;
  const double sigma = std::sqrt(s2);
  const double lo = -3.5 * sigma;
  const double hi = 3.5 * sigma;
  const auto pdf = [s2](double x) { return gaussian_pdf(x, s2); };
  const auto x_pdf = [s2](double x) { return x * gaussian_pdf(x, s2); };

  // Initial points: uniform cell centres of [lo, hi], ((hi-lo)*(i+0.5))/n + lo.
  std::vector<double> c(n);
  for (int i = 0; i < n; ++i) c[i] = lo + (hi - lo) * (i + 0.5) / n;

  std::vector<double> edges(n + 1);
  std::vector<double> next(n);
  for (int iter = 0; iter < kMaxIterations; ++iter) {
    // Cells: neighbour midpoints inside, +-10.5 sigma (3 * +-3.5 sigma) outside.
    edges[0] = lo * 3;
    edges[n] = hi * 3;
    for (int i = 0; i + 1 < n; ++i) edges[i + 1] = (c[i] + c[i + 1]) / 2.0;

    double max_delta = 0.0;
    for (int i = 0; i < n; ++i) {
      const double num = trapezoid(x_pdf, edges[i], edges[i + 1]);
      const double den = trapezoid(pdf, edges[i], edges[i + 1]);
      next[i] = den > kMinCellMass ? num / den : c[i];
      max_delta = std::max(max_delta, std::abs(next[i] - c[i]));
    }
    // Converged: the reference stops here and keeps the previous iterate.
    if (max_delta < kTolerance) break;
    c.swap(next);
  }
  return c;
}

const Codebook& vllm_codebook(int head_dim, int bits) {
  // std::map nodes never move, so returned references stay valid for the life
  // of the process; the solve runs under the lock (a few ms, once per key).
  static std::mutex mutex;
  static std::map<std::pair<int, int>, Codebook> cache;

  if (head_dim < 1) check(invalid("head_dim = " + std::to_string(head_dim) + ": must be >= 1"));
  if (bits < 1 || bits > 4) check(invalid("bits = " + std::to_string(bits) + ": must be in 1..4"));

  std::lock_guard<std::mutex> lock(mutex);
  const auto key = std::make_pair(head_dim, bits);
  if (auto it = cache.find(key); it != cache.end()) return it->second;

  const std::vector<double> solved = solve_lloyd_max(head_dim, bits);
  // Round-to-nearest to fp32, as torch.tensor(..., dtype=float32) does.
  float centroids[core::kMaxCodebookSize] = {};
  for (std::size_t i = 0; i < solved.size(); ++i) centroids[i] = static_cast<float>(solved[i]);
  return cache.emplace(key, core::make_codebook(bits, centroids)).first->second;
}

Status make_codebook(int bits, const std::vector<float>& centroids, Codebook* out) {
  if (out == nullptr) return invalid("out = null: must point to a Codebook");
  if (bits < 1 || bits > 4) return invalid("bits = " + std::to_string(bits) + ": must be in 1..4");
  const std::size_t expected = std::size_t{1} << bits;
  if (centroids.size() != expected) {
    return invalid("centroids.size() = " + std::to_string(centroids.size()) + ": must be 2^bits = " +
                   std::to_string(expected));
  }
  for (std::size_t i = 0; i < centroids.size(); ++i) {
    if (!std::isfinite(centroids[i])) {
      return Status(StatusCode::kNonFinite,
                    "centroids[" + std::to_string(i) + "] = " + format_float(centroids[i]) + ": must be finite");
    }
    // Strictly increasing, so the fp32 midpoints are sorted and bucketize is a search.
    if (i > 0 && !(centroids[i] > centroids[i - 1])) {
      return invalid("centroids[" + std::to_string(i) + "] = " + format_float(centroids[i]) +
                     ": must be > centroids[" + std::to_string(i - 1) + "] = " + format_float(centroids[i - 1]));
    }
  }
  *out = core::make_codebook(bits, centroids.data());
  return Status();
}

}  // namespace turboquant
