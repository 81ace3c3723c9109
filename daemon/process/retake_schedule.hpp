// When each lost lock is tried again after a failed hand-over
// (server_takeback.cpp): a device's delay starts at `first` when its lock
// is lost and doubles, up to `longest`, with each of its own failed tries,
// whatever the other devices' delays (a device newly lost is tried after
// `first` even while another waits `longest`). A device whose try runs has
// no time: the try's answer sets the next (failed) or ends it (back).
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace nbdsched::daemon {

class RetakeSchedule {
public:
    using Time = std::chrono::steady_clock::time_point;

    RetakeSchedule(std::chrono::milliseconds first, std::chrono::milliseconds longest)
        : first_(first), longest_(longest) {}

    // A try of `device` failed at `now`, or its lock was lost then: its
    // next try after `first` if it was not lost before, else after twice
    // its last delay (at most `longest`). The delay.
    std::chrono::milliseconds failed(const std::string& device, Time now);
    // Its lock is back: forgotten, a next loss starts at `first` again.
    void back(const std::string& device) { entries_.erase(device); }
    // A try of `device` begins (whoever began it): not due until its answer.
    void started(const std::string& device);
    // The devices due at `now` (none with a try running), in name order.
    std::vector<std::string> due(Time now) const;
    // When the first device is due; nullopt: none waits.
    std::optional<Time> next() const;
    // Its last delay; 0: its lock is not lost.
    std::chrono::milliseconds delay(const std::string& device) const;
    bool empty() const { return entries_.empty(); }

private:
    struct Entry {
        std::chrono::milliseconds delay{};
        std::optional<Time> due;   // nullopt: a try runs
    };
    std::chrono::milliseconds first_;
    std::chrono::milliseconds longest_;
    std::map<std::string, Entry> entries_;
};

}   // namespace nbdsched::daemon
