#include "daemon/metrics/families.hpp"

#include <map>
#include <string>

#include "backend/factory.hpp"
#include "common/fault_rule.hpp"

namespace nbdsched::daemon::metrics {

namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;
using Labels = std::vector<ClientMetric::Label>;

// Families by name, created on first use, in first-use order.
class Builder {
public:
    void counter(const std::string& name, const std::string& help, Labels labels, double value) {
        add(name, help, MetricType::Counter, std::move(labels)).counter.value = value;
    }
    void gauge(const std::string& name, const std::string& help, Labels labels, double value) {
        add(name, help, MetricType::Gauge, std::move(labels)).gauge.value = value;
    }
    void latency(const std::string& name, Labels labels, const stats::LatencyHistogram& h) {
        auto& m = add(name, "request latency from submit to reply, seconds", MetricType::Summary, std::move(labels));
        m.summary.sample_count = h.count();
        m.summary.sample_sum = seconds(h.total());
        for (double q : {0.5, 0.99}) m.summary.quantile.push_back({q, seconds(h.percentile(q))});
    }
    std::vector<MetricFamily> take() { return std::move(families_); }
    static double seconds(Nanos d) { return static_cast<double>(d.count()) / 1e9; }

private:
    ClientMetric& add(const std::string& name, const std::string& help, MetricType type, Labels labels) {
        auto [it, fresh] = index_.try_emplace(name, families_.size());
        if (fresh) families_.push_back(MetricFamily{name, help, type, {}});
        auto& f = families_[it->second];
        f.metric.emplace_back();
        f.metric.back().label = std::move(labels);
        return f.metric.back();
    }
    std::vector<MetricFamily> families_;
    std::map<std::string, std::size_t> index_;
};

Labels with(Labels base, std::string name, std::string value) {
    base.push_back({std::move(name), std::move(value)});
    return base;
}

void add_counters(Builder& b, const std::string& level, const Labels& labels, const stats::Counters& c) {
    const std::string p = "nbdsched_" + level + "_";
    const std::pair<const char*, std::uint64_t> ops[] = {
        {"read", c.reads}, {"write", c.writes}, {"flush", c.flushes}, {"trim", c.trims}, {"write_zeroes", c.zeroes}};
    for (const auto& [op, n] : ops)
        b.counter(p + "requests_total", "requests completed, by operation", with(labels, "op", op),
                  static_cast<double>(n));
    b.counter(p + "bytes_total", "bytes read or written", with(labels, "op", "read"), static_cast<double>(c.read_bytes));
    b.counter(p + "bytes_total", "bytes read or written", with(labels, "op", "write"),
              static_cast<double>(c.write_bytes));
    b.counter(p + "errors_total", "requests the backend failed", labels, static_cast<double>(c.errors));
    b.counter(p + "readahead_hits_total", "reads served from the read-ahead cache", labels,
              static_cast<double>(c.readahead_hits));
    b.gauge(p + "in_flight", "requests submitted to the device and not yet answered", labels,
            static_cast<double>(c.in_flight));
    b.latency(p + "latency_seconds", labels, c.latency);
}

void add_sched(Builder& b, const std::string& level, const Labels& labels, const sched::EntityStats& s) {
    const std::string p = "nbdsched_" + level + "_";
    b.counter(p + "dispatched_total", "requests the scheduler sent to the device", labels,
              static_cast<double>(s.dispatched));
    b.counter(p + "slices_total", "CFQ slices / BFQ budgets started", labels, static_cast<double>(s.slices));
    b.counter(p + "idle_seconds_total", "time the device was held idle waiting for it", labels,
              Builder::seconds(s.idle_time));
    b.gauge(p + "queued", "requests waiting in the scheduler", labels, static_cast<double>(s.queued));
}

// The device's in-flight budget (limits.max_inflight_per_device and its line).
void add_inflight(Builder& b, const Labels& d, const InflightBudget::Stats& s) {
    b.gauge("nbdsched_device_inflight_requests", "requests read from clients and not yet answered", d,
            static_cast<double>(s.requests));
    b.gauge("nbdsched_device_inflight_bytes", "data bytes of those requests", d, static_cast<double>(s.bytes));
    b.counter("nbdsched_device_inflight_waits_total", "times a connection waited in line for the in-flight limit", d,
              static_cast<double>(s.waits));
}

// What the device's `faults:` rules injected.
void add_faults(Builder& b, const Labels& d, const backend::FaultStats& s) {
    for (unsigned i = 0; i < fault_op_count; ++i)
        b.counter("nbdsched_device_injected_errors_total", "errors the faults: rules injected, by operation",
                  with(d, "op", std::string(fault_op_name(1u << i))), static_cast<double>(s.errors[i]));
    b.counter("nbdsched_device_injected_delays_total", "requests the faults: rules delayed", d,
              static_cast<double>(s.delayed));
}

} // namespace

std::vector<MetricFamily> collect(const control::DaemonState& state) {
    Builder b;
    auto now = steady_now();
    for (const auto& dev : *state.devices) {
        Labels d{{"device", dev->name()}};
        const auto& st = dev->stats();
        auto ss = dev->scheduler().stats(now);
        add_counters(b, "device", d, st.device());
        add_sched(b, "device", d, ss.device);
        for (const auto& [name, c] : st.exports()) add_counters(b, "export", with(d, "export", name), c);
        for (std::size_t i = 0; i < state.groups->size(); ++i) {
            auto gid = static_cast<sched::GroupId>(i);
            auto labels = with(d, "group", state.groups->name_of(gid));
            auto c = st.groups().find(gid);
            add_counters(b, "group", labels, c == st.groups().end() ? stats::Counters{} : c->second);
            auto s = ss.groups.find(gid);
            add_sched(b, "group", labels, s == ss.groups.end() ? sched::EntityStats{} : s->second);
            b.gauge("nbdsched_group_weight", "the group's scheduling weight", labels,
                    static_cast<double>(state.groups->at(gid).weight));
        }
        b.gauge("nbdsched_device_queues", "open client queues", d, static_cast<double>(st.queues().size()));
        add_inflight(b, d, dev->inflight_budget().stats());
        if (auto f = backend::fault_stats(dev->backend())) add_faults(b, d, *f);
    }
    return b.take();
}

} // namespace nbdsched::daemon::metrics
