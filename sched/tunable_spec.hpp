// One run-time tunable of a policy, described once: its name, unit, default,
// range, whether it takes `auto`, and why it exists. Parsing, clamping,
// printing, error messages and the docs' tables all read this description
// (the typed table that binds it to a field is tunable_table.hpp).
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "common/units.hpp"
#include "sched/scheduler.hpp"

namespace nbdsched::sched {

// What a value counts, so how it is parsed, held and printed.
enum class Unit : std::uint8_t {
    duration,   // "8ms", "100us"; a bare number is milliseconds as in sysfs; held in ns
    count,      // a whole number
    kib,        // a bare number is KiB as in sysfs, sizes ("16MiB") too; held in KiB; at most kMaxKib
    sectors,    // a whole number of 512-byte sectors
    flag,       // 0 or 1 (also off/on, false/true, no/yes); held as 0/1
};

inline constexpr std::uint64_t kNoLimit = std::numeric_limits<std::uint64_t>::max();

// The most a `kib` tunable takes, INT_MAX KiB (just under 2 TiB): the
// kernel's bfq caps back_seek_max there (block/bfq-iosched.c, its store
// function), and cfq held it in an unsigned int. Above it is refused, not
// clamped: the policies double the KiB into sectors, and cfq's field is 32 bits.
inline constexpr std::uint64_t kMaxKib = std::numeric_limits<std::int32_t>::max();

// A duration in the held unit, for a table's min/max.
constexpr std::uint64_t in_ns(Nanos d) { return std::uint64_t(d.count()); }

// A value the device decides (an `auto` value, a device limit), held in the
// tunable's unit, and the words the docs use for it.
struct DeviceValue {
    std::uint64_t (*of)(const DeviceTraits&) = nullptr;
    std::string_view text;
};

// The seed default of cfq's and bfq's slice_idle: idle on a disk, where a
// seek costs more than the wait; not on flash.
std::uint64_t idle_on_rotational(const DeviceTraits& device);
inline constexpr DeviceValue kIdleOnRotational{idle_on_rotational, "8ms on a rotational device, 0 otherwise"};

struct TunableSpec {
    std::string_view name;   // the kernel's sysfs name
    Unit unit = Unit::count;
    std::string_view default_value;   // as a config writes it: "8ms", "2", "auto"
    std::uint64_t min = 0;            // in the held unit (ns, KiB, sectors, ...)
    std::uint64_t max = kNoLimit;
    // Below min: clamped up like the kernel's store functions, unless this is set.
    bool below_min_is_error = false;
    DeviceValue auto_value{};   // set: "auto" is accepted and means this
    DeviceValue device_max{};   // set: a further upper limit from the device
    std::string_view why;       // one line, shown in the docs
};

// `text` parsed for `spec` on `device`, clamped to the spec's range; or an
// error in one format for every policy, e.g.
// "slice_idle: bad duration 'x' (want a duration, e.g. 8ms, 100us, 0, or auto)".
struct ParsedTunable {
    std::uint64_t value = 0;
    std::string error;
};
ParsedTunable parse_tunable(const TunableSpec& spec, std::string_view text, const DeviceTraits& device);

// What `get` prints: "8ms", "0", "16384", "1".
std::string format_tunable(const TunableSpec& spec, std::uint64_t value);

std::vector<std::string> tunable_names(const std::vector<TunableSpec>& specs);

// A policy's specs in table order; empty for an unknown policy (factory.cpp,
// the one place that knows every policy).
std::vector<TunableSpec> tunable_specs(std::string_view policy);

// "cfq has no tunable 'x' (it has: slice_idle, ...)"
std::string unknown_tunable_error(std::string_view policy, const std::vector<TunableSpec>& specs,
                                  std::string_view name);

// The Markdown table of docs/schedulers-<policy>.md: tunable, default,
// values, what it does; one row per spec, in table order.
std::string tunables_markdown(const std::vector<TunableSpec>& specs);

}   // namespace nbdsched::sched
