// JSON input files of the command line (--policy, --train-config): read, parsed, and checked for
// repeated keys, with errors that name the file and the position.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ampc {

using Json = nlohmann::json;

// The JSON document of file `path`, given to the command line as `flag` (e.g. "--policy"). Errors
// are InvalidArgument "PATH: ...": the file cannot be read, invalid JSON (at byte, line and
// column), or a key repeated in one object (nlohmann keeps the last one silently).
absl::StatusOr<Json> ReadJsonFile(const std::string& path, absl::string_view flag);

// The same for `text` already read from `path`.
absl::StatusOr<Json> ParseJsonText(const std::string& path, const std::string& text);

// A value in an error message: its type and itself when short and simple ("number 0.5"), else
// its type alone ("array").
std::string DescribeJson(const Json& value);

}  // namespace ampc
