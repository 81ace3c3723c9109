// Per-device request counters the daemon keeps on top of the scheduler's own
// (sched/stats.hpp): requests and bytes by operation, in-flight, errors and
// latency, for the device as a whole and per export, group and queue. Lives
// on the event loop thread; the device records, the control socket and the
// metrics endpoint read.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>

#include "daemon/stats/latency.hpp"
#include "sched/request.hpp"

namespace nbdsched::daemon::stats {

struct Counters {
    std::uint64_t reads = 0;
    std::uint64_t writes = 0;
    std::uint64_t flushes = 0;
    std::uint64_t trims = 0;
    std::uint64_t zeroes = 0;
    std::uint64_t read_bytes = 0;
    std::uint64_t write_bytes = 0;
    std::uint64_t errors = 0;
    std::uint64_t in_flight = 0;        // submitted to the device, not done
    std::uint64_t readahead_hits = 0;   // reads served from the read-ahead cache
    // Reads of a client that had closed, answered at dispatch without being
    // read (Device::start): not counted as reads, nor in the latency.
    std::uint64_t cancelled = 0;
    // Clients an export's allow: rules turned away (device and export only:
    // a refused client never reaches a group or a queue).
    std::uint64_t refused = 0;
    LatencyHistogram latency;   // submit to reply release

    std::uint64_t requests() const { return reads + writes + flushes + trims + zeroes; }
    void submitted() { ++in_flight; }
    void done(sched::Op op, std::uint64_t bytes, Nanos latency, bool error);
    void cancel();
    void merge(const Counters& other);
};

// What a connection's queue is known by in `ctl list` and `ctl stats`.
struct QueueInfo {
    std::string export_name;
    sched::GroupId group = 0;
    std::string peer;   // "pid 123 uid 0 cgroup /x" or "127.0.0.1:5555"
};

struct QueueCounters {
    QueueInfo info;
    Counters counters;
};

class DeviceStats {
public:
    // A queue's requests also count for its export and group.
    void open_queue(sched::QueueId queue, QueueInfo info);
    // The queue's counters stay in its export and group; the queue itself goes.
    void close_queue(sched::QueueId queue);
    // A queue unknown here (never opened) still counts for the device.
    void submitted(sched::QueueId queue);
    void done(sched::QueueId queue, sched::Op op, std::uint64_t bytes, Nanos latency, bool error);
    void readahead_hit(sched::QueueId queue);
    void cancelled(sched::QueueId queue);
    // A client asked for the export and its allow: rules said no.
    void refused(const std::string& export_name);

    const Counters& device() const { return device_; }
    const std::map<std::string, Counters>& exports() const { return exports_; }
    const std::map<sched::GroupId, Counters>& groups() const { return groups_; }
    const std::map<sched::QueueId, QueueCounters>& queues() const { return queues_; }
    std::uint64_t queues_opened() const { return opened_; }

private:
    struct Route {
        Counters* queue;
        Counters* export_;
        Counters* group;
    };
    Route* route(sched::QueueId queue);
    // Runs `f` on the device's counters and, when the queue is known, its
    // queue's, export's and group's.
    template <class F>
    void each(sched::QueueId queue, F&& f);

    Counters device_;
    std::map<std::string, Counters> exports_;
    std::map<sched::GroupId, Counters> groups_;
    std::map<sched::QueueId, QueueCounters> queues_;
    std::unordered_map<sched::QueueId, Route> routes_;
    std::uint64_t opened_ = 0;
};

}   // namespace nbdsched::daemon::stats
