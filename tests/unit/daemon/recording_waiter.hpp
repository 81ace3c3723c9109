// A connection in line for daemon/device/inflight_budget: records the order
// in which tickets arrive, and how many this one got.
#pragma once

#include <vector>

#include "daemon/device/inflight_budget.hpp"

namespace nbdsched::testlib {

struct RecordingWaiter final : daemon::InflightBudget::Waiter {
    RecordingWaiter(std::vector<int>& log, int id);
    void budget_available() override;

    std::vector<int>& log;
    int id;
    int woken = 0;
};

}   // namespace nbdsched::testlib
