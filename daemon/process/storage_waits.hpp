// Waits on storage that may not answer, bounded in time. rbd_flush, fsync,
// librbd's size read and a blocking request wait as long as the storage
// does (the Ceph cluster gone, a hung mount), so none of them may hold up
// an event loop or the exit. Each flush runs on a thread of its own;
// whoever waits for it gives up at a deadline and leaves the thread behind.
// Such a thread keeps its Device in use: that device must then be neither
// handed to another process (release_exclusive) nor destroyed, and a
// process with one left exits with _Exit (closing the device would wait for
// the same storage). Nothing promised is lost by giving up: NBD promises
// only the writes acknowledged before a completed FLUSH, or with FUA, and
// those are on the storage already.
//
// Users: the shutdown's final flush (waits on the loop thread, which has
// nothing else to do by then), the flush before a planned restart's
// hand-over and then the release of the devices' locks (rbd_lock_release
// waits for the cluster as a flush does; loop 0 goes on serving, an answer
// comes back on it), the end of run() for what is still on the I/O
// thread pool (join_within), and closing the devices at the exit
// (run_within: rbd_close flushes librbd's cache and waits for the cluster).
#pragma once

#include <boost/asio/thread_pool.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "daemon/device/device.hpp"

namespace nbdsched::daemon {

struct FlushOutcome {
    struct Failure {
        std::string device;
        int error;   // errno
    };
    std::vector<Failure> failed;           // one per flush that failed
    std::vector<std::string> unfinished;   // devices still flushing
};

class FlushThreads {
public:
    struct Round;   // the flushes one start() began

    FlushThreads();
    // A flush finishing later calls no `then` any more.
    ~FlushThreads();
    FlushThreads(const FlushThreads&) = delete;
    FlushThreads& operator=(const FlushThreads&) = delete;

    // Flushes every device, each on a detached thread. `then` runs on the
    // thread of the round's last flush to finish (post from it, nothing
    // more), never after this object is gone.
    std::shared_ptr<Round> start(const std::vector<std::unique_ptr<Device>>& devices, std::function<void()> then = {});
    // As start(), with `job` (0 or an errno) run for each device in place of its flush.
    std::shared_ptr<Round> start_each(const std::vector<std::unique_ptr<Device>>& devices,
                                      std::function<int(Device&)> job, std::function<void()> then = {});
    // Blocks until every flush of `round` has finished or `deadline` passed.
    FlushOutcome wait(const std::shared_ptr<Round>& round, std::chrono::milliseconds deadline);
    // Where `round` stands now: a flush not finished yet is unfinished.
    FlushOutcome outcome(const std::shared_ptr<Round>& round) const;
    // Devices with a flush (or a start_each job) still running, of any round.
    std::vector<std::string> running() const;

    struct Shared;

private:
    std::shared_ptr<Shared> shared_;
};

// job() on a thread of its own (`what` names it in a log line if no thread
// can be had), given up after `deadline`: false when it still runs then
// (what it uses must then never be touched again: the caller exits with _Exit).
bool run_within(const std::string& what, std::function<void()> job, std::chrono::milliseconds deadline);

// pool.join(), given up after `deadline`: false when something still runs
// on the pool then (the pool must then never be joined nor destroyed).
bool join_within(boost::asio::thread_pool& pool, std::chrono::milliseconds deadline);

}   // namespace nbdsched::daemon
