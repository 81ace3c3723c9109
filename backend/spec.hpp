// What a backend is built from: where the data lives and how it is opened.
// The configuration layer fills one of these per device, so backend/ does
// not need to know the YAML schema.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/fault_rule.hpp"

namespace nbdsched::backend {

enum class Kind { ram,
                  file };

struct Spec {
    std::string name;   // the device's name, for error messages
    Kind kind = Kind::ram;
    std::uint64_t size = 0;           // bytes; file: 0 = use the existing file's size
    std::string path;                 // file only
    bool direct = false;              // O_DIRECT
    std::optional<bool> rotational;   // nullopt = detect (see resolve_rotational)
    std::vector<FaultRule> faults;    // fault injection (testing); empty = none
};

}   // namespace nbdsched::backend
