// SortedArray, where bfq's and cfq's queues keep their pending requests:
// whatever the arrival order (appends, inserts in front and between, after
// removals), the elements stay in key order, and first_not_before() finds
// the first key not below the one asked for.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <set>
#include <vector>

#include "sched/sorted_array.hpp"
#include "test_lcg.hpp"

using nbdsched::sched::SortedArray;

namespace {

struct Item {
    std::uint64_t key;
    int payload;
};
struct ByKey {
    std::uint64_t operator()(const Item& i) const { return i.key; }
};
using Array = SortedArray<Item, ByKey>;

std::vector<std::uint64_t> keys_of(const Array& a) {
    std::vector<std::uint64_t> keys;
    for (const Item& i : a) keys.push_back(i.key);
    return keys;
}

}   // namespace

TEST_CASE("sorted array: appends, inserts in front and between, all in key order") {
    Array a(std::pmr::get_default_resource());
    CHECK(a.insert({10, 1})->payload == 1);   // empty: appended
    CHECK(a.insert({20, 2})->payload == 2);   // past the last: appended
    CHECK(a.insert({5, 3})->payload == 3);    // in front
    CHECK(a.insert({15, 4})->payload == 4);   // between
    CHECK(keys_of(a) == std::vector<std::uint64_t>{5, 10, 15, 20});
    CHECK(a.first_not_before(11)->key == 15);
    CHECK(a.first_not_before(15)->key == 15);
    CHECK(a.first_not_before(0) == a.begin());
    CHECK(a.first_not_before(21) == a.end());
    a.erase(a.first_not_before(10));
    CHECK(keys_of(a) == std::vector<std::uint64_t>{5, 15, 20});
    CHECK(a.size() == 3);
    a.clear();
    CHECK(a.empty());
}

TEST_CASE("sorted array: random inserts and removals match an ordered set") {
    Array a(std::pmr::get_default_resource());
    std::set<std::uint64_t> model;
    nbdsched::sched::test::Lcg rng{7};
    for (int step = 0; step < 5000; ++step) {
        std::uint64_t key = rng.next(1000);
        if (model.count(key)) {   // keys are unique: remove the one there
            auto it = a.first_not_before(key);
            REQUIRE(it != a.end());
            REQUIRE(it->key == key);
            a.erase(it);
            model.erase(key);
        } else {
            a.insert({key, step});
            model.insert(key);
        }
        REQUIRE(a.size() == model.size());
    }
    CHECK(keys_of(a) == std::vector<std::uint64_t>(model.begin(), model.end()));
}
