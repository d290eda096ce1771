#include "core/json_reader.h"

#include <algorithm>

#include "core/error.h"
#include "core/strings.h"

namespace qforge {

namespace {
const nlohmann::json& emptyObject() {
  static const nlohmann::json empty = nlohmann::json::object();
  return empty;
}
const nlohmann::json& nullJson() {
  static const nlohmann::json null;
  return null;
}
}  // namespace

JsonReader::JsonReader(const nlohmann::json& object, std::string where, std::string path)
    : object_(object.is_null() ? emptyObject() : object),
      where_(std::move(where)),
      path_(std::move(path)) {
  if (!object_.is_object()) {
    throw Error(where_ + ": " + (path_.empty() ? "the document" : "'" + path_ + "'") +
                " must be a JSON object, not " + object_.type_name());
  }
}

std::string JsonReader::keyPath(const std::string& key) const {
  return path_.empty() ? key : path_ + "." + key;
}

void JsonReader::fail(const std::string& key, const std::string& message) const {
  throw Error(where_ + ": key '" + keyPath(key) + "': " + message);
}

bool JsonReader::has(const std::string& key) const {
  return object_.contains(key);
}

const nlohmann::json& JsonReader::get(const std::string& key) {
  read_.insert(key);
  auto it = object_.find(key);
  return it == object_.end() ? nullJson() : *it;
}

const nlohmann::json& JsonReader::raw(const std::string& key, nlohmann::json::value_t type,
                                      const char* type_name) {
  const nlohmann::json& v = get(key);
  const bool number_ok = type == nlohmann::json::value_t::number_float && v.is_number();
  const bool int_ok = type == nlohmann::json::value_t::number_integer &&
                      (v.is_number_integer() || v.is_number_unsigned());
  if (v.type() != type && !number_ok && !int_ok) {
    fail(key,
         std::string("must be ") + type_name + ", not " + v.type_name() + " (" + v.dump() + ")");
  }
  return v;
}

bool JsonReader::getBool(const std::string& key, bool fallback) {
  if (!has(key)) return read_.insert(key), fallback;
  return raw(key, nlohmann::json::value_t::boolean, "true or false").get<bool>();
}

int64_t JsonReader::getInt(const std::string& key, int64_t fallback) {
  if (!has(key)) return read_.insert(key), fallback;
  return raw(key, nlohmann::json::value_t::number_integer, "an integer").get<int64_t>();
}

double JsonReader::getNumber(const std::string& key, double fallback) {
  if (!has(key)) return read_.insert(key), fallback;
  return raw(key, nlohmann::json::value_t::number_float, "a number").get<double>();
}

std::string JsonReader::getString(const std::string& key, const std::string& fallback) {
  if (!has(key)) return read_.insert(key), fallback;
  return raw(key, nlohmann::json::value_t::string, "a string").get<std::string>();
}

std::vector<std::string> JsonReader::getStrings(const std::string& key) {
  if (!has(key)) return read_.insert(key), std::vector<std::string>{};
  const nlohmann::json& v = get(key);
  if (v.is_string()) return {v.get<std::string>()};
  if (!v.is_array()) fail(key, std::string("must be a list of strings, not ") + v.type_name());
  std::vector<std::string> out;
  for (const auto& item : v) {
    if (!item.is_string()) fail(key, "must hold only strings, found " + item.dump());
    out.push_back(item.get<std::string>());
  }
  return out;
}

JsonReader JsonReader::object(const std::string& key) {
  return JsonReader(get(key), where_, keyPath(key));
}

void JsonReader::finish(const std::vector<std::string>& also_known) const {
  for (const auto& item : object_.items()) {
    if (read_.count(item.key())) continue;
    if (std::find(also_known.begin(), also_known.end(), item.key()) != also_known.end()) continue;
    std::vector<std::string> known_keys(read_.begin(), read_.end());
    known_keys.insert(known_keys.end(), also_known.begin(), also_known.end());
    const std::string names = join(known_keys);
    throw Error(where_ + ": unknown key '" + keyPath(item.key()) + "'" +
                (names.empty() ? "" : " (known here: " + names + ")"));
  }
}

std::string jsonReason(const nlohmann::json::exception& e) {
  const std::string what = e.what();
  const size_t end = what.find("] ");
  return what.rfind("[json.exception.", 0) == 0 && end != std::string::npos ? what.substr(end + 2)
                                                                            : what;
}

nlohmann::json parseJson(const std::string& text, const std::string& where) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw Error(where + ": not valid JSON at byte " + std::to_string(e.byte) +
                ": fix the syntax there");
  } catch (const nlohmann::json::exception& e) {
    // A number beyond double's range ("1e999") is out_of_range, not a parse_error (it escaped as
    // an internal error, found by fuzzing, issue #22).
    throw Error(where + ": not valid JSON (" + jsonReason(e) + ")");
  }
}

}  // namespace qforge
