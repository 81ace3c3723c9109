#include "sched/request.hpp"

namespace nbdsched::sched {

std::string_view to_string(Op op) {
    switch (op) {
    case Op::read: return "read";
    case Op::write: return "write";
    case Op::flush: return "flush";
    case Op::trim: return "trim";
    case Op::write_zeroes: return "write_zeroes";
    }
    return "?";
}

}   // namespace nbdsched::sched
