// CFQ's one-way elevator inside a queue (cfq_choose_req / cfq_find_next_rq)
// and the seek heuristics (CFQQ_SEEKY, the non-rotational small-request rule).
#include <doctest/doctest.h>

#include <vector>

#include "sched/cfq/queue.hpp"

using namespace nbdsched;
using namespace nbdsched::sched;
using namespace nbdsched::sched::cfq;

namespace {

Request at_sector(RequestId id, std::uint64_t sector, std::uint64_t bytes = 4096) {
    Request r;
    r.id = id;
    r.offset = sector * 512;
    r.length = bytes;
    return r;
}

// Dispatches everything in next_rq order, as CFQ would with no FIFO expiry.
std::vector<RequestId> elevator_order(CfqQueue& q, const ElevatorParams& e) {
    std::vector<RequestId> order;
    while (!q.empty()) order.push_back(q.remove_for_dispatch(*q.next_rq, e).id);
    return order;
}

}   // namespace

TEST_CASE("cfq elevator: short backward seeks cost back_seek_penalty, long ones wrap") {
    const ElevatorParams e{16 * 1024 * 2, 2};   // back_seek_max 16 MiB in sectors, penalty 2
    CfqQueue q(0, QueueId{1}, nullptr, true, Time{});
    const std::uint64_t head = 100000;
    q.add(at_sector(1, head + 100), Time{}, head, e);   // ahead by 100
    q.add(at_sector(2, head - 40), Time{}, head, e);    // behind by 40: costs 80
    CHECK(q.next()->req.id == 2);

    CfqQueue p(1, QueueId{2}, nullptr, true, Time{});
    const ElevatorParams harsh{16 * 1024 * 2, 3};   // 40 * 3 = 120 > 100
    p.add(at_sector(1, head + 100), Time{}, head, harsh);
    p.add(at_sector(2, head - 40), Time{}, head, harsh);
    CHECK(p.next()->req.id == 1);

    CfqQueue far(2, QueueId{3}, nullptr, true, Time{});
    far.add(at_sector(1, head + 50000), Time{}, head, e);
    far.add(at_sector(2, head - 40000), Time{}, head, e);   // beyond back_seek_max: wraps
    CHECK(far.next()->req.id == 1);
}

TEST_CASE("cfq elevator: sweeps forward from the head, then wraps to the lowest sector") {
    const ElevatorParams e{0, 2};   // no backward seeks at all
    CfqQueue q(0, QueueId{1}, nullptr, true, Time{});
    const std::uint64_t head = 2500;
    for (auto [id, sector] : std::vector<std::pair<RequestId, std::uint64_t>>{
             {1, 5000}, {2, 100}, {3, 3000}, {4, 2000}, {5, 9000}})
        q.add(at_sector(id, sector), Time{}, head, e);
    CHECK(elevator_order(q, e) == std::vector<RequestId>{3, 1, 5, 2, 4});
}

TEST_CASE("cfq seek history: distance on disks, request size on flash") {
    CfqQueue disk(0, QueueId{1}, nullptr, true, Time{});
    for (std::uint64_t i = 0; i < 32; ++i) {
        Request r = at_sector(i, i * 128, 65536);   // contiguous 64 KiB
        disk.update_seek(r, true);
        disk.last_request_pos = r.offset / 512 + r.sectors();
    }
    CHECK_FALSE(disk.seeky());
    for (std::uint64_t i = 0; i < 5; ++i) {
        Request r = at_sector(100 + i, 10'000'000 * (i + 1));   // far jumps
        disk.update_seek(r, true);
        disk.last_request_pos = r.offset / 512 + r.sectors();
    }
    CHECK(disk.seeky());

    CfqQueue flash(1, QueueId{2}, nullptr, true, Time{});
    for (std::uint64_t i = 0; i < 5; ++i) flash.update_seek(at_sector(i, i * 8, 4096), false);
    CHECK(flash.seeky());   // 4 KiB requests count as seeks on flash even if contiguous
    for (std::uint64_t i = 0; i < 32; ++i) flash.update_seek(at_sector(i, 1'000'000 * i, 32768), false);
    CHECK_FALSE(flash.seeky());   // 32 KiB (64 sectors) is not small
}
