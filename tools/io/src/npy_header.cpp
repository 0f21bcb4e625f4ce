// A small recursive-descent parser instead of a regex: it must reject
// anything that is not exactly a dict literal (a regex happily finds a
// "shape" inside garbage) and report where it stopped.
#include "npy_header.hpp"

#include <limits>
#include <optional>

namespace turboquant::io {
namespace {

constexpr std::size_t kMaxDims = 64;  // numpy's own limit (NPY_MAXDIMS)

// One-line rendering of the header for messages: escaped, cut at 100 chars.
std::string quote_header(std::string_view text) {
  std::string s = "\"";
  for (std::size_t i = 0; i < text.size() && i < 100; ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == '\n') {
      s += "\\n";
    } else if (c < 0x20 || c > 0x7e) {
      static const char* digits = "0123456789abcdef";
      s += "\\x";
      s += digits[c >> 4];
      s += digits[c & 15];
    } else {
      s += static_cast<char>(c);
    }
  }
  if (text.size() > 100) s += "...";
  return s + "\"";
}

class Parser {
 public:
  Parser(std::string_view text, const std::string& name) : t_(text), name_(name) {}

  Status parse(NpyHeader* out) {
    for (std::size_t i = 0; i < t_.size(); ++i) {
      const unsigned char c = static_cast<unsigned char>(t_[i]);
      if ((c < 0x20 && c != '\n' && c != '\r' && c != '\t') || c > 0x7e) {
        pos_ = i;
        return malformed("unexpected byte " + std::to_string(c));
      }
    }
    if (t_.empty() || t_.back() != '\n') {
      pos_ = t_.size();
      return malformed("header does not end with a newline");
    }
    std::optional<std::string> descr;
    std::optional<bool> fortran;
    std::optional<std::vector<std::int64_t>> shape;
    skip_ws();
    if (!eat('{')) return malformed("expected '{'");
    skip_ws();
    while (!eat('}')) {
      std::string key;
      if (!string_literal(&key)) return malformed("expected a quoted key or '}'");
      skip_ws();
      if (!eat(':')) return malformed("expected ':' after key '" + key + "'");
      skip_ws();
      if (key == "descr") {
        if (descr) return malformed("duplicate key 'descr'");
        if (peek() == '[' || peek() == '{') {
          return Status(StatusCode::kUnsupported,
                        name_ + ": structured dtypes are not supported (header " + quote_header(t_) + ")");
        }
        std::string d;
        if (!string_literal(&d)) return malformed("descr must be a quoted string");
        descr = d;
      } else if (key == "fortran_order") {
        if (fortran) return malformed("duplicate key 'fortran_order'");
        const std::string word = identifier();
        if (word != "True" && word != "False") return malformed("fortran_order must be True or False");
        fortran = word == "True";
      } else if (key == "shape") {
        if (shape) return malformed("duplicate key 'shape'");
        std::vector<std::int64_t> dims;
        if (Status s = tuple(&dims); !s.ok()) return s;
        shape = std::move(dims);
      } else {
        return malformed("unexpected key '" + key + "' (expected descr, fortran_order, shape)");
      }
      skip_ws();
      if (eat(',')) {
        skip_ws();
      } else if (peek() != '}') {
        return malformed("expected ',' or '}'");
      }
    }
    skip_ws();
    if (pos_ != t_.size()) return malformed("unexpected text after '}'");
    if (!descr) return malformed("missing key 'descr'");
    if (!fortran) return malformed("missing key 'fortran_order'");
    if (!shape) return malformed("missing key 'shape'");

    const std::optional<NpyDType> dtype = npy_dtype_from_descr(*descr);
    if (!dtype) {
      const bool big = !descr->empty() && (*descr)[0] == '>' && npy_dtype_from_descr("<" + descr->substr(1));
      return Status(StatusCode::kUnsupported, name_ + ": " + (big ? "big-endian dtype '" : "unsupported dtype '") +
                                                  *descr + "' (supported: <f4, <f2, <f8, <i4, <i8, |u1)");
    }
    if (*fortran) {
      return Status(StatusCode::kUnsupported, name_ + ": fortran_order True is not supported (C order only)");
    }
    out->dtype = *dtype;
    out->shape = std::move(*shape);
    return Status();
  }

 private:
  char peek() const { return pos_ < t_.size() ? t_[pos_] : '\0'; }
  bool eat(char c) {
    if (peek() != c) return false;
    ++pos_;
    return true;
  }
  void skip_ws() {
    while (peek() == ' ' || peek() == '\t' || peek() == '\n' || peek() == '\r') ++pos_;
  }
  static bool is_digit(char c) { return c >= '0' && c <= '9'; }

  Status malformed(const std::string& what) const {
    return Status(StatusCode::kInvalidArgument, name_ + ": malformed header: " + what + " at offset " +
                                                    std::to_string(pos_) + " of " + quote_header(t_));
  }

  // 'text' or "text"; numpy never writes escapes, so a backslash is an error.
  bool string_literal(std::string* out) {
    const char quote = peek();
    if (quote != '\'' && quote != '"') return false;
    const std::size_t start = pos_;
    ++pos_;
    while (pos_ < t_.size() && t_[pos_] != quote && t_[pos_] != '\\' && t_[pos_] != '\n') ++pos_;
    if (peek() != quote) {
      pos_ = start;
      return false;
    }
    *out = std::string(t_.substr(start + 1, pos_ - start - 1));
    ++pos_;
    return true;
  }

  std::string identifier() {
    const std::size_t start = pos_;
    while ((peek() >= 'a' && peek() <= 'z') || (peek() >= 'A' && peek() <= 'Z') || peek() == '_') ++pos_;
    return std::string(t_.substr(start, pos_ - start));
  }

  // A non-negative decimal integer as Python writes it (no leading zeros; an
  // 'L' suffix is accepted for files written by Python 2).
  Status dimension(std::int64_t* out) {
    const bool negative = eat('-');
    if (!is_digit(peek())) return malformed("expected a dimension");
    const std::size_t start = pos_;
    std::int64_t v = 0;
    bool overflow = false;
    while (is_digit(peek())) {
      const int d = peek() - '0';
      if (v > (std::numeric_limits<std::int64_t>::max() - d) / 10) overflow = true;
      if (!overflow) v = v * 10 + d;
      ++pos_;
    }
    const std::string digits(t_.substr(start, pos_ - start));
    if (digits.size() > 1 && digits[0] == '0') return malformed("dimension " + digits + " has a leading zero");
    eat('L');
    if (overflow) {
      return Status(StatusCode::kOutOfRange, name_ + ": shape dimension " + digits + " overflows int64");
    }
    if (negative) {
      return Status(StatusCode::kInvalidArgument, name_ + ": shape has a negative dimension -" + digits);
    }
    *out = v;
    return Status();
  }

  // (), (n,), (n, m) or (n, m,); a bare (n) is an int in Python, not a shape.
  Status tuple(std::vector<std::int64_t>* dims) {
    if (!eat('(')) return malformed("shape must be a tuple");
    skip_ws();
    bool trailing_comma = false;
    while (!eat(')')) {
      if (dims->size() == kMaxDims) return malformed("shape has more than 64 dimensions");
      std::int64_t d = 0;
      if (Status s = dimension(&d); !s.ok()) return s;
      dims->push_back(d);
      skip_ws();
      trailing_comma = eat(',');
      skip_ws();
      if (!trailing_comma && peek() != ')') return malformed("expected ',' or ')' in shape");
    }
    if (dims->size() == 1 && !trailing_comma) return malformed("shape (n) is not a tuple, a 1-d shape is (n,)");
    return Status();
  }

  std::string_view t_;
  const std::string& name_;
  std::size_t pos_ = 0;
};

}  // namespace

Status parse_npy_header(std::string_view text, const std::string& name, NpyHeader* out) {
  return Parser(text, name).parse(out);
}

}  // namespace turboquant::io
