#include "daemon/process/event_loop.hpp"

namespace nbdsched::daemon {

void run_event_loop(boost::asio::io_context& io, std::chrono::microseconds busy_poll, LoopStats& stats) {
    if (busy_poll.count() == 0) {
        io.run();
        return;
    }
    using clock = std::chrono::steady_clock;
    while (!io.stopped()) {
        // Run what is ready; poll on while work keeps coming, until
        // busy_poll has passed without any.
        auto deadline = clock::now() + busy_poll;
        bool idle = false;   // an empty poll since the last work
        while (!io.stopped()) {
            if (io.poll() != 0) {
                if (idle) ++stats.polls_with_work;
                idle = false;
                deadline = clock::now() + busy_poll;
            } else if (clock::now() >= deadline) {
                break;
            } else {
                idle = true;
            }
        }
        ++stats.sleeps;
        if (io.run_one() == 0) return;   // out of work, or stopped
    }
}

}   // namespace nbdsched::daemon
