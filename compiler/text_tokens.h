// The tokens of ONNX's text syntax that the canonical printer writes: quoted strings, names,
// float literals and element type names.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace ampc {

// A name the parser reads unquoted: letters, digits and `_`, not starting with a digit, and not
// a type keyword.
bool IsIdentifier(std::string_view s);

// `"..."` with `"`, `\`, newline, tab and carriage return escaped, other bytes outside printable
// ASCII as `\xHH`.
std::string Quote(std::string_view s);

// `s` unquoted when it is an identifier, else quoted.
std::string Name(std::string_view s);

// Shortest text that reads back to the same value; always marked as a float literal.
std::string FormatFloat(float v);
std::string FormatFloat(double v);

// The parser's name for a TensorProto data type; `dtype<N>` for types it does not know.
std::string ElemTypeName(int32_t type);

}  // namespace ampc
