// limits: bounds on what clients can make the daemon hold.
#include "config/parsers.hpp"

namespace nbdsched::config::detail {
namespace {

// Every NBD client caps requests at 32 MiB (the spec's recommended maximum),
// and a block smaller than a sector cannot be served efficiently.
constexpr std::uint64_t min_request = 512;
constexpr std::uint64_t max_request = 32u << 20;

// limits.drain_timeout: a shutdown with 0 would drop every in-flight
// request and skip the final flush, so 0 and below get a message of their own.
std::optional<std::chrono::milliseconds> drain_timeout(Reader& r, const Field& f) {
    auto text = r.string(f);
    if (!text) return std::nullopt;
    std::string_view value = *text;
    const bool negative = value.starts_with('-');
    auto d = parse_duration(negative ? value.substr(1) : value);
    if (!d) {
        r.error(f, "expected a duration from 1ms to 1h, e.g. 10s or 2500ms");
        return std::nullopt;
    }
    if (negative || *d < std::chrono::milliseconds(1)) {
        r.error(f, "must be at least 1ms (got " + *text +
                       "): a shutdown would give in-flight requests and the final flush no time at all");
        return std::nullopt;
    }
    if (*d > std::chrono::hours(1)) {
        r.error(f, "too long: at most 1h (systemd's TimeoutStopSec must exceed it, docs/systemd.md)");
        return std::nullopt;
    }
    return std::chrono::duration_cast<std::chrono::milliseconds>(*d);
}

// limits.stall_timeout: 0 is off. Under a second would close clients that
// a busy host or a network hiccup merely slowed.
std::optional<std::chrono::milliseconds> stall_timeout(Reader& r, const Field& f) {
    auto text = r.string(f);
    if (!text) return std::nullopt;
    auto d = parse_duration(*text);
    if (d && *d == Nanos(0)) return std::chrono::milliseconds(0);
    if (!d || *d < std::chrono::seconds(1) || *d > std::chrono::hours(24)) {
        r.error(f, "expected 0 (off) or a duration from 1s to 24h, e.g. 60s");
        return std::nullopt;
    }
    return std::chrono::duration_cast<std::chrono::milliseconds>(*d);
}

// limits.busy_poll and limits.coalesce: `auto` (adaptive, at `automatic`'s
// window) or a fixed window from 0 (off) to 1ms; a bare number is in us.
std::optional<LoopWindow> auto_or_window(Reader& r, const Field& f, LoopWindow automatic) {
    auto text = r.string(f);
    if (!text) return std::nullopt;
    if (*text == "auto") return automatic;
    auto d = parse_duration(*text, std::chrono::microseconds(1));
    if (!d || *d < Nanos(0) || *d > std::chrono::milliseconds(1)) {
        r.error(f, "expected auto or a duration from 0 to 1ms, e.g. 50us");
        return std::nullopt;
    }
    return LoopWindow{std::chrono::duration_cast<std::chrono::microseconds>(*d), false};
}

}   // namespace

void parse_limits(Reader& r, const Field& field, Limits& limits) {
    std::map<std::string, Field, std::less<>> seen;
    r.read_map(field,
               {"max_connections", "max_handshakes", "max_inflight_per_connection", "max_inflight_bytes_per_connection",
                "max_request_bytes", "max_inflight_per_device", "max_inflight_bytes_per_device", "io_threads",
                "inflight_fair_share", "handshake_timeout", "drain_timeout", "stall_timeout", "max_handshake_options",
                "busy_poll", "coalesce", "threads", "spread_connections"},
               [&](const Field& f) {
                   if (f.key == "max_connections") {
                       if (auto v = r.integer(f, 1, 1000000)) limits.max_connections = unsigned(*v);
                   } else if (f.key == "max_handshakes") {
                       if (auto v = r.integer(f, 1, 1000000)) limits.max_handshakes = unsigned(*v);
                   } else if (f.key == "max_inflight_per_connection") {
                       if (auto v = r.integer(f, 1, 65536)) limits.max_inflight_per_connection = unsigned(*v);
                   } else if (f.key == "max_inflight_per_device") {
                       if (auto v = r.integer(f, 1, 1000000)) limits.max_inflight_per_device = unsigned(*v);
                   } else if (f.key == "inflight_fair_share") {
                       if (auto v = r.boolean(f)) limits.inflight_fair_share = *v;
                   } else if (f.key == "spread_connections") {
                       if (auto v = r.boolean(f)) limits.spread_connections = *v;
                   } else if (f.key == "handshake_timeout") {
                       auto text = r.string(f);
                       auto d = text ? parse_duration(*text) : std::nullopt;
                       if (text && (!d || *d < std::chrono::milliseconds(1) || *d > std::chrono::hours(1)))
                           return r.error(f, "expected a duration from 1ms to 1h, e.g. 10s");
                       if (d) limits.handshake_timeout = std::chrono::duration_cast<std::chrono::milliseconds>(*d);
                   } else if (f.key == "drain_timeout") {
                       if (auto d = drain_timeout(r, f)) limits.drain_timeout = *d;
                       else return;
                   } else if (f.key == "stall_timeout") {
                       if (auto d = stall_timeout(r, f)) limits.stall_timeout = *d;
                       else return;
                   } else if (f.key == "busy_poll") {
                       if (auto w = auto_or_window(r, f, Limits::busy_poll_auto)) limits.busy_poll = *w;
                   } else if (f.key == "coalesce") {
                       if (auto w = auto_or_window(r, f, Limits::coalesce_auto)) limits.coalesce = *w;
                   } else if (f.key == "max_handshake_options") {
                       if (auto v = r.integer(f, 1, 65536)) limits.max_handshake_options = unsigned(*v);
                   } else if (f.key == "threads") {
                       if (auto v = r.integer(f, 1, 1024)) limits.threads = unsigned(*v);
                   } else if (f.key == "io_threads") {
                       if (auto v = r.integer(f, 1, 1024)) limits.io_threads = unsigned(*v);
                   } else if (f.key == "max_request_bytes") {
                       auto v = r.size(f);
                       if (v && (*v < min_request || *v > max_request))
                           return r.error(f, "out of range: " + std::to_string(*v) + " (allowed 512 bytes to 32MiB)");
                       if (v) limits.max_request_bytes = std::uint32_t(*v);
                   } else if (auto v = r.size(f)) {
                       (f.key == "max_inflight_bytes_per_connection" ? limits.max_inflight_bytes_per_connection
                                                                     : limits.max_inflight_bytes_per_device) = *v;
                   } else {
                       return;
                   }
                   seen.emplace(f.key, f);
               });
    // A byte budget below one maximal request would stall any client that sends one.
    for (std::string_view key : {"max_inflight_bytes_per_connection", "max_inflight_bytes_per_device"}) {
        auto it = seen.find(key);
        std::uint64_t budget = key == "max_inflight_bytes_per_device" ? limits.max_inflight_bytes_per_device
                                                                      : limits.max_inflight_bytes_per_connection;
        if (budget >= limits.max_request_bytes) continue;
        const Field& at = it != seen.end() ? it->second : seen.at("max_request_bytes");
        r.error(at, std::string(key) + " (" + std::to_string(budget) + ") is below max_request_bytes (" +
                        std::to_string(limits.max_request_bytes) + ")");
    }
}

}   // namespace nbdsched::config::detail
