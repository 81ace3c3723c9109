#include "common/fault_rule.hpp"

namespace nbdsched {

std::string_view fault_op_name(unsigned op) {
    switch (op) {
    case fault_read: return "read";
    case fault_write: return "write";
    case fault_flush: return "flush";
    case fault_trim: return "trim";
    case fault_zeroes: return "zeroes";
    default: return "";
    }
}

}   // namespace nbdsched
