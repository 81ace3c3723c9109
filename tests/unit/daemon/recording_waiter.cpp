#include "recording_waiter.hpp"

namespace nbdsched::testlib {

RecordingWaiter::RecordingWaiter(std::vector<int>& log, int id) : log(log), id(id) {}

void RecordingWaiter::budget_available() {
    ++woken;
    log.push_back(id);
}

}   // namespace nbdsched::testlib
