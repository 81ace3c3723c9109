#include "daemon/stats/loop_activity.hpp"

namespace nbdsched::daemon::stats {

[[gnu::hot]] LoopActivity& loop_activity() {
    static thread_local LoopActivity activity;
    return activity;
}

}   // namespace nbdsched::daemon::stats
