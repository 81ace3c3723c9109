// daemon/control/render: the ctl tables come from the JSON replies.
#include <doctest/doctest.h>

#include <algorithm>

#include "daemon/control/render.hpp"

using namespace nbdsched::daemon::control;

TEST_CASE("table columns align and numbers right-align") {
    Table t({"name", "n"});
    t.add({"a", "1"});
    t.add({"longer", "1234"});
    CHECK(t.str() == "name       n\na          1\nlonger  1234\n");
}

TEST_CASE("stats and list render from their JSON") {
    auto stats = Json::parse(R"({"ok":true,"devices":[{"name":"d0","scheduler":"cfq","hw_tag":true,
        "counters":{"reads":5,"writes":2,"read_bytes":20480,"write_bytes":8192,"latency_p50_us":12.4},
        "sched":{"slices":3,"idle_ms":1.5},
        "exports":[{"name":"a","reads":5}],
        "groups":[{"name":"gold","weight":1000,"counters":{"reads":5},"sched":{"slices":3}}],
        "queues":[{"id":1,"export":"a","group":"gold","peer":"unix pid 1","counters":{"reads":5},"sched":{}}]}]})");
    auto text = render_stats(stats);
    CHECK(text.find("device d0 (cfq, queueing):") == 0);
    CHECK(text.find("group gold w1000") != std::string::npos);
    CHECK(text.find("queue 1 a/gold") != std::string::npos);
    CHECK(text.find("20KiB") != std::string::npos);
    CHECK(text.find("export a") != std::string::npos);

    auto list = Json::parse(R"({"ok":true,"groups":[{"name":"gold","weight":1000,"from_cgroup":false}],
        "devices":[{"name":"d0","scheduler":"bfq","size":1048576,"rotational":false,
        "exports":[{"name":"a","offset":0,"size":1048576,"group":"gold","read_only":false}],"queues":[]}]})");
    auto l = render_list(list);
    CHECK(l.find("gold") != std::string::npos);
    CHECK(l.find("device d0: scheduler bfq, 1MiB, non-rotational") != std::string::npos);
    CHECK(l.find("no open queues") != std::string::npos);
    // missing fields render as "-", never throw
    CHECK_NOTHROW(render_stats(Json::parse(R"({"devices":[{"name":"x"}]})")));
}

TEST_CASE("names with control characters are escaped, one line per row, widths in characters") {
    Json names;
    names["a"] = "q\"uo\\te\nnl";
    names["b"] = "clear\x1b[2J";
    names["c"] = "lat\xc3\xa9";
    auto stats = Json::parse(R"({"devices":[{"name":"d0","scheduler":"cfq","counters":{},"sched":{},
        "exports":[],"groups":[],"queues":[]}]})");
    for (const auto& [key, name] : names.items()) {
        Json e;
        e["name"] = name;
        e["reads"] = 1;
        stats["devices"][0]["exports"].push_back(e);
    }
    auto text = render_stats(stats);
    CHECK(text.find('\x1b') == std::string::npos);
    CHECK(text.find("export clear\\x1b[2J") != std::string::npos);
    CHECK(text.find("export q\"uo\\te\\x0anl") != std::string::npos);
    CHECK(std::count(text.begin(), text.end(), '\n') == 6);   // device line, header, device, 3 exports

    auto list = Json::parse(R"({"groups":[],"devices":[{"name":"d0","scheduler":"cfq","size":1,"rotational":false,
        "exports":[],"queues":[]}]})");
    for (const auto& [key, name] : names.items())
        list["devices"][0]["exports"].push_back({{"name", name}, {"offset", 0}, {"size", 1}, {"group", "g"}, {"read_only", false}});
    auto l = render_list(list);
    CHECK(l.find('\x1b') == std::string::npos);
    CHECK(l.find("nl") == l.find("q\"uo\\te\\x0anl") + 11);   // on the name's own line
    Table t({"name", "n"});
    t.add({"lat\xc3\xa9", "1"});
    t.add({"late", "22"});
    CHECK(t.str() == "name   n\nlat\xc3\xa9   1\nlate  22\n");
}

TEST_CASE("ctl stats shows why queue turns ended, and the queues' flags, in a table of their own") {
    auto stats = Json::parse(R"({"devices":[{"name":"d0","scheduler":"bfq",
        "counters":{},"sched":{"slices":3,"expired_too_idle":2,"expired_budget_exhausted":1},
        "groups":[{"name":"gold","weight":100,"counters":{},"sched":{"expired_too_idle":2,"expired_budget_exhausted":1}}],
        "queues":[{"id":1,"export":"a","group":"gold","counters":{},
                   "sched":{"expired_too_idle":2,"expired_budget_exhausted":1,"io_bound":false}}]}]})");
    auto text = render_stats(stats);
    CAPTURE(text);
    auto at = text.find("\n  turns ended      too_idle  budget_timeout  budget_exhausted  no_more_requests  "
                        "preempted  seeky_turn_ended  slice_used  closed  io_bound\n");
    REQUIRE(at != std::string::npos);
    auto table = text.substr(at);
    CHECK(table.find("\n  device                  2               -                 1") != std::string::npos);
    CHECK(table.find("\n  group gold w100         2               -                 1") != std::string::npos);
    CHECK(table.find("\n  queue 1 a/gold          2               -                 1") != std::string::npos);
    CHECK(table.substr(table.size() - 4) == " no\n");   // the queue's flag, on its row
    // The main table keeps its columns; no turns ended yet: no second table.
    CHECK(text.find("slices  idle_ms") != std::string::npos);
    CHECK(render_stats(Json::parse(R"({"devices":[{"name":"d0","scheduler":"none","sched":{"expired_too_idle":0}}]})"))
              .find("turns ended") == std::string::npos);
}

TEST_CASE("ctl stats names a device whose lock is lost, and only that one") {
    auto stats = Json::parse(R"({"ok":true,"devices":[{"name":"img","scheduler":"none","hw_tag":false,
        "lock_lost":true},{"name":"ram","scheduler":"none","hw_tag":false,"lock_lost":false}]})");
    auto text = render_stats(stats);
    CHECK(text.find("device img (none, lock lost: writes fail until it is back):") == 0);
    CHECK(text.find("device ram (none):") != std::string::npos);
}

TEST_CASE("ctl stats shows a device's memory in size units, and none where the backend has no such number") {
    auto stats = Json::parse(R"({"ok":true,"devices":[{"name":"ram","scheduler":"bfq","hw_tag":true,
        "memory_bytes":8421376},{"name":"small","scheduler":"none","memory_bytes":65536},
        {"name":"file","scheduler":"none"}]})");
    auto text = render_stats(stats);
    CHECK(text.find("device ram (bfq, queueing, memory 8.0MiB):") == 0);
    CHECK(text.find("device small (none, memory 64KiB):") != std::string::npos);
    CHECK(text.find("device file (none):") != std::string::npos);
}

TEST_CASE("ctl stats says what a file device's engine does with cohorts, and nothing for a device without them") {
    auto stats = Json::parse(R"({"ok":true,"devices":[
        {"name":"on","scheduler":"none","io_cohorts":{"passes":true,"on":true,"trials":1,"held_off":0}},
        {"name":"held","scheduler":"none","io_cohorts":{"passes":true,"on":false,"trials":3,"held_off":1}},
        {"name":"flat","scheduler":"none","io_cohorts":{"passes":false,"on":false,"trials":0,"held_off":0}},
        {"name":"ram","scheduler":"none"}]})");
    auto text = render_stats(stats);
    CHECK(text.find("device on (none, cohorts on (1 trial, 0 held them off)):") == 0);
    CHECK(text.find("device held (none, cohorts held off (3 trials, 1 held them off)):") != std::string::npos);
    CHECK(text.find("device flat (none, cohorts off, no passes lately (0 trials, 0 held them off)):") !=
          std::string::npos);
    CHECK(text.find("device ram (none):") != std::string::npos);
}

TEST_CASE("ctl faults renders the switch, the rule count and the counts") {
    auto reply = Json::parse(R"({"ok":true,"device":"d0","enabled":false,"rules":1,
        "faults":{"errors":2,"read_errors":0,"write_errors":2,"enospc":0,"delayed":0}})");
    auto text = render_faults(reply);
    CHECK(text.find("device d0: faults off, 1 rule\n") == 0);
    CHECK(text.find("\n  injected       2") != std::string::npos);
    CHECK(text.find("errors  read_errors  write_errors  enospc  delayed\n") != std::string::npos);
    reply["enabled"] = true;
    reply["rules"] = 3;
    CHECK(render_faults(reply).find("device d0: faults on, 3 rules\n") == 0);
    CHECK_NOTHROW(render_faults(Json::parse("{}")));
}
