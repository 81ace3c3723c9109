// Checks across sections: unique names, references that resolve, export
// windows inside their devices.
#include <map>

#include "common/units.hpp"

#include "config/parsers.hpp"
#include "config/suggest.hpp"

namespace nbdsched::config::detail {
namespace {

// Reports every entry whose name an earlier entry already has; returns the
// first entry of each name.
template <class T>
std::map<std::string, const Parsed<T>*, std::less<>> index_unique(Reader& r, const std::vector<Parsed<T>>& entries,
                                                                  std::string_view what) {
    std::map<std::string, const Parsed<T>*, std::less<>> by_name;
    for (const auto& entry : entries) {
        auto [it, inserted] = by_name.emplace(entry.value.name, &entry);
        if (!inserted)
            r.error(entry.where("name"), entry.key("name"),
                    "duplicate " + std::string(what) + " name '" + entry.value.name + "' (first at " +
                        it->second->where("name").str() + ")");
    }
    return by_name;
}

template <class Map>
std::string unknown(std::string_view what, const std::string& name, const Map& known) {
    std::vector<std::string_view> names;
    for (const auto& [n, _] : known) names.push_back(n);
    return "unknown " + std::string(what) + " '" + name + "'" + did_you_mean(name, names);
}

template <class T, class Map>
void require(Reader& r, const Parsed<T>& entry, std::string_view key, const std::string& name,
             std::string_view what, const Map& known) {
    if (!known.count(name)) r.error(entry.where(key), entry.key(key), unknown(what, name, known));
}

// offset/size against the device, without overflowing offset + size.
void check_window(Reader& r, const Parsed<Export>& p, const Device& device) {
    const Export& e = p.value;
    if (device.size == 0) return;   // a file device's size is known only when it is opened
    std::string where = "device '" + device.name + "' (" + format_size(device.size) + ")";
    if (e.offset >= device.size) {
        r.error(p.where("offset"), p.key("offset"),
                "offset " + format_size(e.offset) + " is at or past the end of " + where);
    } else if (e.size && *e.size > device.size - e.offset) {
        r.error(p.where("size"), p.key("size"),
                "window " + format_size(e.offset) + " + " + format_size(*e.size) + " ends past the end of " + where);
    }
}

}   // namespace

void resolve(Reader& r, Sections& s, Config& config) {
    // "default" always exists; declaring it only changes its weight.
    bool has_default = false;
    for (const auto& g : s.groups) has_default = has_default || g.value.name == "default";
    if (!has_default) {
        Parsed<Group> implicit;
        implicit.value.name = "default";
        implicit.value.origin = Origin{r.file(), 0, 0};
        s.groups.insert(s.groups.begin(), implicit);
    }
    auto devices = index_unique(r, s.devices, "device");
    check_shared_storage(r, s.devices);
    check_shared_images(r, s.devices);
    auto exports = index_unique(r, s.exports, "export");
    auto groups = index_unique(r, s.groups, "group");

    for (const auto& d : s.devices) {
        if (d.at.count("default_group")) require(r, d, "default_group", d.value.default_group, "group", groups);
    }
    for (const auto& e : s.exports) {
        if (!e.value.group.empty()) require(r, e, "group", e.value.group, "group", groups);
        if (e.value.device.empty()) continue;
        auto dev = devices.find(e.value.device);
        if (dev == devices.end()) require(r, e, "device", e.value.device, "device", devices);
        else check_window(r, e, dev->second->value);
    }
    for (const auto& rule : s.rules) {
        require(r, rule, "group", rule.value.group, "group", groups);
        if (rule.value.export_name && !exports.count(*rule.value.export_name))
            r.error(rule.where("export"), rule.key("match.export"), unknown("export", *rule.value.export_name, exports));
    }

    for (auto& d : s.devices) config.devices.push_back(std::move(d.value));
    for (auto& e : s.exports) config.exports.push_back(std::move(e.value));
    for (auto& g : s.groups) config.groups.push_back(std::move(g.value));
    for (auto& rule : s.rules) config.rules.push_back(std::move(rule.value));
}

}   // namespace nbdsched::config::detail
