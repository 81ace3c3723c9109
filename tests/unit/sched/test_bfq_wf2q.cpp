// B-WF2Q+ service tree on its own.
#include <doctest/doctest.h>

#include <vector>

#include "sched/bfq/wf2q.hpp"

using namespace nbdsched::sched::bfq;

namespace {
// Serves `rounds` budgets of 100 sectors between always-backlogged entities.
std::vector<std::uint64_t> serve(std::vector<Entity>& es, int rounds) {
    ServiceTree t;
    for (auto& e : es) {
        e.budget = 100;
        t.activate(e);
    }
    std::vector<std::uint64_t> got(es.size(), 0);
    for (int i = 0; i < rounds; ++i) {
        Entity* e = t.select();
        REQUIRE(e);
        t.served(*e, 100);
        got[std::size_t(e - es.data())] += 100;
        t.requeue(*e);
    }
    return got;
}
}   // namespace

TEST_CASE("wf2q: backlogged entities share service by weight") {
    std::vector<Entity> es(3);
    es[0].key = 1, es[0].weight = 300;
    es[1].key = 2, es[1].weight = 100;
    es[2].key = 3, es[2].weight = 600;
    auto got = serve(es, 1000);
    CHECK(got[0] == 30000);
    CHECK(got[1] == 10000);
    CHECK(got[2] == 60000);
}

TEST_CASE("wf2q: an entity cannot gain by going idle and coming back") {
    ServiceTree t;
    Entity a, b;
    a.key = 1, b.key = 2;
    a.budget = b.budget = 100;
    t.activate(a);
    t.activate(b);
    Entity* first = t.select();
    REQUIRE(first == &a);   // equal finish: smaller key
    t.served(a, 100);
    t.deactivate(a);   // a's finish is ahead of vtime: kept on idle tree
    CHECK(a.where == Entity::Where::idle);
    t.activate(a);   // back at once: starts at its old finish
    CHECK(a.start == a.finish - vdelta(100, 100));
    CHECK(t.select() == &b);
}

TEST_CASE("wf2q: vtime jumps to the smallest start when nobody is eligible") {
    ServiceTree t;
    Entity a;
    a.key = 1, a.budget = 50;
    t.activate(a);
    Entity* e = t.select();
    t.served(*e, 50);
    t.deactivate(*e);
    std::uint64_t finish = a.finish;
    t.activate(a);   // from the idle tree: start = old finish > vtime
    CHECK(a.start == finish);
    CHECK(t.select() == &a);
    CHECK(t.vtime() == finish);
}
