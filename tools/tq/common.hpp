// Shared pieces of the tq subcommands: exit codes, the one-line error that
// every bad input becomes, number formatting, and the case-directory helpers
// (codebook, decode arguments) that several commands need.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "turboquant/io/case_dir.hpp"
#include "turboquant/turboquant.hpp"

namespace CLI {
class App;
class Validator;
}  // namespace CLI

namespace tq {

using nlohmann::json;
using turboquant::Status;
using turboquant::StatusCode;

// Exit codes (issue 3): the same for every command.
enum ExitCode : int {
  kExitOk = 0,
  kExitFailed = 1,       // a validation did not pass
  kExitBadInput = 2,     // bad input or usage
  kExitUnavailable = 3,  // a requested backend (or ISA) is not available here
};

// Thrown for every bad input; main prints "tq <cmd>: <what>" on one line and
// exits with `exit_code`. `what` starts with the file, argument or value at fault.
class ToolError : public std::runtime_error {
 public:
  ToolError(int exit_code, const std::string& what) : std::runtime_error(what), exit_code_(exit_code) {}
  int exit_code() const { return exit_code_; }

 private:
  int exit_code_;
};

[[noreturn]] void fail(const std::string& where, const std::string& what);
[[noreturn]] void fail_unavailable(const std::string& what);
// Throws unless ok: kBackendUnavailable -> exit 3, anything else -> exit 2.
// `where` (a file or argument) prefixes the library's message when not empty.
void ensure(const Status& status, const std::string& where = "");

// A subcommand: its CLI11 app (options bound) and what runs once parsing succeeded.
struct Command {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

// For path options and CASE arguments: an empty string ("--out ''", an unset
// shell variable) is an error naming the option, not "no path given".
CLI::Validator non_empty_path();
// The CASE argument of the commands that read a case directory (required,
// non-empty); `files` names what the command reads from it.
void add_case_argument(CLI::App* app, std::string* dir, const std::string& files);
// For integer options (->transform): the value must be a decimal integer that
// fits the option's type, else "--block: 99999999999999999999 is outside
// [-9223372036854775808, 9223372036854775807]" or "--seed: -1 is not a
// non-negative integer". (CLI11 alone clamps an out-of-range 64-bit value to
// the limit, wraps a negative unsigned one, and reads 010 as octal 8.) The
// value is rewritten in canonical decimal ("+010" -> "10").
CLI::Validator int32_value();
CLI::Validator int64_value();
CLI::Validator uint64_value();

Command add_info(CLI::App& parent);
Command add_codebook(CLI::App& parent);
Command add_encode(CLI::App& parent);
Command add_decode(CLI::App& parent);
Command add_validate(CLI::App& parent);
Command add_inspect(CLI::App& parent);
Command add_bench(CLI::App& parent);
Command add_isas(CLI::App& parent);
Command add_backends(CLI::App& parent);

// ---- formatting --------------------------------------------------------------

std::string fmt(const char* format, ...) __attribute__((format(printf, 1, 2)));
// IEEE-754 binary32 bit pattern, 8 lowercase hex digits.
std::string float_hex(float f);
// A JSON number, or null when not finite (JSON has no NaN/Inf).
json json_number(double x);
// Prints one JSON value (an object; an array for tq backends) on stdout.
void print_json(const json& j);
// Preset names "turboquant_k8v4, ..." for messages.
std::string preset_list();
// Parses a preset (full or short name), naming the argument on failure.
turboquant::Preset parse_preset(const std::string& arg, const std::string& value);
// Parses a layout name (soa, aos) or an FP8 flavour (e4m3, e4b15), naming the
// argument and the value on failure.
turboquant::LayoutKind parse_layout(const std::string& arg, const std::string& value);
turboquant::Fp8Format parse_fp8_format(const std::string& arg, const std::string& value);
// The FP8 flavour a command was given for `preset`: e4b15 only means something
// for FP8 keys (turboquant_k8v4), so asking for it with another preset is an
// error naming both; e4m3 (the default) is accepted and ignored there.
turboquant::Fp8Format fp8_format_for(turboquant::Preset preset, const std::string& arg, const std::string& value);

// j["layout"] and, for FP8 keys, j["fp8_format"]: the names meta.json uses.
void add_format_names(json& j, const turboquant::Format& f);

// ---- case directories ----------------------------------------------------------

// load_case that throws (exit 2) with the library's message.
turboquant::io::CaseDir load_case(const std::string& dir, const turboquant::io::CaseLoadOptions& options);

// The key codebook a case decodes with: centroids.npy when present (a cache from
// another producer decodes with its own table), else vLLM's. Null for FP8 keys.
std::unique_ptr<turboquant::Codebook> case_codebook(const turboquant::io::CaseDir& c);

// The case's cache view and decode arguments live in turboquant::io.
using turboquant::io::case_cache;
using turboquant::io::case_decode_args;

// A decode-argument error names the case file it came from: "query[...]..."
// -> "<case>/query.npy: query[...]...".
std::string case_file_for_message(const turboquant::io::CaseDir& c, const std::string& message);

// "1, 37, 300" (at most `limit` values, then "...").

}  // namespace tq
