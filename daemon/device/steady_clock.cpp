#include "daemon/device/steady_clock.hpp"

#include <chrono>

namespace nbdsched::daemon {

[[gnu::hot]] sched::Time steady_now() {
    return std::chrono::duration_cast<sched::Time>(std::chrono::steady_clock::now().time_since_epoch());
}

}   // namespace nbdsched::daemon
