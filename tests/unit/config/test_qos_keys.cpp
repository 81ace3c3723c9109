// groups[].reserve, .limit and .latency_target: what loads, and the errors.
#include "helpers.hpp"

using namespace nbdsched;
using namespace nbdsched::config;
using namespace nbdsched::config::test;

TEST_CASE("qos keys: reserve, limit with burst, latency_target load with units") {
    auto r = load(std::string(R"(groups:
  - name: db
    weight: 500
    reserve: {iops: 200, bps: 20MiB}
    limit: {iops: 2000, bps: 200MiB, burst: 250ms}
    latency_target: 10ms
  - {name: batch, limit: {iops: 20}}
)") + minimal_tail);
    INFO(all_errors(r));
    REQUIRE(r.config);
    const Group* db = r.config->find_group("db");
    REQUIRE(db);
    CHECK(db->qos.reserve.iops == 200);
    CHECK(db->qos.reserve.bps == 20ull << 20);
    CHECK(db->qos.limit.iops == 2000);
    CHECK(db->qos.limit.bps == 200ull << 20);
    CHECK(db->qos.burst == std::chrono::milliseconds(250));
    CHECK(db->qos.latency_target == std::chrono::milliseconds(10));
    const Group* batch = r.config->find_group("batch");
    REQUIRE(batch);
    CHECK(batch->qos.limit.iops == 20);
    CHECK(batch->qos.burst == sched::qos::default_burst);
    CHECK_FALSE(batch->qos.reserve.set());
    CHECK_FALSE(r.config->find_group("default")->qos.any());
}

TEST_CASE("qos keys: a limit below the reservation is an error at the limit") {
    auto r = load(std::string(R"(groups:
  - name: db
    reserve: {iops: 60}
    limit: {iops: 20}
  - name: web
    limit: {bps: 1MiB}
    reserve: {bps: 2MiB}
)") + minimal_tail);
    expect_error(r, "groups[0].limit", 4, 12, "limit iops 20 is below reserve iops 60");
    expect_error(r, "groups[1].limit", 6, 12, "limit bps 1MiB is below reserve bps 2MiB");
    CHECK(r.errors.size() == 2);
}

TEST_CASE("qos keys: bad values name the key and the position") {
    auto r = load(std::string(R"(groups:
  - {name: a, reserve: {iops: 0}}
  - {name: b, limit: {bps: lots}}
  - {name: c, limit: {iops: 5, burst: 0ms}}
  - {name: d, latency_target: soon}
  - {name: e, reserve: {burst: 1s}}
  - {name: f, limit: {}}
)") + minimal_tail);
    expect_error(r, "groups[0].reserve.iops", 2, 31, "out of range: 0");
    expect_error(r, "groups[1].limit.bps", 3, 28, "lots");
    expect_error(r, "groups[2].limit.burst", 4, 39, "expected a duration from 1ms to 10s");
    expect_error(r, "groups[3].latency_target", 5, 31, "expected a duration");
    expect_error(r, "groups[4].reserve.burst", 6, 25, "unknown key");
    expect_error(r, "groups[5].limit", 7, 22, "needs iops:, bps: or both");
}
