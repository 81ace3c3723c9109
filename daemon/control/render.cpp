#include "daemon/control/render.hpp"

#include <algorithm>
#include <cstdio>

#include "common/units.hpp"
#include "common/utf8.hpp"
#include "daemon/stats/catalog.hpp"

namespace nbdsched::daemon::control {

namespace {

// A value as a table cell. Strings (export names, peers) come from outside:
// a control character or a stray byte shows as \xNN, so a name cannot
// break the table or send escape sequences to the terminal.
std::string num(const Json& j) {
    if (j.is_number_float()) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.0f", j.get<double>());
        return buf;
    }
    if (j.is_number()) return j.dump();
    if (j.is_string()) return printable(j.get_ref<const std::string&>());
    if (j.is_boolean()) return j.get<bool>() ? "yes" : "no";
    return "-";
}

// One decimal in the largest unit that leaves at least 1 ("1.3GiB").
std::string one_decimal(std::uint64_t v) {
    static const char* names[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double d = static_cast<double>(v);
    int unit = 0;
    while (unit < 4 && d >= 1024) {
        d /= 1024;
        ++unit;
    }
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f%s", d, names[unit]);
    return buf;
}

// Exact when it is a whole number of units ("64MiB"), else one decimal ("1.3GiB").
std::string bytes(const Json& j) {
    if (!j.is_number_unsigned()) return num(j);
    auto v = j.get<std::uint64_t>();
    auto exact = format_size(v);
    return exact.size() <= 8 ? exact : one_decimal(v);
}

// Memory held is rarely a whole number of KiB (page tables): exact only below
// 1024 of its unit ("64KiB", "512B"), else one decimal ("8.0MiB", not "8224KiB").
std::string memory(const Json& j) {
    if (!j.is_number_unsigned()) return num(j);
    auto v = j.get<std::uint64_t>();
    auto exact = format_size(v);
    return v < 1024 || exact.find_first_not_of("0123456789") <= 3 ? exact : one_decimal(v);
}

const Json& at(const Json& j, std::string_view key) {
    static const Json null;
    auto it = j.find(std::string(key));
    return it == j.end() ? null : *it;
}

bool flag(const Json& j) {
    return j.is_boolean() && j.get<bool>();
}

// The counter columns shared by every row kind, from the catalog: `c` holds
// the daemon's counters, `s` the scheduler's view (null for an export).
std::vector<std::string> counter_cells(const Json& c, const Json& s) {
    std::vector<std::string> cells;
    for (const auto& stat : stats::catalog()) {
        if (stat.column.empty()) continue;
        const auto& value = at(stat.from_sched() ? s : c, stat.key);
        cells.push_back(stat.unit == stats::Unit::bytes ? bytes(value) : num(value));
    }
    return cells;
}

std::vector<std::string> header(const std::string& first) {
    std::vector<std::string> names{first};
    for (const auto& stat : stats::catalog())
        if (!stat.column.empty()) names.emplace_back(stat.column);
    return names;
}

std::vector<std::string> row(std::string first, std::vector<std::string> rest) {
    rest.insert(rest.begin(), std::move(first));
    return rest;
}

// "iops 200, bps 20MiB" from a reserve/limit object; "-" when unset.
std::string rate_text(const Json& rate) {
    std::string out;
    if (at(rate, "iops").is_number() && at(rate, "iops") != 0) out = num(at(rate, "iops")) + " IOPS";
    if (at(rate, "bps").is_number() && at(rate, "bps") != 0)
        out += (out.empty() ? "" : " ") + bytes(at(rate, "bps")) + "/s";
    return out.empty() ? "-" : out;
}

std::string ms_text(const Json& v) {
    if (!v.is_number()) return "-";
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.0fms", v.get<double>());
    return buf;
}

// "reserve 60 IOPS, limit -, target 50ms" for `ctl list`.
std::string qos_text(const Json& q) {
    const Json& target = at(q, "latency_target_ms");
    return "reserve " + rate_text(at(q, "reserve")) + ", limit " + rate_text(at(q, "limit")) + ", target " +
           (target.is_number() && target.get<double>() > 0 ? ms_text(target) : "-");
}

// The groups with reserve/limit/latency_target: settings and what they did.
std::string render_qos(const Json& groups) {
    Table t({"qos", "reserve", "limit", "target", "throttled", "delayed", "below floor", "floor disp", "lat misses",
             "p90", "others' depth"});
    bool any = false;
    for (const auto& g : groups) {
        if (!g.contains("qos")) continue;
        any = true;
        const Json& q = at(g, "qos");
        const Json& s = at(q, "stats");
        const double target = at(q, "latency_target_ms").is_number() ? at(q, "latency_target_ms").get<double>() : 0;
        t.add({"group " + num(at(g, "name")), rate_text(at(q, "reserve")), rate_text(at(q, "limit")),
               target > 0 ? ms_text(at(q, "latency_target_ms")) : "-", ms_text(at(s, "throttled_ms")),
               num(at(s, "limit_delayed")), ms_text(at(s, "below_reservation_ms")), num(at(s, "reserved_dispatches")),
               num(at(s, "latency_misses")) + "/" + num(at(s, "latency_windows")), ms_text(at(s, "last_p90_ms")),
               at(s, "depth_cap") == 0 ? "-" : num(at(s, "depth_cap"))});
    }
    return any ? t.str("  ") : std::string();
}

// A row's name in the `ctl stats` tables: "group g1 w100", "queue 3 e0/g1".
std::string group_label(const Json& g) {
    return "group " + num(at(g, "name")) + " w" + num(at(g, "weight"));
}

std::string queue_label(const Json& q) {
    return "queue " + num(at(q, "id")) + " " + num(at(q, "export")) + "/" + num(at(q, "group"));
}

// A file device's cohorts on its heading line: "" without them.
std::string render_cohorts(const Json& d) {
    if (!d.contains("io_cohorts")) return "";
    const Json& c = at(d, "io_cohorts");
    const std::string tried = num(at(c, "trials"));
    const std::string trials = tried + (tried == "1" ? " trial, " : " trials, ") + num(at(c, "held_off")) + " held them off";
    if (flag(at(c, "on"))) return ", cohorts on (" + trials + ")";
    if (flag(at(c, "passes"))) return ", cohorts held off (" + trials + ")";
    return ", cohorts off, no passes lately (" + trials + ")";
}

// Why queue turns ended (the expired_* keys), a column per reason, and the
// queues' flags (io_bound for bfq, idle_window for cfq) where they are set.
// Left out while no turn has ended and no queue has a flag (always with none).
std::string render_expiries(const Json& d) {
    std::vector<std::string> head{"turns ended"};
    std::vector<std::string_view> keys;
    for (const auto& stat : stats::catalog()) {
        if (!stats::is_expiry(stat)) continue;
        head.emplace_back(stat.label);
        keys.push_back(stat.key);
    }
    std::vector<std::string_view> flags;
    for (std::string_view f : {"io_bound", "idle_window"})
        for (const auto& q : at(d, "queues"))
            if (at(at(q, "sched"), f).is_boolean()) {
                flags.push_back(f);
                head.emplace_back(f);
                break;
            }
    bool any = !flags.empty();
    for (auto key : keys) any = any || (at(at(d, "sched"), key).is_number() && at(at(d, "sched"), key) != 0);
    if (!any) return {};
    auto cells = [&](std::string first, const Json& s, bool queue) {
        std::vector<std::string> r{std::move(first)};
        for (auto key : keys) r.push_back(num(at(s, key)));
        for (auto f : flags) r.push_back(queue ? num(at(s, f)) : "");
        return r;
    };
    Table t(std::move(head));
    t.add(cells("device", at(d, "sched"), false));
    for (const auto& g : at(d, "groups"))
        t.add(cells(group_label(g), at(g, "sched"), false));
    for (const auto& q : at(d, "queues")) t.add(cells(queue_label(q), at(q, "sched"), true));
    return t.str("  ");
}

}   // namespace

namespace {

// Columns on a terminal: code points, not bytes ("laté" is 4 wide; wide
// CJK characters would take 2, which is not worth a table here).
std::size_t columns(const std::string& cell) {
    return static_cast<std::size_t>(
        std::count_if(cell.begin(), cell.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

}   // namespace

std::string Table::str(const std::string& indent) const {
    std::vector<std::size_t> width;
    for (const auto& r : rows_) {
        if (width.size() < r.size()) width.resize(r.size(), 0);
        for (std::size_t i = 0; i < r.size(); ++i) width[i] = std::max(width[i], columns(r[i]));
    }
    std::string out;
    for (const auto& r : rows_) {
        std::string line = indent;
        for (std::size_t i = 0; i < r.size(); ++i) {
            std::string pad(width[i] - columns(r[i]), ' ');
            line += i == 0 ? r[i] + pad : "  " + pad + r[i];
        }
        while (!line.empty() && line.back() == ' ') line.pop_back();
        out += line + "\n";
    }
    return out;
}

std::string render_list(const Json& reply) {
    std::string out = "groups:\n";
    Table groups({"group", "weight", "qos"});
    for (const auto& g : at(reply, "groups"))
        groups.add({num(at(g, "name")), num(at(g, "weight")) + (flag(at(g, "from_cgroup")) ? " (cgroup)" : ""),
                    g.contains("qos") ? qos_text(at(g, "qos")) : ""});
    out += groups.str("  ");
    for (const auto& d : at(reply, "devices")) {
        out += "device " + num(at(d, "name")) + ": scheduler " + num(at(d, "scheduler")) + ", " +
               bytes(at(d, "size")) + (flag(at(d, "rotational")) ? ", rotational" : ", non-rotational") +
               (d.contains("io_engine") ? ", I/O on " + num(at(d, "io_engine")) : "") + "\n";
        std::string tunables;
        for (const auto& [name, value] : at(d, "tunables").items()) tunables += " " + name + "=" + num(value);
        if (!tunables.empty()) out += "  tunables:" + tunables + "\n";
        Table exports({"export", "offset", "size", "group", "ro"});
        for (const auto& e : at(d, "exports"))
            exports.add({num(at(e, "name")), bytes(at(e, "offset")), bytes(at(e, "size")), num(at(e, "group")),
                         num(at(e, "read_only"))});
        out += exports.str("  ");
        Table queues({"queue", "export", "group", "peer"});
        for (const auto& q : at(d, "queues"))
            queues.add({num(at(q, "id")), num(at(q, "export")), num(at(q, "group")), num(at(q, "peer"))});
        out += at(d, "queues").empty() ? "  no open queues\n" : queues.str("  ");
    }
    return out;
}

std::string render_stats(const Json& reply) {
    std::string out;
    for (const auto& d : at(reply, "devices")) {
        out += "device " + num(at(d, "name")) + " (" + num(at(d, "scheduler")) +
               (flag(at(d, "hw_tag")) ? ", queueing" : "") +
               (d.contains("memory_bytes") ? ", memory " + memory(at(d, "memory_bytes")) : "") + render_cohorts(d) +
               (flag(at(d, "lock_lost")) ? ", lock lost: writes fail until it is back" : "") +
               (d.contains("storage_error") && at(d, "storage_error").is_string()
                    ? ", storage failed (" + num(at(d, "storage_error")) + "): FLUSH and FUA fail"
                    : "") +
               "):\n";
        Table t(header(""));
        t.add(row("device", counter_cells(at(d, "counters"), at(d, "sched"))));
        for (const auto& e : at(d, "exports")) t.add(row("export " + num(at(e, "name")), counter_cells(e, Json())));
        for (const auto& g : at(d, "groups"))
            t.add(row(group_label(g), counter_cells(at(g, "counters"), at(g, "sched"))));
        for (const auto& q : at(d, "queues")) t.add(row(queue_label(q), counter_cells(at(q, "counters"), at(q, "sched"))));
        out += t.str("  ");
        out += render_expiries(d);
        out += render_qos(at(d, "groups"));
    }
    return out;
}

std::string render_faults(const Json& reply) {
    const auto rules = at(reply, "rules");
    std::string out = "device " + num(at(reply, "device")) + ": faults " + (flag(at(reply, "enabled")) ? "on" : "off") +
                      ", " + num(rules) + (rules == 1 ? " rule" : " rules") + "\n";
    // The columns are the reply's own keys, so they follow what `stats` reports.
    std::vector<std::string> names{""}, values{"injected"};
    for (const auto& [name, value] : at(reply, "faults").items()) {
        names.push_back(name);
        values.push_back(num(value));
    }
    Table t(std::move(names));
    t.add(std::move(values));
    return out + t.str("  ");
}

}   // namespace nbdsched::daemon::control
