#include "config/suggest.hpp"

#include <algorithm>
#include <cctype>

namespace nbdsched::config::detail {
namespace {

char lower(char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); }

// Optimal string alignment distance (Levenshtein plus adjacent swaps): a
// swapped pair of letters is the most common typo in a key.
std::size_t distance(std::string_view a, std::string_view b) {
    std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
    for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
    for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i) {
        for (std::size_t j = 1; j <= b.size(); ++j) {
            std::size_t cost = lower(a[i - 1]) == lower(b[j - 1]) ? 0 : 1;
            d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
            if (i > 1 && j > 1 && lower(a[i - 1]) == lower(b[j - 2]) && lower(a[i - 2]) == lower(b[j - 1]))
                d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
        }
    }
    return d[a.size()][b.size()];
}

bool lower_prefix(std::string_view a, std::string_view b, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i)
        if (lower(a[i]) != lower(b[i])) return false;
    return true;
}

}   // namespace

std::string closest(std::string_view word, const std::vector<std::string_view>& candidates) {
    std::string_view best;
    std::size_t best_distance = 3;   // more than 2 edits is not a typo
    for (auto candidate : candidates) {
        std::size_t dist = distance(word, candidate);
        // "warning" for "warn": a longer or shorter form of the word is a near miss too.
        std::size_t shorter = std::min(word.size(), candidate.size());
        if (shorter >= 3 && lower_prefix(word, candidate, shorter)) dist = std::min<std::size_t>(dist, 1);
        if (dist < best_distance && dist * 2 <= std::max(word.size(), candidate.size())) {
            best = candidate;
            best_distance = dist;
        }
    }
    return std::string(best);
}

std::string did_you_mean(std::string_view word, const std::vector<std::string_view>& candidates) {
    std::string best = closest(word, candidates);
    return best.empty() ? std::string() : " (did you mean '" + best + "'?)";
}

std::string join(const std::vector<std::string_view>& words) {
    std::string out;
    for (auto word : words) {
        if (!out.empty()) out += ", ";
        out += word;
    }
    return out;
}

}   // namespace nbdsched::config::detail
