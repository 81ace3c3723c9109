#include "daemon/metrics/families.hpp"

#include <map>
#include <string>

#include "common/fault_rule.hpp"
#include "daemon/stats/catalog.hpp"

namespace nbdsched::daemon::metrics {

namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;
using Labels = std::vector<ClientMetric::Label>;

Labels with(Labels base, std::string name, std::string value) {
    base.push_back({std::move(name), std::move(value)});
    return base;
}

// Families by name, created on first use, in first-use order.
class Builder {
public:
    void counter(const std::string& name, const std::string& help, Labels labels, double value) {
        add(name, help, MetricType::Counter, std::move(labels)).counter.value = value;
    }
    void gauge(const std::string& name, const std::string& help, Labels labels, double value) {
        add(name, help, MetricType::Gauge, std::move(labels)).gauge.value = value;
    }
    // One stat of the catalog: a counter, a gauge or a part of a summary.
    void stat(const std::string& level, const Labels& labels, const stats::Stat& stat, std::uint64_t raw) {
        const auto& f = *stat.family;
        auto name = stats::family_name(level, f);
        std::string help(f.help);
        auto value = stats::in_base_unit(stat.unit, raw);
        auto l = f.label.empty() ? labels : with(labels, std::string(f.label), std::string(stat.label));
        switch (f.type) {
        case stats::MetricType::counter: return counter(name, help, std::move(l), value);
        case stats::MetricType::gauge: return gauge(name, help, std::move(l), value);
        case stats::MetricType::summary: break;
        }
        auto& m = summary(name, help, std::move(l));
        switch (stat.part) {
        case stats::SummaryPart::count: m.summary.sample_count = raw; break;
        case stats::SummaryPart::sum: m.summary.sample_sum = value; break;
        case stats::SummaryPart::quantile: m.summary.quantile.push_back({stat.quantile, value}); break;
        case stats::SummaryPart::none: break;
        }
    }
    std::vector<MetricFamily> take() { return std::move(families_); }

private:
    ClientMetric& add(const std::string& name, const std::string& help, MetricType type, Labels labels) {
        auto& f = family(name, help, type);
        f.metric.emplace_back();
        f.metric.back().label = std::move(labels);
        return f.metric.back();
    }
    // A summary's parts come one stat at a time and fill one metric per label set.
    ClientMetric& summary(const std::string& name, const std::string& help, Labels labels) {
        auto& f = family(name, help, MetricType::Summary);
        if (!f.metric.empty() && f.metric.back().label == labels) return f.metric.back();
        return add(name, help, MetricType::Summary, std::move(labels));
    }
    MetricFamily& family(const std::string& name, const std::string& help, MetricType type) {
        auto [it, fresh] = index_.try_emplace(name, families_.size());
        if (fresh) families_.push_back(MetricFamily{name, help, type, {}});
        return families_[it->second];
    }
    std::vector<MetricFamily> families_;
    std::map<std::string, std::size_t> index_;
};

// The catalog's stats of one device, export or group; not the scheduler's
// for an export (the scheduler knows no exports).
void add_stats(Builder& b, const std::string& level, const Labels& labels, const control::Numbers& n, bool sched) {
    const auto catalog = stats::catalog();
    for (std::size_t i = 0; i < catalog.size(); ++i)
        if (catalog[i].family && (sched || !catalog[i].from_sched())) b.stat(level, labels, catalog[i], n[i]);
}

// The device's in-flight budget (limits.max_inflight_per_device and its line).
void add_inflight(Builder& b, const Labels& d, const InflightBudget::Stats& s) {
    b.gauge("nbdsched_device_inflight_requests", "requests read from clients and not yet answered", d,
            static_cast<double>(s.requests));
    b.gauge("nbdsched_device_inflight_bytes", "data bytes of those requests", d, static_cast<double>(s.bytes));
    b.counter("nbdsched_device_inflight_waits_total", "times a connection waited in line for the in-flight limit", d,
              static_cast<double>(s.waits));
}

// An operation as requests_total's `op` label spells it, so injected and
// completed join on(op): the faults: rules' "zeroes" is "write_zeroes" here.
std::string op_label(unsigned op) {
    return op == fault_zeroes ? "write_zeroes" : std::string(fault_op_name(op));
}

// What the device's `faults:` rules injected.
void add_faults(Builder& b, const Labels& d, const backend::FaultStats& s) {
    for (unsigned i = 0; i < fault_op_count; ++i)
        b.counter("nbdsched_device_injected_errors_total", "errors the faults: rules injected, by operation",
                  with(d, "op", op_label(1u << i)), static_cast<double>(s.errors[i]));
    b.counter("nbdsched_device_injected_delays_total", "requests the faults: rules delayed", d,
              static_cast<double>(s.delayed));
}

// What the io_uring engine does with cohorts.
void add_cohorts(Builder& b, const Labels& d, const backend::CohortStats& s) {
    b.gauge("nbdsched_device_io_cohorts_on", "1 while the file device sends O_DIRECT requests in cohorts", d,
            s.on ? 1.0 : 0.0);
    b.counter("nbdsched_device_io_cohort_trials_total", "trials of the device's clients with and without cohorts", d,
              static_cast<double>(s.trials));
    b.counter("nbdsched_device_io_cohort_trials_held_off_total",
              "trials that held cohorts off: the clients were served faster without", d,
              static_cast<double>(s.held_off));
}

// What a group's reserve, limit and latency target did on the device.
void add_qos(Builder& b, const Labels& g, const sched::QosGroupStats& s) {
    auto seconds = [](Nanos d) { return std::chrono::duration<double>(d).count(); };
    b.counter("nbdsched_group_throttled_seconds_total", "time the group's limit held requests back", g,
              seconds(s.throttled_time));
    b.counter("nbdsched_group_limit_delayed_requests_total", "requests the group's limit held back", g,
              static_cast<double>(s.limit_delayed));
    b.counter("nbdsched_group_below_reservation_seconds_total",
              "time the group had requests outstanding and was owed service below its reservation", g,
              seconds(s.below_reservation));
    b.counter("nbdsched_group_reserved_dispatches_total", "requests dispatched ahead of the policy for the reservation",
              g, static_cast<double>(s.reserved_dispatches));
    b.counter("nbdsched_group_latency_windows_total", "windows judged against the group's latency target", g,
              static_cast<double>(s.latency_windows));
    b.counter("nbdsched_group_latency_target_misses_total", "windows whose latency p90 missed the group's target", g,
              static_cast<double>(s.latency_misses));
    b.gauge("nbdsched_group_protect_depth", "requests each unprotected group may keep outstanding for this group", g,
            static_cast<double>(s.depth_cap));
}

}   // namespace

std::vector<MetricFamily> collect(const control::StatsSnapshot& snapshot) {
    Builder b;
    for (const auto& dev : snapshot.devices) {
        Labels d{{"device", dev.name}};
        add_stats(b, "device", d, dev.numbers, true);
        for (const auto& [name, numbers] : dev.exports) add_stats(b, "export", with(d, "export", name), numbers, false);
        for (std::size_t id = 0; id < dev.groups.size(); ++id) {
            const auto& group = snapshot.groups[id];
            auto labels = with(d, "group", group.name);
            add_stats(b, "group", labels, dev.groups[id].numbers, true);
            b.gauge("nbdsched_group_weight", "the group's scheduling weight", labels, static_cast<double>(group.weight));
            if (dev.groups[id].qos) add_qos(b, labels, *dev.groups[id].qos);
        }
        b.gauge("nbdsched_device_queues", "open client queues", d, static_cast<double>(dev.queues.size()));
        b.gauge("nbdsched_device_lock_lost",
                "1 while the device's lock, given up in a failed hand-over, is not back (writes fail, EROFS)", d,
                dev.lock_lost ? 1.0 : 0.0);
        b.gauge("nbdsched_device_storage_failed",
                "1 once the storage failed to persist acknowledged data: FLUSH and FUA fail until a restart", d,
                dev.storage_error ? 1.0 : 0.0);
        add_inflight(b, d, dev.inflight);
        if (dev.memory_bytes)
            b.gauge("nbdsched_device_memory_bytes", "bytes of the daemon's memory holding the device's data (RAM)", d,
                    static_cast<double>(*dev.memory_bytes));
        if (dev.faults) add_faults(b, d, *dev.faults);
        if (dev.cohorts) add_cohorts(b, d, *dev.cohorts);
    }
    return b.take();
}

std::vector<MetricFamily> collect(const control::DaemonState& state) {
    return collect(control::take_snapshot(state));
}

}   // namespace nbdsched::daemon::metrics
