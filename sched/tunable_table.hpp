// A policy's tunables bound to the fields of its settings struct T: one row
// per tunable (TunableSpec plus the field it sets), and the generic code that
// builds the defaults, sets, gets and lists from those rows. A policy writes
// its rows once (e.g. sched/cfq/tunables.cpp) and nothing else: a new row is
// parsed, checked in configs, shown by `ctl get/set/list`, and the doc test
// (unit-sched-tunables) prints the docs' table to paste.
#pragma once

#include <algorithm>
#include <optional>
#include <span>
#include <type_traits>

#include "common/units.hpp"
#include "sched/tunable_spec.hpp"

namespace nbdsched::sched {

// How the generic code reads and writes one field of T, in the held unit.
// Made by field<&T::member>, so each row names its field once.
template <class T>
struct TunableField {
    std::uint64_t (*load)(const T&);
    void (*store)(T&, std::uint64_t);
};

namespace detail {

template <class M>
struct MemberOf;
template <class C, class V>
struct MemberOf<V C::*> {
    using Class = C;
    using Value = V;
};

template <auto Member>
struct FieldAccess {
    using C = typename MemberOf<decltype(Member)>::Class;
    using V = typename MemberOf<decltype(Member)>::Value;

    static std::uint64_t load(const C& t) {
        if constexpr (std::is_same_v<V, Nanos>) return std::uint64_t((t.*Member).count());
        else return std::uint64_t(t.*Member);
    }
    // Values past what the field's type holds are clamped to it.
    static void store(C& t, std::uint64_t value) {
        if constexpr (std::is_same_v<V, Nanos>)
            t.*Member = Nanos(std::int64_t(std::min<std::uint64_t>(value, std::numeric_limits<std::int64_t>::max())));
        else if constexpr (std::is_same_v<V, bool>) t.*Member = value != 0;
        else t.*Member = V(std::min<std::uint64_t>(value, std::numeric_limits<V>::max()));
    }
};

}   // namespace detail

template <auto Member>
inline constexpr TunableField<typename detail::MemberOf<decltype(Member)>::Class> field{
    detail::FieldAccess<Member>::load, detail::FieldAccess<Member>::store};

template <class T>
struct Tunable {
    TunableSpec spec;
    TunableField<T> field;
    // Runs after a store, given the values before it: for a tunable that
    // moves another (bfq's strict_guarantees raises slice_idle).
    void (*after_store)(T& now, const T& before) = nullptr;
};

template <class T>
class TunableTable {
public:
    constexpr TunableTable(std::string_view policy, std::span<const Tunable<T>> rows)
        : policy_(policy), rows_(rows) {}

    std::string_view policy() const { return policy_; }

    std::vector<TunableSpec> specs() const {
        std::vector<TunableSpec> out;
        for (const auto& row : rows_) out.push_back(row.spec);
        return out;
    }

    std::vector<std::string> names() const { return tunable_names(specs()); }

    // Every row's default, `auto` resolved for this device.
    T defaults(const DeviceTraits& device) const {
        T t{};
        for (const auto& row : rows_) row.field.store(t, parse_tunable(row.spec, row.spec.default_value, device).value);
        return t;
    }

    // Parses and stores one value; returns an error message (and leaves `t`
    // as it was), empty on success.
    std::string set(T& t, const DeviceTraits& device, std::string_view name, std::string_view value) const {
        const Tunable<T>* row = find(name);
        if (!row) return unknown_tunable_error(policy_, specs(), name);
        ParsedTunable parsed = parse_tunable(row->spec, value, device);
        if (!parsed.error.empty()) return parsed.error;
        const T before = t;
        row->field.store(t, parsed.value);
        if (row->after_store) row->after_store(t, before);
        return {};
    }

    std::optional<std::string> get(const T& t, std::string_view name) const {
        const Tunable<T>* row = find(name);
        if (!row) return std::nullopt;
        return format_tunable(row->spec, row->field.load(t));
    }

    // The defaults with `overrides` applied; nullopt and `error` on the first bad one.
    std::optional<T> build(const DeviceTraits& device, const Tunables& overrides, std::string& error) const {
        T t = defaults(device);
        for (const auto& [name, value] : overrides) {
            error = set(t, device, name, value);
            if (!error.empty()) return std::nullopt;
        }
        return t;
    }

private:
    const Tunable<T>* find(std::string_view name) const {
        auto it = std::find_if(rows_.begin(), rows_.end(), [&](const auto& row) { return row.spec.name == name; });
        return it == rows_.end() ? nullptr : &*it;
    }

    std::string_view policy_;
    std::span<const Tunable<T>> rows_;
};

}   // namespace nbdsched::sched
