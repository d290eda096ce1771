#include "support/dom.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

namespace qforge::testing {

namespace {

void appendUtf8(std::string& out, unsigned long cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

bool isSpace(char c) {
  return c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\f';
}

}  // namespace

std::string decodeEntities(const std::string& text) {
  static const std::map<std::string, std::string> named = {
      {"amp", "&"}, {"lt", "<"}, {"gt", ">"}, {"quot", "\""}, {"apos", "'"}, {"nbsp", "\xC2\xA0"}};
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    const size_t semi = text[i] == '&' ? text.find(';', i) : std::string::npos;
    if (semi == std::string::npos || semi - i > 10) {
      out += text[i];
      continue;
    }
    const std::string name = text.substr(i + 1, semi - i - 1);
    if (!name.empty() && name[0] == '#') {
      const bool hex = name.size() > 1 && (name[1] == 'x' || name[1] == 'X');
      appendUtf8(out, std::strtoul(name.c_str() + (hex ? 2 : 1), nullptr, hex ? 16 : 10));
    } else if (named.count(name)) {
      out += named.at(name);
    } else {
      out += text[i];
      continue;
    }
    i = semi;
  }
  return out;
}

Dom::Dom(const std::string& html) {
  std::vector<int> open;
  size_t i = 0;
  const size_t n = html.size();
  while (i < n) {
    if (html[i] != '<') {
      const size_t end = std::min(html.find('<', i), n);
      addText(open, decodeEntities(html.substr(i, end - i)));
      i = end;
    } else if (html.compare(i, 4, "<!--") == 0) {
      i = std::min(html.find("-->", i), n - 3) + 3;
    } else if (html.compare(i, 2, "<!") == 0 || html.compare(i, 2, "<?") == 0) {
      i = std::min(html.find('>', i), n - 1) + 1;
    } else if (html.compare(i, 2, "</") == 0) {
      const size_t end = std::min(html.find('>', i), n - 1);
      const std::string tag = html.substr(i + 2, end - i - 2);
      for (size_t k = open.size(); k-- > 0;) {
        if (elements_[open[k]].tag == tag) {
          open.resize(k);
          break;
        }
      }
      i = end + 1;
    } else {
      i = startTag(html, i, open);
    }
  }
}

std::vector<const Element*> Dom::find(const std::string& tag, const std::string& cls,
                                      const std::string& name, const std::string& value,
                                      const Element* within) const {
  std::vector<const Element*> out;
  for (const Element& e : elements_) {
    if (!tag.empty() && e.tag != tag) continue;
    if (!cls.empty() && !e.hasClass(cls)) continue;
    if (!name.empty() && (!e.has(name) || e.attr(name) != value)) continue;
    if (within && !inside(e, *within)) continue;
    out.push_back(&e);
  }
  return out;
}

const Element* Dom::one(const std::string& tag, const std::string& cls, const std::string& name,
                        const std::string& value, const Element* within) const {
  const auto found = find(tag, cls, name, value, within);
  return found.size() == 1 ? found[0] : nullptr;
}

const Element& Dom::the(const std::string& tag, const std::string& cls, const std::string& name,
                        const std::string& value, const Element* within) const {
  static const Element missing = [] {
    Element e;
    e.index = -2;  // inside nothing, nothing inside it
    return e;
  }();
  const auto found = find(tag, cls, name, value, within);
  if (found.size() == 1) return *found[0];
  ADD_FAILURE() << found.size() << " elements <" << tag << " class=" << cls << " " << name << "="
                << value << ">, not 1";
  return missing;
}

bool Dom::inside(const Element& e, const Element& ancestor) const {
  for (int p = e.parent; p >= 0; p = elements_[p].parent) {
    if (p == ancestor.index) return true;
  }
  return false;
}

// Text belongs to every open element, as textContent does.
void Dom::addText(const std::vector<int>& open, const std::string& text) {
  for (int e : open)
    elements_[e].text += text;
}

size_t Dom::startTag(const std::string& html, size_t i, std::vector<int>& open) {
  const size_t n = html.size();
  size_t j = i + 1;
  while (j < n && !isSpace(html[j]) && html[j] != '>' && html[j] != '/')
    ++j;
  Element e;
  e.index = static_cast<int>(elements_.size());
  e.parent = open.empty() ? -1 : open.back();
  e.tag = html.substr(i + 1, j - i - 1);
  bool self_closing = false;
  while (j < n) {
    if (isSpace(html[j])) {
      ++j;
    } else if (html[j] == '>') {
      ++j;
      break;
    } else if (html[j] == '/') {
      self_closing = j + 1 < n && html[j + 1] == '>';
      ++j;
    } else {
      const size_t name_begin = j;
      while (j < n && !isSpace(html[j]) && html[j] != '=' && html[j] != '>' && html[j] != '/')
        ++j;
      const std::string name = html.substr(name_begin, j - name_begin);
      std::string value;
      if (j < n && html[j] == '=') {
        ++j;
        if (j < n && (html[j] == '"' || html[j] == '\'')) {
          const size_t close = std::min(html.find(html[j], j + 1), n);
          value = decodeEntities(html.substr(j + 1, close - j - 1));
          j = close + 1;
        } else {
          const size_t begin = j;
          while (j < n && !isSpace(html[j]) && html[j] != '>')
            ++j;
          value = decodeEntities(html.substr(begin, j - begin));
        }
      }
      e.attrs[name] = value;
    }
  }
  elements_.push_back(e);
  static const std::vector<std::string> void_tags = {"area",   "base",  "br",    "col",  "embed",
                                                     "hr",     "img",   "input", "link", "meta",
                                                     "source", "track", "wbr"};
  const bool raw = e.tag == "script" || e.tag == "style";
  if (raw || e.tag == "title" || e.tag == "textarea") {
    const size_t close = std::min(html.find("</" + e.tag, j), n);
    const std::string content = html.substr(j, close - j);
    if (raw) {
      elements_.back().text = content;
    } else {
      open.push_back(e.index);
      addText(open, decodeEntities(content));
      open.pop_back();
    }
    return std::min(html.find('>', close), n - 1) + 1;
  }
  if (!self_closing && std::find(void_tags.begin(), void_tags.end(), e.tag) == void_tags.end())
    open.push_back(e.index);
  return j;
}

double dataValue(const Element& e) {
  const std::string text = e.attr("data-value");
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  EXPECT_TRUE(!text.empty() && *end == '\0') << "data-value '" << text << "' of <" << e.tag << ">";
  return v;
}

void expectText2(const std::string& text, double expected, const std::string& what) {
  if (std::isinf(expected)) {
    EXPECT_EQ(text, "\u221e") << what;
    return;
  }
  char* end = nullptr;
  const double shown = std::strtod(text.c_str(), &end);
  ASSERT_TRUE(!text.empty() && *end == '\0') << what << ": '" << text << "'";
  EXPECT_NEAR(shown, expected, 0.005 + 1e-9) << what;
  EXPECT_EQ(text.size() - text.find('.'), 3u) << what << ": 2 decimals, '" << text << "'";
}

}  // namespace qforge::testing
