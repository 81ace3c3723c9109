// "Did you mean" suggestions for misspelt keys and words.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace nbdsched::config::detail {

// The candidate closest to `word` by edit distance when it is close enough to
// be a typo (at most 2 edits, and fewer than half the word), else "".
std::string closest(std::string_view word, const std::vector<std::string_view>& candidates);

// " (did you mean 'slice_idle'?)" or "" when nothing is close.
std::string did_you_mean(std::string_view word, const std::vector<std::string_view>& candidates);

// "none, cfq, bfq"
std::string join(const std::vector<std::string_view>& words);

}   // namespace nbdsched::config::detail
