#include "daemon/stats/counters.hpp"

namespace nbdsched::daemon::stats {

[[gnu::hot]] void Counters::done(sched::Op op, std::uint64_t bytes, Nanos took, bool error) {
    if (in_flight) --in_flight;
    switch (op) {
    case sched::Op::read:
        ++reads;
        read_bytes += bytes;
        break;
    case sched::Op::write:
        ++writes;
        write_bytes += bytes;
        break;
    case sched::Op::flush: ++flushes; break;
    case sched::Op::trim: ++trims; break;
    case sched::Op::write_zeroes: ++zeroes; break;
    }
    if (error) ++errors;
    latency.record(took);
}

void Counters::cancel() {
    if (in_flight) --in_flight;
    ++cancelled;
}

void Counters::merge(const Counters& o) {
    reads += o.reads;
    writes += o.writes;
    flushes += o.flushes;
    trims += o.trims;
    zeroes += o.zeroes;
    read_bytes += o.read_bytes;
    write_bytes += o.write_bytes;
    errors += o.errors;
    in_flight += o.in_flight;
    readahead_hits += o.readahead_hits;
    cancelled += o.cancelled;
    refused += o.refused;
    latency.merge(o.latency);
}

void DeviceStats::open_queue(sched::QueueId queue, QueueInfo info) {
    ++opened_;
    auto& q = queues_[queue];
    q.info = std::move(info);
    // std::map nodes never move, so the route's pointers stay valid.
    routes_[queue] = Route{&q.counters, &exports_[q.info.export_name], &groups_[q.info.group]};
}

void DeviceStats::close_queue(sched::QueueId queue) {
    routes_.erase(queue);
    queues_.erase(queue);
}

[[gnu::hot]] DeviceStats::Route* DeviceStats::route(sched::QueueId queue) {
    auto it = routes_.find(queue);
    return it == routes_.end() ? nullptr : &it->second;
}

template <class F>
void DeviceStats::each(sched::QueueId queue, F&& f) {
    f(device_);
    if (auto* r = route(queue)) {
        f(*r->queue);
        f(*r->export_);
        f(*r->group);
    }
}

[[gnu::hot]] void DeviceStats::submitted(sched::QueueId queue) {
    each(queue, [](Counters& c) { c.submitted(); });
}

[[gnu::hot]] void DeviceStats::done(sched::QueueId queue, sched::Op op, std::uint64_t bytes, Nanos latency, bool error) {
    each(queue, [&](Counters& c) { c.done(op, bytes, latency, error); });
}

void DeviceStats::readahead_hit(sched::QueueId queue) {
    each(queue, [](Counters& c) { ++c.readahead_hits; });
}

void DeviceStats::cancelled(sched::QueueId queue) {
    each(queue, [](Counters& c) { c.cancel(); });
}

void DeviceStats::refused(const std::string& export_name) {
    ++device_.refused;
    ++exports_[export_name].refused;
}

}   // namespace nbdsched::daemon::stats
