// Handler slots: a pending Asio operation's memory kept by its owner, and a
// detached slot that outlives an owner gone before its operation (run under
// AddressSanitizer in CI: a slot freed with the owner is a use after free).
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <doctest/doctest.h>
#include <memory>
#include <optional>

#include "daemon/device/handler_slot.hpp"

using namespace nbdsched::daemon;

TEST_CASE("a slot lends its block to one operation at a time") {
    HandlerSlot slot;
    void* first = slot.allocate(64);
    void* second = slot.allocate(64);   // the block is taken: a new one
    CHECK(first != second);
    slot.deallocate(second);
    slot.deallocate(first);
    CHECK(slot.allocate(64) == first);   // free again
    slot.deallocate(first);
    void* big = slot.allocate(4096);   // larger than the block
    CHECK(big != first);
    slot.deallocate(big);
}

TEST_CASE("a posted handler runs from its slot, and the slot is free again for the next") {
    boost::asio::io_context io;
    HandlerSlot slot;
    int ran = 0;
    boost::asio::post(io, in_slot(slot, [&] { ++ran; }));
    io.run();
    io.restart();
    boost::asio::post(io, in_slot(slot, [&] { ++ran; }));
    io.run();
    CHECK(ran == 2);
    void* block = slot.allocate(16);
    slot.deallocate(block);
}

TEST_CASE("a detached slot outlives its owner until the pending operation is done with it") {
    SUBCASE("the handler runs after the owner is gone") {
        boost::asio::io_context io;
        int ran = 0;
        {
            DetachedSlot slot;
            boost::asio::post(io, in_slot(*slot, [&] { ++ran; }));
        }   // the owner goes first
        io.run();
        CHECK(ran == 1);
    }
    SUBCASE("the handler is destroyed unrun with its io_context") {
        auto ran = std::make_shared<int>(0);
        {
            std::optional<boost::asio::io_context> io(std::in_place);
            {
                DetachedSlot slot;
                boost::asio::post(*io, in_slot(*slot, [ran] { ++*ran; }));
            }
            io.reset();
        }
        CHECK(*ran == 0);
        CHECK(ran.use_count() == 1);   // the handler was destroyed
    }
    SUBCASE("an owner with nothing pending frees its slot at once") {
        DetachedSlot slot;
        void* block = (*slot).allocate(16);
        (*slot).deallocate(block);
    }
}
