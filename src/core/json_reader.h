// Reads a JSON object with its keys checked: every key must be read by the caller, so a typo in a
// config ("bitz") is an error that names its path ("weight.bitz") instead of a silent default.
#pragma once

#include <nlohmann/json.hpp>

#include <set>
#include <string>
#include <vector>

namespace qforge {

class JsonReader {
 public:
  // `where` names the document ("backends/snpe.json"); `path` the object inside it ("weight").
  JsonReader(const nlohmann::json& object, std::string where, std::string path = "");

  bool has(const std::string& key) const;
  // Typed reads; a present key of the wrong type throws naming the key and the expected type.
  bool getBool(const std::string& key, bool fallback);
  int64_t getInt(const std::string& key, int64_t fallback);
  double getNumber(const std::string& key, double fallback);
  std::string getString(const std::string& key, const std::string& fallback);
  std::vector<std::string> getStrings(const std::string& key);
  // The raw value (marks the key as read); null when absent.
  const nlohmann::json& get(const std::string& key);
  // A reader for a nested object (absent: an empty object).
  JsonReader object(const std::string& key);

  // "where: key 'path.key': message" — for checks the caller makes on a value.
  [[noreturn]] void fail(const std::string& key, const std::string& message) const;
  // Throws naming the first key nobody read, with the keys that are known.
  void finish(const std::vector<std::string>& also_known = {}) const;

  std::string keyPath(const std::string& key) const;
  const std::string& where() const { return where_; }

 private:
  const nlohmann::json& raw(const std::string& key, nlohmann::json::value_t type,
                            const char* type_name);

  const nlohmann::json& object_;
  std::string where_;
  std::string path_;
  std::set<std::string> read_;
};

// Parses JSON text; a syntax error throws qforge::Error naming `where` and the byte offset.
nlohmann::json parseJson(const std::string& text, const std::string& where);
// nlohmann's message without its "[json.exception.type.NNN] " prefix, for one-line errors.
std::string jsonReason(const nlohmann::json::exception& e);

}  // namespace qforge
