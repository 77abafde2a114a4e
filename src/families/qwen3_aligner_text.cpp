#include "families/qwen3_aligner_text.h"

#include "core/python_text.h"

#include <utf8proc.h>

#include <algorithm>
#include <optional>

namespace transcribe::qwen3_aligner {

namespace {

bool is_kept_char(char32_t c) {
    if (c == '\'') {
        return true;
    }
    switch (utf8proc_category(utf8proc_int32_t(c))) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT: case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO: case UTF8PROC_CATEGORY_ND: case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_NO:
        return true;
    default:
        return false;
    }
}

bool is_cjk_char(char32_t c) {
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
           (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B820 && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF);
}

} // namespace

std::vector<std::string> split_units(const std::string & text) {
    std::vector<std::string> units;
    for (const CodePoints & part : python_split(to_code_points(text))) {
        CodePoints cleaned, run;
        std::copy_if(part.begin(), part.end(), std::back_inserter(cleaned), is_kept_char);
        for (char32_t c : cleaned) { // split_segment_with_chinese
            if (is_cjk_char(c)) {
                if (!run.empty()) {
                    units.push_back(to_utf8(run));
                    run.clear();
                }
                units.push_back(to_utf8(CodePoints(1, c)));
            } else {
                run.push_back(c);
            }
        }
        if (!run.empty()) {
            units.push_back(to_utf8(run));
        }
    }
    return units;
}

std::vector<int64_t> fix_timestamps(const std::vector<double> & data) {
    const size_t n = data.size();
    if (n == 0) {
        return {};
    }
    std::vector<int> dp(n, 1), parent(n, -1);
    for (size_t i = 1; i < n; ++i) {
        for (size_t j = 0; j < i; ++j) {
            if (data[j] <= data[i] && dp[j] + 1 > dp[i]) {
                dp[i]     = dp[j] + 1;
                parent[i] = int(j);
            }
        }
    }
    std::vector<bool> normal(n, false);
    for (int idx = int(std::max_element(dp.begin(), dp.end()) - dp.begin()); idx != -1; idx = parent[size_t(idx)]) {
        normal[size_t(idx)] = true;
    }
    std::vector<double> result = data;
    auto left_of = [&](size_t i) -> std::optional<double> {
        for (size_t k = i; k-- > 0;) {
            if (normal[k]) {
                return result[k];
            }
        }
        return std::nullopt;
    };
    auto right_from = [&](size_t j) -> std::optional<double> {
        for (size_t k = j; k < n; ++k) {
            if (normal[k]) {
                return result[k];
            }
        }
        return std::nullopt;
    };
    for (size_t i = 0; i < n;) {
        if (normal[i]) {
            ++i;
            continue;
        }
        size_t j = i;
        while (j < n && !normal[j]) {
            ++j;
        }
        const size_t count = j - i;
        const std::optional<double> left = left_of(i), right = right_from(j);
        for (size_t k = i; k < j; ++k) {
            if (count <= 2) {
                if (!left) {
                    result[k] = *right; // the subsequence is never empty: one side has a kept slot
                } else if (!right) {
                    result[k] = *left;
                } else {
                    result[k] = int64_t(k) - (int64_t(i) - 1) <= int64_t(j) - int64_t(k) ? *left : *right;
                }
            } else if (left && right) {
                result[k] = *left + (*right - *left) / double(count + 1) * double(k - i + 1);
            } else {
                result[k] = left ? *left : *right;
            }
        }
        i = j;
    }
    std::vector<int64_t> out(n);
    std::transform(result.begin(), result.end(), out.begin(), [](double v) { return int64_t(v); });
    return out;
}

} // namespace transcribe::qwen3_aligner
