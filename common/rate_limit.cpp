#include "common/rate_limit.hpp"

#include <utility>

namespace nbdsched {

bool RateLimit::allow(std::chrono::nanoseconds now, std::uint64_t& held_back) {
    held_back = 0;
    if (!started_ || now - begun_ >= interval_) {
        held_back = std::exchange(missed_, 0);
        begun_ = now;
        started_ = true;
        used_ = 0;
    }
    if (used_ < burst_) {
        ++used_;
        return true;
    }
    ++missed_;
    return false;
}

}   // namespace nbdsched
