// A reader for the DOM headless Chromium serializes (support/chromium.h's renderDom), so tests of
// the pages qforge writes can find elements by tag, class and attribute and read their text and
// data-value numbers back.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace qforge::testing {

struct Element {
  int index = 0;
  int parent = -1;
  std::string tag;
  std::map<std::string, std::string> attrs;
  std::string text;  // textContent, without script and style contents

  bool has(const std::string& name) const { return attrs.count(name) > 0; }
  std::string attr(const std::string& name) const {
    const auto it = attrs.find(name);
    return it == attrs.end() ? "" : it->second;
  }
  bool hasClass(const std::string& cls) const {
    const std::string classes = " " + attr("class") + " ";
    return classes.find(" " + cls + " ") != std::string::npos;
  }
};

// The character references a serializer writes (named ones of HTML's escapes, &#N; and &#xN;).
std::string decodeEntities(const std::string& text);

// Serialized HTML read back into elements: enough for Chromium's --dump-dom (quoted attributes,
// an end tag for every element that is not void, raw text in script and style).
class Dom {
 public:
  explicit Dom(const std::string& html);

  // Elements with `tag` ("" for any) and class `cls` ("" for any), with attribute `name` equal to
  // `value` when `name` is given, inside `within` when given.
  std::vector<const Element*> find(const std::string& tag, const std::string& cls,
                                   const std::string& name = "", const std::string& value = "",
                                   const Element* within = nullptr) const;
  // The one such element; nullptr when there is not exactly one.
  const Element* one(const std::string& tag, const std::string& cls, const std::string& name = "",
                     const std::string& value = "", const Element* within = nullptr) const;
  // The one such element; a test failure and an empty element when there is not exactly one.
  const Element& the(const std::string& tag, const std::string& cls, const std::string& name = "",
                     const std::string& value = "", const Element* within = nullptr) const;
  const Element* byId(const std::string& id) const { return one("", "", "id", id); }
  // The page's <title> (SVG charts have title elements too).
  std::string title() const { return the("title", "", "", "", &the("head", "")).text; }
  const std::vector<Element>& elements() const { return elements_; }

 private:
  bool inside(const Element& e, const Element& ancestor) const;
  void addText(const std::vector<int>& open, const std::string& text);
  size_t startTag(const std::string& html, size_t i, std::vector<int>& open);

  std::vector<Element> elements_;
};

// An element's data-value in full precision ("Infinity" reads as infinity); a test failure when
// it is missing or not a number.
double dataValue(const Element& e);

// Visible `text` equals `expected` printed with 2 decimals ("∞" for infinity); `what` names it
// in failures.
void expectText2(const std::string& text, double expected, const std::string& what);

}  // namespace qforge::testing
