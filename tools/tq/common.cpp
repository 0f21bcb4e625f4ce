#include "common.hpp"

#include <CLI/CLI.hpp>
#include <charconv>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <limits>
#include <system_error>
#include <type_traits>

namespace tq {

namespace io = turboquant::io;

void fail(const std::string& where, const std::string& what) {
  throw ToolError(kExitBadInput, where.empty() ? what : where + ": " + what);
}

CLI::Validator non_empty_path() {
  return CLI::Validator([](std::string& v) { return v.empty() ? std::string("an empty path") : std::string(); },
                        "PATH");
}

void add_case_argument(CLI::App* app, std::string* dir, const std::string& files) {
  app->add_option("CASE", *dir, "Case directory (" + files + ")")->required()->check(non_empty_path());
}

namespace {

template <class T>
CLI::Validator decimal_value(const char* description) {
  return CLI::Validator(
      [](std::string& v) -> std::string {
        std::string digits = v;
        if (digits.size() > 1 && digits[0] == '+' && digits[1] >= '0' && digits[1] <= '9') digits.erase(0, 1);
        T x{};
        const char* end = digits.data() + digits.size();
        const auto [p, ec] = std::from_chars(digits.data(), end, x);
        if (ec == std::errc() && p == end) {
          v = std::to_string(x);
          return {};
        }
        if (ec == std::errc::result_out_of_range && p == end) {
          return v + " is outside [" + std::to_string(std::numeric_limits<T>::min()) + ", " +
                 std::to_string(std::numeric_limits<T>::max()) + "]";
        }
        if (!std::is_signed_v<T> && !digits.empty() && digits[0] == '-') return v + " is not a non-negative integer";
        return v + " is not a decimal integer";
      },
      description);
}

}  // namespace

CLI::Validator int32_value() { return decimal_value<std::int32_t>("INT"); }
CLI::Validator int64_value() { return decimal_value<std::int64_t>("INT64"); }
CLI::Validator uint64_value() { return decimal_value<std::uint64_t>("UINT64"); }

void fail_unavailable(const std::string& what) { throw ToolError(kExitUnavailable, what); }

void ensure(const Status& status, const std::string& where) {
  if (status.ok()) return;
  const int code = status.code() == StatusCode::kBackendUnavailable ? kExitUnavailable : kExitBadInput;
  throw ToolError(code, where.empty() ? status.message() : where + ": " + status.message());
}

std::string fmt(const char* format, ...) {
  char buf[512];
  va_list args;
  va_start(args, format);
  const int n = std::vsnprintf(buf, sizeof buf, format, args);
  va_end(args);
  if (n < 0) return "";
  return std::string(buf, std::min<std::size_t>(static_cast<std::size_t>(n), sizeof buf - 1));
}

std::string float_hex(float f) {
  std::uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return fmt("%08x", bits);
}

json json_number(double x) { return std::isfinite(x) ? json(x) : json(nullptr); }

void print_json(const json& j) { std::cout << j.dump(2) << "\n"; }

std::string preset_list() {
  std::string s;
  for (turboquant::Preset p : turboquant::kAllPresets) {
    const std::string full = turboquant::preset_name(p);
    s += (s.empty() ? "" : ", ") + full.substr(std::strlen("turboquant_"));
  }
  return s;
}

turboquant::Preset parse_preset(const std::string& arg, const std::string& value) {
  const auto p = turboquant::preset_from_name(value);
  if (!p)
    fail(arg, "unknown preset \"" + value + "\" (expected one of " + preset_list() + ", with or without turboquant_)");
  return *p;
}

turboquant::LayoutKind parse_layout(const std::string& arg, const std::string& value) {
  const auto l = turboquant::layout_from_name(value);
  if (!l) fail(arg, "unknown layout \"" + value + "\" (expected soa or aos)");
  return *l;
}

turboquant::Fp8Format parse_fp8_format(const std::string& arg, const std::string& value) {
  const auto f = turboquant::fp8_format_from_name(value);
  if (!f) fail(arg, "unknown FP8 format \"" + value + "\" (expected e4m3 or e4b15)");
  return *f;
}

turboquant::Fp8Format fp8_format_for(turboquant::Preset preset, const std::string& arg, const std::string& value) {
  const turboquant::Fp8Format f = parse_fp8_format(arg, value);
  const bool fp8_keys = turboquant::preset_format(preset, 128).fp8_keys();
  if (!fp8_keys && f != turboquant::Fp8Format::kE4m3) {
    fail(arg, value + " applies to FP8 keys (turboquant_k8v4) only, not " + turboquant::preset_name(preset));
  }
  return fp8_keys ? f : turboquant::Fp8Format::kE4m3;
}

void add_format_names(json& j, const turboquant::Format& f) {
  j["layout"] = turboquant::layout_name(f.layout);
  if (f.fp8_keys()) j["fp8_format"] = turboquant::fp8_format_name(f.fp8_format);
}

io::CaseDir load_case(const std::string& dir, const io::CaseLoadOptions& options) {
  io::CaseDir c;
  ensure(io::load_case(dir, options, &c));
  return c;
}

std::unique_ptr<turboquant::Codebook> case_codebook(const io::CaseDir& c) {
  if (c.format.fp8_keys()) return nullptr;
  auto cb = std::make_unique<turboquant::Codebook>();
  if (c.centroids.present) {
    ensure(turboquant::make_codebook(c.format.key_bits, c.centroids.values, cb.get()), c.centroids.path);
  } else {
    *cb = turboquant::vllm_codebook(c.head_dim(), c.format.key_bits);
  }
  return cb;
}

std::string case_file_for_message(const io::CaseDir& c, const std::string& message) {
  static const std::pair<const char*, const char*> kFiles[] = {
      {"query", "query.npy"},        {"block_table", "block_table.npy"},
      {"seq_lens", "seq_lens.npy"},  {"slot_mapping", "slot_mapping.npy"},
      {"keys", "keys.npy"},          {"values", "values.npy"},
      {"codebook", "centroids.npy"}, {"cache", "kv_cache.npy"}};
  for (const auto& [arg, file] : kFiles) {
    const std::size_t n = std::strlen(arg);
    if (message.compare(0, n, arg) == 0 &&
        (message.size() == n || message[n] == '[' || message[n] == ' ' || message[n] == '.')) {
      return c.file(file);
    }
  }
  return c.path;
}

}  // namespace tq
