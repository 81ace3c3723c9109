// Keeps an O_DIRECT read-modify-write of a block apart from every other
// mutation of that block. A read-modify-write reads the partial blocks of
// an unaligned write and writes the enclosing aligned range back: a write,
// zero or trim of one of those blocks landing between the read and the
// write would be undone, although it was acknowledged. So a
// read-modify-write holds its aligned range exclusively, and every other
// mutation holds the bytes it changes shared.
//
// Cheap while no read-modify-write runs: a shared holder then only counts
// itself (two atomic operations, no lock). A read-modify-write that arrives
// makes later holders register their range under the mutex, and waits for
// the counted ones to finish (a Dekker handshake on two counters, both
// sequentially consistent, so one side always sees the other).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <list>
#include <mutex>
#include <optional>

namespace nbdsched::backend {

class BlockGuard {
    struct Entry {
        std::uint64_t start;
        std::uint64_t end;
        bool exclusive;
    };

public:
    // A held range; released when destroyed or by release().
    class Hold {
    public:
        Hold() = default;
        Hold(Hold&& other) noexcept { *this = std::move(other); }
        Hold& operator=(Hold&& other) noexcept;
        ~Hold() { release(); }
        void release();
        bool held() const { return guard_ != nullptr; }

    private:
        friend class BlockGuard;
        BlockGuard* guard_ = nullptr;
        bool counted_ = false;   // the lock-free shared hold: only counted
        std::list<Entry>::iterator entry_;
    };

    // [start, end) in bytes. Blocks until no read-modify-write of these
    // bytes' blocks is running or waiting.
    Hold shared(std::uint64_t start, std::uint64_t end);
    // The same without waiting (an event loop): nullopt while a
    // read-modify-write holds or waits for these bytes; the waker then runs
    // once such a read-modify-write is done.
    std::optional<Hold> try_shared(std::uint64_t start, std::uint64_t end);
    // An aligned [start, end): waits for every shared holder of its bytes
    // and for the read-modify-writes of them that came first.
    Hold exclusive(std::uint64_t start, std::uint64_t end);

    // Called (under the guard's mutex, so it must be quick and must not call
    // back) when a try_shared() that failed may now succeed.
    void set_waker(std::function<void()> waker);

private:
    bool conflicts(const Entry& e, std::list<Entry>::const_iterator until) const;
    Hold counted();
    std::optional<Hold> try_counted();
    Hold registered(std::uint64_t start, std::uint64_t end, bool exclusive);
    void release(Hold& h);

    std::atomic<std::uint64_t> counted_{0};     // lock-free shared holders
    std::atomic<std::uint64_t> exclusive_{0};   // read-modify-writes holding or waiting
    std::mutex mutex_;
    std::condition_variable changed_;
    std::list<Entry> entries_;   // registered holders and waiters, oldest first
    std::function<void()> waker_;
    bool wake_wanted_ = false;   // a try_shared() failed since the last wake
};

}   // namespace nbdsched::backend
