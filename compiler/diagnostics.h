// Diagnostics on stderr: one line each, whatever the names in them hold (a node name may contain a
// newline, bytes that are not UTF-8, or bidirectional overrides that reorder what a terminal
// shows).
#pragma once

#include <string>
#include <string_view>

#include "passes/pass.h"

namespace ampc {

// `text` with control characters as \n, \t, \r or \xNN, bytes that are not UTF-8 as \xNN, and
// the bidirectional embedding, override and isolate characters as \u202e and the like. Printable
// ASCII and other valid UTF-8 (accents, CJK) pass through unchanged.
std::string EscapeForDiagnostic(std::string_view text);

// Writes "ampc: " + EscapeForDiagnostic(line) + "\n" to stderr.
void PrintDiagnostic(std::string_view line);

// A pass's diagnostic as one line: "FILE: warning: MESSAGE".
std::string DiagnosticLine(std::string_view file, const Diagnostic& diagnostic);

}  // namespace ampc
