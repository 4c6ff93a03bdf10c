// Strict reading of JSON configuration objects: unknown keys and wrongly typed values are InputErrors that
// name the place as a JSON pointer, prefixed with the file when known ("cfg.json:/q/x0"), and, for a
// misspelt key, suggest the closest allowed one. A `path` argument is the pointer of the object being read
// ("" or "cfg.json:" for a document's root).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace pasa {

// Parses a JSON file; InputError naming the file (and the parser's position) when unreadable or invalid.
nlohmann::json read_json_file(const std::filesystem::path&);

// Throws unless j is an object whose keys are all in `allowed`:
//   "<path>: unknown key 'x00' (did you mean 'x0'?); allowed: x0, am, ..."
void check_keys(const nlohmann::json& j, const std::vector<std::string>& allowed, const std::string& path);
// The printable place of `path`: "/" for a document's root.
std::string json_where(const std::string& path);
void require_object(const nlohmann::json& j, const std::string& path);

// The allowed key closest in edit distance to `key`, or "" when none is reasonably close.
std::string closest_key(std::string_view key, const std::vector<std::string>& allowed);

// Typed reads of j[key] (j an object); absent keys leave `out` unchanged. Errors name path/key and the value.
void read_number(const nlohmann::json& j, const char* key, const std::string& path, double& out);
void read_size(const nlohmann::json& j, const char* key, const std::string& path, std::size_t& out);
void read_u64(const nlohmann::json& j, const char* key, const std::string& path, std::uint64_t& out);
void read_bool(const nlohmann::json& j, const char* key, const std::string& path, bool& out);
void read_string(const nlohmann::json& j, const char* key, const std::string& path, std::string& out);

}  // namespace pasa
