#include "compiler/json_file.h"

#include <algorithm>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "compiler/file_io.h"

namespace ampc {
namespace {

constexpr uint64_t kMaxJsonBytes = uint64_t{64} << 20;  // policies and train configs are small

absl::Status Error(const std::string& path, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", message));
}

// "byte 27 (line 3, column 5)" for the parser's 1-based byte position.
std::string Position(const std::string& text, size_t byte) {
  if (byte > text.size()) return absl::StrCat("the end of the file (byte ", byte, ")");
  const size_t before = byte == 0 ? 0 : byte - 1;
  const size_t line_start = before == 0 ? 0 : text.rfind('\n', before - 1) + 1;
  const auto line = 1 + std::count(text.begin(), text.begin() + static_cast<long>(before), '\n');
  return absl::StrCat("byte ", byte, " (line ", line, ", column ", before - line_start + 1, ")");
}

// The parser's words without its "[json.exception...] parse error at line 3, column 5: " prefix.
std::string ParserDetail(const std::string& what) {
  const size_t column = what.find("column ");
  const size_t colon = what.find(": ", column == std::string::npos ? 0 : column);
  return colon == std::string::npos ? what : what.substr(colon + 2);
}

}  // namespace

absl::StatusOr<Json> ReadJsonFile(const std::string& path, absl::string_view flag) {
  NoteInputFile(path);
  absl::StatusOr<std::string> text =
      ReadSmallFile(path, kMaxJsonBytes, absl::StrCat(flag, " file"));
  if (!text.ok()) return text.status();
  return ParseJsonText(path, *text);
}

absl::StatusOr<Json> ParseJsonText(const std::string& path, const std::string& text) {
  std::vector<std::set<std::string>> seen;  // keys of each open object
  std::vector<std::string> keys;            // the key being read in each open object
  std::string repeated;
  auto check = [&](int, Json::parse_event_t event, Json& parsed) {
    if (event == Json::parse_event_t::object_start) {
      seen.emplace_back();
      keys.emplace_back();
    } else if (event == Json::parse_event_t::object_end && !seen.empty()) {
      seen.pop_back();
      keys.pop_back();
    } else if (event == Json::parse_event_t::key && !seen.empty()) {
      const std::string key = parsed.get<std::string>();
      keys.back() = key;
      if (!seen.back().insert(key).second && repeated.empty()) {
        std::vector<std::string> outer(keys.begin(), keys.end() - 1);
        for (std::string& k : outer) k = absl::StrCat("\"", k, "\"");
        repeated = absl::StrCat(outer.empty() ? "" : absl::StrCat(absl::StrJoin(outer, "."), ": "),
                                "\"", key, "\" appears twice");
      }
    }
    return true;
  };
  try {
    Json doc = Json::parse(text, check);
    if (!repeated.empty()) return Error(path, repeated);
    return doc;
  } catch (const Json::parse_error& e) {
    return Error(path, absl::StrCat("invalid JSON at ", Position(text, e.byte), ": ",
                                    ParserDetail(e.what())));
  } catch (const Json::exception& e) {  // a number beyond a double's range, say
    absl::string_view what = e.what();
    const size_t tag_end = what.find("] ");  // "[json.exception.out_of_range.406] ..."
    if (tag_end != absl::string_view::npos) what.remove_prefix(tag_end + 2);
    return Error(path, absl::StrCat("invalid JSON: ", what));
  }
}

std::string DescribeJson(const Json& value) {
  if (value.is_null()) return "null";
  const std::string text = value.is_primitive() ? value.dump() : "";
  if (!text.empty() && text.size() <= 40) return absl::StrCat(value.type_name(), " ", text);
  return value.type_name();
}

}  // namespace ampc
