#include "compiler/text_tokens.h"

#include <array>
#include <charconv>
#include <cmath>

namespace ampc {
namespace {

// Indexed by TensorProto::DataType; such words are quoted when used as names.
constexpr std::array<std::string_view, 17> kElemTypeNames = {
    "undefined", "float",  "uint8",     "int8",       "uint16",  "int16",
    "int32",     "int64",  "string",    "bool",       "float16", "double",
    "uint32",    "uint64", "complex64", "complex128", "bfloat16"};

bool IsTypeKeyword(std::string_view s) {
  for (std::string_view name : kElemTypeNames) {
    if (s == name) return true;
  }
  return s == "seq" || s == "map" || s == "optional" || s == "sparse_tensor";
}

template <typename T>
std::string FormatFloatingPoint(T v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  char buf[64];
  std::string s(buf, std::to_chars(buf, buf + sizeof(buf), v).ptr);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

}  // namespace

bool IsIdentifier(std::string_view s) {
  auto alpha = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; };
  if (s.empty() || !alpha(s[0])) return false;
  for (char c : s) {
    if (!alpha(c) && !(c >= '0' && c <= '9')) return false;
  }
  return !IsTypeKeyword(s);
}

std::string Quote(std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "\"";
  for (unsigned char c : s) {
    const char* escape = c == '"'    ? "\\\""
                         : c == '\\' ? "\\\\"
                         : c == '\n' ? "\\n"
                         : c == '\t' ? "\\t"
                         : c == '\r' ? "\\r"
                                     : nullptr;
    if (escape != nullptr) {
      out += escape;
    } else if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      out += {'\\', 'x', kHex[c >> 4], kHex[c & 15]};
    }
  }
  return out + "\"";
}

std::string Name(std::string_view s) { return IsIdentifier(s) ? std::string(s) : Quote(s); }

std::string FormatFloat(float v) { return FormatFloatingPoint(v); }
std::string FormatFloat(double v) { return FormatFloatingPoint(v); }

std::string ElemTypeName(int32_t type) {
  if (type < 0 || type >= static_cast<int32_t>(kElemTypeNames.size())) {
    return "dtype" + std::to_string(type);
  }
  return std::string(kElemTypeNames[static_cast<size_t>(type)]);
}

}  // namespace ampc
