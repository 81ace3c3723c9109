// The file backend's io_uring engine (backend/file_uring.hpp), driven as the
// daemon's event loop drives it: submit_pending(), wait for the eventfd,
// reap(). Skipped where the kernel refuses a ring or the build has none.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <linux/filter.h>
#include <linux/fs.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <map>
#include <random>
#include <thread>
#include <vector>

#include "backend/features.hpp"
#include "backend/file_backend.hpp"
#include "backend/file_io.hpp"
#include "backend/file_uring.hpp"
#include "case_report.hpp"
#include "concurrent_rmw.hpp"
#include "pattern.hpp"
#include "temp_dir.hpp"

using namespace nbdsched::backend;
using namespace nbdsched::testlib;

namespace {

// Collects completions by tag (an index).
struct Sink final : CompletionSink {
    std::map<std::uintptr_t, int> done;
    std::size_t calls = 0;
    void completed(void*, int) override { FAIL("a loop-driven backend reported from elsewhere"); }
    void completed_on_loop(void* tag, int error) override {
        ++calls;
        done[reinterpret_cast<std::uintptr_t>(tag)] = error;
    }
};

void* tag(std::uintptr_t i) { return reinterpret_cast<void*>(i); }

// The backend with a ring, or nullptr (the case is recorded as skipped).
std::unique_ptr<FileBackend> open_ring(const std::string& path, std::uint64_t size, bool direct, Sink& sink,
                                       bool cohorts = true) {
    if (!io_uring_available()) {
        record_skip("io_uring is not built in (meson -Dio_uring)");
        return nullptr;
    }
    std::string error;
    auto b = FileBackend::open({path, size, direct, true, cohorts}, error);
    if (!b && direct && error.find("O_DIRECT is not supported") != std::string::npos) {
        record_skip(error);
        return nullptr;
    }
    INFO(error);
    REQUIRE(b != nullptr);
    if (!b->async()) {
        record_skip("no io_uring here: " + b->io_uring_error());
        return nullptr;
    }
    REQUIRE(b->async()->completion_fd() >= 0);
    CHECK(b->describe().find("(io_uring)") != std::string::npos);
    b->async()->set_sink(&sink);
    return b;
}

// What the event loop does until `sink` has `count` completions (5 s at most).
void run_until(AsyncBackend& a, Sink& sink, std::size_t count) {
    for (int turns = 0; sink.done.size() < count && turns < 500; ++turns) {
        a.submit_pending();
        pollfd p{a.completion_fd(), POLLIN, 0};
        std::uint64_t n = 0;
        if (::poll(&p, 1, 10) == 1) REQUIRE(::read(a.completion_fd(), &n, sizeof n) == sizeof n);
        a.reap(n);
    }
    REQUIRE(sink.done.size() == count);
    CHECK_FALSE(a.pending());
}

std::span<std::byte> span(AlignedBuffer& b) { return b.span(); }

// What the rule hears from a disk that completes in passes: every signal of
// the eventfd brings all the requests in the kernel.
void seen_passes(FileUring& ring) {
    for (int i = 0; i < 200; ++i) ring.cohorts().reaped(64, 64, 1);
    REQUIRE(ring.cohorts().on());
}

// io_uring_enter fails with EAGAIN on the calling thread from now on, as
// when the kernel cannot allocate the requests: a seccomp filter without
// TSYNC binds this thread only (and goes with it), and no new privileges
// means no root is needed. The thread makes only native system calls, so
// the filter does not check the architecture. False: no seccomp here.
bool refuse_io_uring_enter_on_this_thread() {
    sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_enter, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EAGAIN & SECCOMP_RET_DATA)),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    sock_fprog prog{static_cast<unsigned short>(sizeof filter / sizeof filter[0]), filter};
    return ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 && ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0;
}

}   // namespace

TEST_CASE("io_uring: writes, FUA writes, a flush and reads back, buffered and O_DIRECT, 64 at a time") {
    for (bool direct : {false, true}) {
        CAPTURE(direct);
        TempDir dir;
        Sink sink;
        auto b = open_ring(dir.file("d.img"), 4 << 20, direct, sink);
        if (!b) return;
        AsyncBackend& a = *b->async();
        constexpr std::size_t n = 64, len = 8192;
        std::vector<AlignedBuffer> out, in;
        for (std::size_t i = 0; i < n; ++i) {
            out.emplace_back(len, 4096);
            auto p = byte_pattern(i * 3 * len, len, 7);
            std::memcpy(out.back().data(), p.data(), len);
            in.emplace_back(len, 4096);
            CHECK(a.takes(AsyncOp::write, i * 3 * len, len, out.back().data()));
            a.submit_write(i * 3 * len, span(out.back()), i % 4 == 0, tag(i));
        }
        CHECK(a.pending());
        run_until(a, sink, n);
        a.submit_flush(tag(n));
        run_until(a, sink, n + 1);
        for (std::size_t i = 0; i < n; ++i) a.submit_read(i * 3 * len, span(in[i]), tag(100 + i));
        run_until(a, sink, 2 * n + 1);
        for (const auto& done : sink.done)   // no structured binding: clang 14 cannot capture one
            CHECK_MESSAGE(done.second == 0, "tag " << done.first << ": " << std::strerror(done.second));
        for (std::size_t i = 0; i < n; ++i) CHECK(is_pattern(in[i].span(), i * 3 * len, 7));
        CHECK(sink.calls == sink.done.size());   // each once
        // The synchronous path sees what the ring wrote.
        AlignedBuffer back(len, 4096);
        REQUIRE(b->read(5 * 3 * len, back.span()) == 0);
        CHECK(is_pattern(back.span(), 5 * 3 * len, 7));
    }
}

TEST_CASE("io_uring: an O_DIRECT write in flight with a read-modify-write of its block is not undone") {
    // The ring's write is submitted and reaped on this thread (the loop);
    // the unaligned write runs as on the pool.
    TempDir dir;
    Sink sink;
    constexpr int rounds = 200;
    auto b = open_ring(dir.file("d.img"), rounds * rmw_block, true, sink);
    if (!b) return;
    AsyncBackend& a = *b->async();
    AlignedBuffer data(rmw_block, rmw_block);
    std::uintptr_t n = 0;
    const int undone = undone_rounds(
        *b, rounds,
        [&](std::uint64_t at) {
            const auto p = byte_pattern(at, rmw_block, 3);
            std::memcpy(data.data(), p.data(), rmw_block);
            REQUIRE(a.takes(AsyncOp::write, at, rmw_block, data.data()));
            a.submit_write(at, span(data), false, tag(n));
            run_until(a, sink, ++n);
            return sink.done[n - 1];
        },
        [](std::span<const std::byte> rest, std::uint64_t at) { return is_pattern(rest, at, 3); });
    MESSAGE(undone << " of " << rounds << " rounds lost the ring's write");
    CHECK(undone == 0);
}

TEST_CASE("io_uring: what it leaves to the thread pool") {
    TempDir dir;
    Sink sink;
    auto b = open_ring(dir.file("d.img"), 1 << 20, true, sink);
    if (!b) return;
    AsyncBackend& a = *b->async();
    AlignedBuffer buf(8192, 4096);
    CHECK(a.takes(AsyncOp::read, 4096, 4096, buf.data()));
    CHECK(a.takes(AsyncOp::flush, 0, 0, nullptr));
    CHECK_FALSE(a.takes(AsyncOp::read, 512, 4096, buf.data()));       // unaligned offset: bounced
    CHECK_FALSE(a.takes(AsyncOp::write, 4096, 100, buf.data()));      // partial block: read-modify-write
    CHECK_FALSE(a.takes(AsyncOp::write, 0, 4096, buf.data() + 16));   // unaligned buffer
    CHECK_FALSE(a.takes(AsyncOp::trim, 0, 4096, nullptr));            // fallocate
    CHECK_FALSE(a.takes(AsyncOp::write_zeroes, 0, 4096, nullptr));
    CHECK(a.takes(AsyncOp::read, 0, 1 << 20, buf.data()));   // O_DIRECT: no copy, any size

    Sink other;
    auto buffered = open_ring(dir.file("b.img"), 4 << 20, false, other);
    REQUIRE(buffered);
    AsyncBackend& c = *buffered->async();
    CHECK(c.takes(AsyncOp::read, 512, 100, buf.data() + 1));   // buffered: no alignment
    CHECK(c.takes(AsyncOp::write, 0, FileBackend::kCachedReadMax, buf.data()));
    CHECK_FALSE(c.takes(AsyncOp::read, 0, FileBackend::kCachedReadMax + 1, buf.data()));   // a big copy
    CHECK_FALSE(c.takes(AsyncOp::write, 0, 1 << 20, buf.data()));
}

TEST_CASE("io_uring: a read past the end of a file that shrank reads zeros; out of range is EINVAL") {
    TempDir dir;
    const auto path = dir.file("d.img");
    Sink sink;
    auto b = open_ring(path, 1 << 20, false, sink);
    if (!b) return;
    AsyncBackend& a = *b->async();
    REQUIRE(b->write(0, byte_pattern(0, 16384, 3), false) == 0);
    REQUIRE(::truncate(path.c_str(), 6000) == 0);   // behind the backend's back
    AlignedBuffer across(16384, 4096), past(4096, 4096), beyond(4096, 4096);
    std::memset(across.data(), 0xff, across.size());
    std::memset(past.data(), 0xff, past.size());
    a.submit_read(0, span(across), tag(1));         // short: 6000 bytes, then end of file
    a.submit_read(65536, span(past), tag(2));       // wholly past the end
    a.submit_read(1 << 20, span(beyond), tag(3));   // past the device: refused at once
    run_until(a, sink, 3);
    CHECK(sink.done[1] == 0);
    CHECK(sink.done[2] == 0);
    CHECK(sink.done[3] == EINVAL);
    CHECK(is_pattern(across.span().first(6000), 0, 3));
    CHECK(all_zero(across.span().subspan(6000)));
    CHECK(all_zero(past.span()));
    CHECK(b->size() == 1 << 20);
}

TEST_CASE("io_uring: a write to a read-only file is EROFS, its flush a no-op; a kernel error is the errno") {
    TempDir dir;
    const auto path = dir.file("d.img");
    {
        std::string error;
        REQUIRE(FileBackend::open({path, 1 << 20, false}, error) != nullptr);
    }
    REQUIRE(::chmod(path.c_str(), 0400) == 0);
    // Root ignores the mode: the immutable flag refuses it an O_RDWR open too.
    int flags = 0;
    const int fd = ::open(path.c_str(), O_RDONLY);
    REQUIRE(fd >= 0);
    const bool immutable = ::geteuid() == 0 && ::ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0 &&
                           (flags |= FS_IMMUTABLE_FL, ::ioctl(fd, FS_IOC_SETFLAGS, &flags) == 0);
    if (::geteuid() == 0 && !immutable) {
        ::close(fd);
        SKIP_TEST("root, and this filesystem has no immutable flag to make the file read-only");
    }
    Sink sink;
    auto b = open_ring(path, 1 << 20, false, sink);
    if (b) {
        CHECK(b->read_only());
        AsyncBackend& a = *b->async();
        AlignedBuffer buf(4096, 4096);
        a.submit_write(0, span(buf), false, tag(1));
        a.submit_write(4096, span(buf), true, tag(2));
        a.submit_flush(tag(3));
        a.submit_read(0, span(buf), tag(4));
        run_until(a, sink, 4);
        CHECK(sink.done[1] == EROFS);
        CHECK(sink.done[2] == EROFS);
        CHECK(sink.done[3] == 0);
        CHECK(sink.done[4] == 0);
    }
    if (immutable) {
        flags &= ~FS_IMMUTABLE_FL;
        CHECK(::ioctl(fd, FS_IOC_SETFLAGS, &flags) == 0);
    }
    ::close(fd);
}

TEST_CASE("io_uring: the kernel's error comes back as the request's errno") {
    TempDir dir;
    Sink sink;
    auto b = open_ring(dir.file("d.img"), 1 << 20, false, sink);
    if (!b) return;
    AsyncBackend& a = *b->async();
    // Its descriptor replaced by a write-only one behind its back: the
    // kernel refuses the read (EBADF), and that is the answer.
    const int wronly = ::open(dir.file("other").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    REQUIRE(wronly >= 0);
    REQUIRE(::dup2(wronly, b->fd()) == b->fd());
    ::close(wronly);
    AlignedBuffer buf(4096, 4096);
    a.submit_read(0, span(buf), tag(1));
    a.submit_write(0, span(buf), true, tag(2));
    run_until(a, sink, 2);
    CHECK(sink.done[1] == EBADF);
    CHECK(sink.done[2] == 0);   // a write-only descriptor takes it (RWF_DSYNC: synced)
}

TEST_CASE("io_uring: a full submission queue the kernel takes nothing from holds requests back, it fails none") {
    TempDir dir;
    Sink sink;
    auto b = open_ring(dir.file("d.img"), 4 << 20, true, sink);
    if (!b) return;
    auto& ring = dynamic_cast<FileUring&>(*b->async());
    AsyncBackend& a = ring;
    // More than the submission queue holds, in one loop turn, while the
    // kernel refuses io_uring_enter: the first kEntries fill the queue, the
    // rest find it full. They used to fail with EAGAIN, an NBD_EIO for the
    // client.
    constexpr std::size_t n = FileUring::kEntries + 44;
    std::vector<AlignedBuffer> bufs;
    for (std::size_t i = 0; i < n; ++i) bufs.emplace_back(4096, 4096);
    bool filtered = false;
    int why = 0;
    std::size_t answered = 0, held = 0;
    bool pending = false;
    std::thread refused([&] {   // no assertions on this thread
        if (!(filtered = refuse_io_uring_enter_on_this_thread())) {
            why = errno;
            return;
        }
        for (std::size_t i = 0; i < n; ++i) a.submit_read(i * 4096, span(bufs[i]), tag(i));
        a.submit_pending();   // the loop's next turn, and a completion: refused again
        a.reap(1);
        answered = sink.done.size();
        held = ring.in_flight();
        pending = a.pending();
    });
    refused.join();
    if (!filtered) SKIP_TEST("no seccomp filter on this host: " + std::string(std::strerror(why)));
    CHECK(answered == 0);
    CHECK(held == n);
    CHECK(pending);
    // The kernel takes entries again (this thread has no filter): all of them go in, and succeed.
    run_until(a, sink, n);
    for (const auto& done : sink.done)
        CHECK_MESSAGE(done.second == 0, "tag " << done.first << ": " << std::strerror(done.second));
    CHECK(ring.in_flight() == 0);
}

// A disk that completes its queue in passes keeps requests that arrive
// during a pass in it; held back, they make a second cohort that the disk
// runs while the first one's replies travel (submission_cohorts.hpp). The
// data comes back right whichever way the requests are split.
TEST_CASE("io_uring: a burst goes in as two cohorts, the second before the first's completions are reported") {
    TempDir dir;
    struct FirstReport final : CompletionSink {
        Sink all;
        FileUring* ring = nullptr;
        std::size_t waiting = 0;
        void completed(void* tag, int error) override { all.completed(tag, error); }
        void completed_on_loop(void* tag, int error) override {
            if (all.calls == 0) waiting = ring->waiting();
            all.completed_on_loop(tag, error);
        }
    } sink;
    auto b = open_ring(dir.file("d.img"), 4 << 20, true, sink.all);
    if (!b) return;
    auto& ring = dynamic_cast<FileUring&>(*b->async());
    sink.ring = &ring;
    AsyncBackend& a = ring;
    a.set_sink(&sink);
    // A disk that completes in passes, as this host's (a file in /tmp may sit on another kind).
    seen_passes(ring);
    {
        const auto p = byte_pattern(0, 4 << 20, 3);
        AlignedBuffer all(4 << 20, 4096);
        std::memcpy(all.data(), p.data(), p.size());
        REQUIRE(b->write(0, all.span(), false) == 0);
    }
    constexpr std::size_t n = 64;
    std::vector<AlignedBuffer> in;
    for (std::size_t i = 0; i < n; ++i) in.emplace_back(4096, 4096);
    // A few requests at an idle ring go in at once.
    for (std::size_t i = 0; i < 3; ++i) a.submit_read(i * 4096, span(in[i]), tag(i));
    a.submit_pending();
    CHECK(ring.in_kernel() == 3);
    CHECK(ring.waiting() == 0);
    run_until(a, sink.all, 3);
    CHECK(ring.in_kernel() == 0);
    seen_passes(ring);   // still, whatever the reaps of those 3 saw
    sink.all = Sink{};
    // A burst: half now, half at the first completions, before they are reported.
    for (std::size_t i = 0; i < n; ++i) a.submit_read(i * 7 * 4096, span(in[i]), tag(i));
    CHECK(a.pending());
    a.submit_pending();
    CHECK(ring.in_kernel() == n / 2);
    CHECK(ring.waiting() == n / 2);
    CHECK_FALSE(a.pending());   // the loop does not spin while the second cohort waits
    run_until(a, sink.all, n);
    // Before the first completion was reported, requests of the second cohort
    // were in the kernel (how many depends on how many of the first were done).
    CHECK(sink.waiting < n / 2);
    CHECK(ring.in_kernel() == 0);
    for (const auto& done : sink.all.done)
        CHECK_MESSAGE(done.second == 0, "tag " << done.first << ": " << std::strerror(done.second));
    for (std::size_t i = 0; i < n; ++i) CHECK(is_pattern(in[i].span(), i * 7 * 4096, 3));
}

// The rule hears what the loop read from the eventfd: the same completions
// turn cohorts on when one signal brought them all (a disk's pass) and off
// when each came with its own (a device that completes one by one, however
// long its completions waited for the daemon). Buffered requests never turn
// them on: a copy done inside io_uring_enter looks like a pass.
TEST_CASE("io_uring: cohorts follow the completions each eventfd signal brings, O_DIRECT only, unless off") {
    for (const auto& c : {std::pair{true, true}, std::pair{false, true}, std::pair{true, false}}) {
        // Plain variables: clang's lambdas (CAPTURE) cannot capture structured bindings.
        const bool direct = c.first, allowed = c.second;   // allowed: io_cohorts auto, or off
        CAPTURE(direct);
        CAPTURE(allowed);
        TempDir dir;
        Sink sink;
        auto b = open_ring(dir.file("d.img"), 4 << 20, direct, sink, allowed);
        if (!b) return;
        auto& ring = dynamic_cast<FileUring&>(*b->async());
        constexpr std::size_t n = 16;
        std::vector<AlignedBuffer> in;
        for (std::size_t i = 0; i < n; ++i) in.emplace_back(4096, 4096);
        // One round: n reads, all finished before the reap (as when the daemon
        // is busy elsewhere), told to have come with `signals` signals.
        auto round = [&](std::uint64_t signals) {
            sink = Sink{};
            for (std::size_t i = 0; i < n; ++i) ring.submit_read(i * 4096, span(in[i]), tag(i));
            ring.submit_pending();   // all 16, or 8 and 8 once cohorts are on
            for (int waited = 0; waited < 500 && sink.calls < n; ++waited) {
                ::usleep(2000);
                pollfd p{ring.completion_fd(), POLLIN, 0};
                if (::poll(&p, 1, 0) != 1) continue;
                std::uint64_t count = 0;
                REQUIRE(::read(ring.completion_fd(), &count, sizeof count) == sizeof count);
                ::usleep(5000);   // the rest of them
                ring.reap(signals);
            }
            REQUIRE(sink.calls == n);
        };
        CHECK_FALSE(ring.cohorts().on());
        for (int i = 0; i < 40; ++i) round(1);
        CHECK(ring.cohorts().on() == (direct && allowed));
        for (int i = 0; i < 40; ++i) round(n);
        CHECK_FALSE(ring.cohorts().on());
    }
}

TEST_CASE("io_uring: closed with requests in flight, it waits for them and reports nothing") {
    TempDir dir;
    Sink sink;
    auto b = open_ring(dir.file("d.img"), 4 << 20, true, sink);
    if (!b) return;
    std::vector<AlignedBuffer> bufs;
    for (std::uintptr_t i = 0; i < 32; ++i) {
        bufs.emplace_back(65536, 4096);
        b->async()->submit_read(i * 65536, span(bufs.back()), tag(i));
    }
    b->async()->submit_pending();
    b.reset();   // before the buffers: under ASan, a write into them after this would be caught
    CHECK(sink.calls == 0);
}
