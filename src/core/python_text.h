// Text as Python's str sees it, for rules transcribed from Python references: UTF-8 as code points, and
// str.isspace() / str.split() (no separator).
#pragma once

#include <string>
#include <vector>

namespace transcribe {

using CodePoints = std::u32string;

// S's code points (S is valid UTF-8: the tokenizer's decode and the tools' input checks see to it).
CodePoints to_code_points(const std::string & s);
std::string to_utf8(const CodePoints & t);

// str.isspace() of one character.
bool python_isspace(char32_t c);

// str.split(): the runs between whitespace, none empty.
std::vector<CodePoints> python_split(const CodePoints & t);

} // namespace transcribe
