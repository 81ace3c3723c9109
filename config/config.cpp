// The small members of the schema types: printing and look-ups.
#include "config/config.hpp"

#include <algorithm>

namespace nbdsched::config {
namespace {

template <class T>
const T* find_by_name(const std::vector<T>& items, std::string_view name) {
    auto it = std::find_if(items.begin(), items.end(), [&](const T& item) { return item.name == name; });
    return it == items.end() ? nullptr : &*it;
}

}   // namespace

std::string Origin::str() const {
    if (line <= 0) return file;
    return file + ":" + std::to_string(line) + ":" + std::to_string(column);
}

std::string Error::str() const {
    std::string out = origin.str();
    if (!key.empty()) out += (out.empty() ? "" : ": ") + key;
    if (!message.empty()) out += (out.empty() ? "" : ": ") + message;
    return out;
}

backend::Spec Device::backend_spec() const {
    std::optional<bool> fixed_rotational;
    if (rotational != Tristate::automatic) fixed_rotational = rotational == Tristate::yes;
    return {name, backend, size, path, direct, fixed_rotational, faults, rbd, io_engine, huge_pages, io_cohorts};
}

const Device* Config::find_device(std::string_view name) const { return find_by_name(devices, name); }
const Export* Config::find_export(std::string_view name) const { return find_by_name(exports, name); }
const Group* Config::find_group(std::string_view name) const { return find_by_name(groups, name); }

}   // namespace nbdsched::config
