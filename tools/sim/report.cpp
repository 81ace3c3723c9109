#include "tools/sim/report.hpp"

#include <cstdio>
#include <string>

namespace nbdsched::sim {
namespace {

double micros(Nanos d) { return double(d.count()) / 1e3; }

std::string fmt(const char* format, double value) {
    char buf[64];
    std::snprintf(buf, sizeof buf, format, value);
    return buf;
}

void table_row(std::ostream& out, const char* kind, const EntityResult& e) {
    char line[256];
    std::snprintf(line, sizeof line,
                  "%-6s %-16s %-10s %6s %10.0f %9.2f %11.1f %11.1f %11.1f %11.1f %11.1f\n", kind,
                  e.name.c_str(), e.group.c_str(), e.weight ? std::to_string(e.weight).c_str() : "-",
                  e.iops, e.mib_s, e.latency.mean_us, e.latency.stddev_us, e.latency.p99_us,
                  micros(e.wait_max), micros(e.starved_max));
    out << line;
}

std::string quoted(const std::string& s) {
    std::string q = "\"";
    for (char c : s) {
        if (c == '"' || c == '\\') q += '\\';
        if (static_cast<unsigned char>(c) < 0x20) continue;   // names have no control chars worth keeping
        q += c;
    }
    return q + "\"";
}

void json_entity(std::ostream& out, const EntityResult& e, const char* indent) {
    out << indent << "{\"name\": " << quoted(e.name) << ", \"group\": " << quoted(e.group)
        << ", \"weight\": " << e.weight << ", \"ios\": " << e.ios << ", \"bytes\": " << e.bytes
        << ", \"iops\": " << fmt("%.1f", e.iops) << ", \"mib_s\": " << fmt("%.3f", e.mib_s)
        << ", \"lat_mean_us\": " << fmt("%.2f", e.latency.mean_us)
        << ", \"lat_stddev_us\": " << fmt("%.2f", e.latency.stddev_us)
        << ", \"lat_p99_us\": " << fmt("%.2f", e.latency.p99_us)
        << ", \"lat_max_us\": " << fmt("%.2f", e.latency.max_us)
        << ", \"wait_max_us\": " << fmt("%.2f", micros(e.wait_max))
        << ", \"starved_max_us\": " << fmt("%.2f", micros(e.starved_max)) << ", \"expired\": {";
    for (std::size_t i = 0; i < sched::expiry_reasons; ++i)
        out << (i ? ", " : "") << quoted(std::string(sched::to_string(sched::Expiry(i)))) << ": " << e.expired[i];
    out << "}";
    if (e.io_bound) out << ", \"io_bound\": " << (*e.io_bound ? "true" : "false");
    if (e.idle_window) out << ", \"idle_window\": " << (*e.idle_window ? "true" : "false");
    out << "}";
}

void json_list(std::ostream& out, const char* key, const std::vector<EntityResult>& list) {
    out << "  " << quoted(key) << ": [\n";
    for (std::size_t i = 0; i < list.size(); ++i) {
        json_entity(out, list[i], "    ");
        out << (i + 1 < list.size() ? ",\n" : "\n");
    }
    out << "  ],\n";
}

// Why turns ended, a column per reason, over the whole run, and the jobs'
// queue flags; left out while no turn has ended (always with none).
void expiry_table(std::ostream& out, const Results& r) {
    bool any = false;
    for (auto n : r.total.expired) any = any || n;
    if (!any) return;
    out << "turns ended (whole run):\n";
    char cell[64];
    std::snprintf(cell, sizeof cell, "%-6s %-16s", "", "name");
    out << cell;
    for (std::size_t i = 0; i < sched::expiry_reasons; ++i)
        out << " " << std::string(sched::to_string(sched::Expiry(i)));
    out << "  flags\n";
    auto row = [&](const char* kind, const EntityResult& e) {
        std::snprintf(cell, sizeof cell, "%-6s %-16s", kind, e.name.c_str());
        out << cell;
        for (std::size_t i = 0; i < sched::expiry_reasons; ++i) {
            auto width = int(sched::to_string(sched::Expiry(i)).size());
            std::snprintf(cell, sizeof cell, " %*llu", width, static_cast<unsigned long long>(e.expired[i]));
            out << cell;
        }
        if (e.io_bound) out << "  io_bound " << (*e.io_bound ? "yes" : "no");
        if (e.idle_window) out << "  idle_window " << (*e.idle_window ? "yes" : "no");
        out << "\n";
    };
    for (const auto& j : r.jobs) row("job", j);
    for (const auto& g : r.groups) row("group", g);
    row("total", r.total);
}

// Time-weighted share of the measured time at each device depth, as
// "depth: fraction" for the depths that held at least 0.5% of it.
std::string depth_shares(const DepthProfile& d) {
    double total = 0;
    for (Nanos t : d.time_at) total += double(t.count());
    std::string out;
    for (std::size_t k = 0; k < d.time_at.size() && total > 0; ++k) {
        double share = double(d.time_at[k].count()) / total;
        if (share < 0.005) continue;
        out += (out.empty() ? "" : ", ") + std::to_string(k) + ": " + fmt("%.3f", share);
    }
    return out;
}

}   // namespace

void print_table(std::ostream& out, const Results& r) {
    out << "policy " << r.policy << "  profile " << r.profile << "  measured "
        << format_duration(r.measured) << "  device utilisation " << fmt("%.1f%%", 100 * r.utilisation)
        << "  hw_tag " << (r.scheduler.hw_tag ? 1 : 0) << "\n";
    char head[256];
    std::snprintf(head, sizeof head, "%-6s %-16s %-10s %6s %10s %9s %11s %11s %11s %11s %11s\n", "",
                  "name", "group", "weight", "IOPS", "MiB/s", "lat_mean_us", "lat_sd_us",
                  "lat_p99_us", "wait_max_us", "starved_us");
    out << head;
    for (const auto& j : r.jobs) table_row(out, "job", j);
    for (const auto& g : r.groups) table_row(out, "group", g);
    table_row(out, "total", r.total);
    out << "device depth: mean " << fmt("%.2f", r.depth.mean) << ", max " << r.depth.max << " (time at depth "
        << depth_shares(r.depth) << ")";
    if (r.pool_sleeps) out << "; jobs slept on the request pool " << r.pool_sleeps << " times";
    out << "\n";
    expiry_table(out, r);
    if (r.depth_violations || r.late_wakeups)
        out << "WARNING: depth violations " << r.depth_violations << ", late wakeups "
            << r.late_wakeups << "\n";
}

void print_json(std::ostream& out, const Results& r) {
    out << "{\n  \"policy\": " << quoted(r.policy) << ",\n  \"profile\": " << quoted(r.profile)
        << ",\n  \"measured_s\": " << fmt("%.6f", double(r.measured.count()) / 1e9)
        << ",\n  \"utilisation\": " << fmt("%.4f", r.utilisation)
        << ",\n  \"hw_tag\": " << (r.scheduler.hw_tag ? "true" : "false")
        << ",\n  \"submitted\": " << r.submitted << ",\n  \"dispatched\": " << r.dispatched
        << ",\n  \"completed\": " << r.completed
        << ",\n  \"depth_violations\": " << r.depth_violations
        << ",\n  \"late_wakeups\": " << r.late_wakeups << ",\n  \"pool_sleeps\": " << r.pool_sleeps
        << ",\n  \"depth_mean\": " << fmt("%.3f", r.depth.mean) << ",\n  \"depth_max\": " << r.depth.max
        << ",\n  \"depth_time_s\": [";
    for (std::size_t k = 0; k < r.depth.time_at.size(); ++k)
        out << (k ? ", " : "") << fmt("%.6f", double(r.depth.time_at[k].count()) / 1e9);
    out << "],\n";
    json_list(out, "jobs", r.jobs);
    json_list(out, "groups", r.groups);
    out << "  \"total\": ";
    json_entity(out, r.total, "");
    out << "\n}\n";
}

void print_trace_csv(std::ostream& out, const Results& r) {
    out << "at_us,device,queued,pool,sleeping\n";
    for (const auto& d : r.depth.trace)
        out << fmt("%.3f", micros(d.at)) << "," << d.device << "," << d.queued << "," << d.pool << "," << d.sleeping
            << "\n";
}

}   // namespace nbdsched::sim
