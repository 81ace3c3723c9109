// A 4 KiB request at offset id * 4 KiB, for scheduler tests that only care
// which queue and group it belongs to.
#pragma once

#include "sched/request.hpp"

namespace nbdsched::sched::test {

inline Request make_request(RequestId id, QueueId queue, GroupId group = 0) {
    Request r;
    r.id = id;
    r.queue = queue;
    r.group = group;
    r.offset = id * 4096;
    r.length = 4096;
    return r;
}

}   // namespace nbdsched::sched::test
