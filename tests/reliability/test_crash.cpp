// Crash consistency of the file backend: rounds of writers doing
// FUA writes, plain writes and FLUSHes through the daemon, the daemon
// SIGKILLed at a random moment, restarted on the same file, and every block
// checked against what was acknowledged as durable before the kill.
//
// SIGKILL does not drop the page cache, so this tests the daemon's
// acknowledgement discipline (never ack a write before the backend has it,
// never ack a FLUSH/FUA before fdatasync), not power loss.
//
// Also: SIGTERM while the writers run exits 0 and leaves every acknowledged
// write in the file (checked straight from the file, then through a restart).
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <random>
#include <thread>

#include "blocks.hpp"
#include "daemon.hpp"
#include "writers.hpp"

using namespace nbdsched::reliability;
using namespace nbdsched::testlib;
using namespace std::chrono_literals;

namespace {

constexpr std::size_t blocks = 4096;   // 16 MiB
constexpr unsigned threads = 4;

// engine: the device's io_engine ("auto": io_uring where the kernel allows it).
std::string file_config(const std::string& image, const std::string& engine = "auto") {
    return "devices:\n  - name: f0\n    backend: file\n    path: \"" + image +
           "\"\n    size: 16MiB\n    scheduler: cfq\n    io_engine: " + engine +
           "\nexports:\n  - name: default\n    device: f0\n";
}

int rounds_wanted() {
    const char* r = std::getenv("CRASH_ROUNDS");
    return r ? std::atoi(r) : 20;
}

// Waits until the writers have `n` more acknowledgements (or 10 s passed).
void wait_acks(const Writers& w, std::uint64_t n) {
    const auto target = w.acks() + n;
    for (int i = 0; i < 10000 && w.acks() < target; ++i) std::this_thread::sleep_for(1ms);
}

void crash_rounds(const std::string& engine, int rounds) {
    TempDir files;
    const std::string image = files.file("f0.img");
    Daemon d(yaml_spec(file_config(image, engine)), Daemon::Start::later);
    Ledger ledger(blocks);
    WriterStats stats;
    std::uint64_t losses = 0, unacked_landed = 0, acked_lost = 0, checked = 0;
    std::mt19937 rng(8);
    for (int round = 1; round <= rounds; ++round) {
        d.start();
        {
            Writers w(d.uri(), ledger, threads, round, stats);
            wait_acks(w, 20);
            std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 400));
            REQUIRE(d.stop(SIGKILL) == 128 + SIGKILL);
            for (const auto& e : w.setup_errors()) MESSAGE("a writer could not connect: " << e);
            CHECK(w.setup_errors().empty());
        }
        d.start();
        auto read = read_all_blocks(d.uri(), blocks);
        auto c = ledger.verify_and_rebase(read);
        for (auto v : read) checked += v > 0;
        losses += c.loss;
        unacked_landed += c.unacked;
        acked_lost += c.acked_lost;
        INFO("round " << round << ": " << c.first_loss);
        CHECK(c.loss == 0);
        REQUIRE(d.stop(SIGTERM) == 0);
    }
    std::printf("crash consistency (io_engine %s): %d rounds of SIGKILL, %llu writes (%llu FUA), %llu flushes, "
                "%llu written blocks checked, %llu losses; %llu unacknowledged writes landed, "
                "%llu acknowledged-unflushed writes missing\n",
                engine.c_str(), rounds, (unsigned long long)stats.writes, (unsigned long long)stats.fua_writes,
                (unsigned long long)stats.flushes, (unsigned long long)checked, (unsigned long long)losses,
                (unsigned long long)unacked_landed, (unsigned long long)acked_lost);
    CHECK(stats.writes > 0);
    CHECK(stats.flushes > 0);
    CHECK(losses == 0);
}

}   // namespace

// Both file engines, half the rounds each: the io_uring ring (FUA as
// RWF_DSYNC, FLUSH as fsync entries; "auto": the threads again where the
// kernel refuses a ring) and the thread pool.
TEST_CASE("SIGKILL at random moments loses nothing acknowledged as durable") {
    for (const std::string engine : {"auto", "threads"}) {
        CAPTURE(engine);
        crash_rounds(engine, std::max(1, rounds_wanted() / 2));
    }
}

TEST_CASE("SIGTERM under write load exits 0 and keeps every acknowledged write") {
    TempDir files;
    const std::string image = files.file("f0.img");
    Daemon d(yaml_spec(file_config(image)), Daemon::Start::later);
    Ledger ledger(blocks);
    WriterStats stats;
    for (int round = 1; round <= 3; ++round) {
        d.start();
        {
            Writers w(d.uri(), ledger, threads, 100 + round, stats);
            wait_acks(w, 50);
            std::this_thread::sleep_for(200ms);
            CHECK(d.stop(SIGTERM) == 0);
        }
        // Straight from the file, with the daemon gone: acknowledged writes
        // are there even when never flushed (the daemon flushes on SIGTERM).
        auto c = ledger.verify_and_rebase(read_file_blocks(image, blocks));
        INFO("round " << round << ": " << c.first_loss);
        CHECK(c.loss == 0);
        CHECK(c.acked_lost == 0);
        d.start();
        auto again = ledger.verify_and_rebase(read_all_blocks(d.uri(), blocks));
        CHECK(again.loss == 0);
        CHECK(again.acked_lost == 0);
        CHECK(again.unacked == 0);
        CHECK(d.stop(SIGTERM) == 0);
    }
    std::printf("graceful shutdown: 3 rounds of SIGTERM under load, %llu writes, 0 acknowledged writes "
                "may be missing\n",
                (unsigned long long)stats.writes);
}
