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

TEST_CASE("wf2q: weights keep sharing service after virtual time wraps at 2^64") {
    // Weight-1 entities charged 2^31 sectors (max_budget at its maximum) move
    // the virtual time by 2^53 / wsum per budget: it wraps within 8192 budgets.
    ServiceTree t;
    std::vector<Entity> es(2);
    es[0].key = 1, es[0].weight = 1;
    es[1].key = 2, es[1].weight = 2;
    constexpr std::uint64_t budget = std::uint64_t(1) << 31;
    for (auto& e : es) {
        e.budget = budget;
        t.activate(e);
    }
    int wraps = 0;
    std::uint64_t last = t.vtime();
    std::vector<std::uint64_t> got(2, 0);
    for (int i = 0; i < 30000; ++i) {
        Entity* e = t.select();
        REQUIRE(e);
        t.served(*e, budget);
        got[std::size_t(e - es.data())] += 1;
        // Every other budget the first entity goes idle and comes back at
        // once: from the idle tree, across the wrap too.
        if (e == &es[0] && i % 2 == 0) {
            t.deactivate(*e);
            t.activate(*e);
        } else {
            t.requeue(*e);
        }
        if (t.vtime() < last) ++wraps;
        last = t.vtime();
    }
    CHECK(wraps >= 2);
    CHECK(got[0] == 10000);
    CHECK(got[1] == 20000);
}

TEST_CASE("wf2q: the idle tree forgets entities in virtual-time order across the wrap") {
    // Two entities go idle with finishes ahead of a virtual time just below
    // 2^64, at least one of them past the wrap. They stay on the idle tree
    // (and in wsum) until the virtual time passes them, and no longer.
    ServiceTree t;
    Entity a, b, c;
    a.key = 1, b.key = 2, c.key = 3;
    a.weight = b.weight = c.weight = 1;
    constexpr std::uint64_t budget = std::uint64_t(1) << 31;
    a.budget = b.budget = c.budget = budget;
    t.activate(a);
    t.activate(b);
    t.activate(c);
    // Serve round robin until vtime is within one budget of the wrap (it
    // moves by 2^53 / 3 per budget).
    const std::uint64_t near_wrap = ~std::uint64_t(0) - vdelta(budget, 1);
    while (t.vtime() < near_wrap) {
        Entity* e = t.select();
        REQUIRE(e);
        t.served(*e, budget);
        t.requeue(*e);
    }
    // Two go idle with their finish ahead of vtime, while c stays
    // backlogged.
    bool wrapped = false;
    for (int idle = 0; idle < 2;) {
        Entity* e = t.select();
        REQUIRE(e);
        t.served(*e, budget);
        if (e == &c) {
            t.requeue(*e);
            continue;
        }
        t.deactivate(*e);
        CHECK(e->where == Entity::Where::idle);
        wrapped = wrapped || e->finish < t.vtime();
        ++idle;
    }
    CHECK(wrapped);
    // c runs alone until vtime has passed both finishes.
    for (int i = 0; i < 64 && t.wsum() > 1; ++i) {
        Entity* e = t.select();
        REQUIRE(e == &c);
        t.served(c, budget);
        t.requeue(c);
    }
    CHECK(t.wsum() == 1);
    CHECK(a.where == Entity::Where::none);
    CHECK(b.where == Entity::Where::none);
}
