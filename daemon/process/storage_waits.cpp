#include "daemon/process/storage_waits.hpp"

#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <spdlog/spdlog.h>
#include <system_error>
#include <thread>

namespace nbdsched::daemon {

struct FlushThreads::Shared {
    mutable std::mutex mutex;
    std::condition_variable done;
    std::map<std::string, int> running;   // device -> its flushes still running
    bool owner_gone = false;
};

struct FlushThreads::Round {
    std::vector<std::string> names;
    std::vector<std::optional<int>> results;
    std::size_t left = 0;
    std::function<void()> then;
};

namespace {

using Shared = FlushThreads::Shared;
using Round = FlushThreads::Round;

// Job `i` of `round` on a detached thread: one that never returns must
// hold up neither its waiter nor the exit. Where no thread can be had (out
// of memory for its stack, or the process's thread limit), the job runs
// here, unbounded: a flush waits as long as before this bound existed, and
// the daemon does not die of std::terminate in the middle of a shutdown.
void launch(const std::shared_ptr<Shared>& shared, const std::shared_ptr<Round>& round, std::size_t i,
            std::function<int()> job) {
    {
        std::lock_guard lock(shared->mutex);
        ++shared->running[round->names[i]];
    }
    auto run = [shared, round, i, job = std::move(job)] {
        const int result = job();
        std::lock_guard lock(shared->mutex);
        round->results[i] = result;
        if (auto it = shared->running.find(round->names[i]); it != shared->running.end() && --it->second == 0)
            shared->running.erase(it);
        if (--round->left == 0 && round->then && !shared->owner_gone) round->then();
        shared->done.notify_all();
    };
    try {
        std::thread(run).detach();
    } catch (const std::system_error& e) {
        spdlog::warn("no thread for the storage wait of {} ({}): waiting on this thread, without a time bound",
                     round->names[i], e.what());
        run();
    }
}

std::shared_ptr<Round> new_round(std::vector<std::string> names, std::function<void()> then) {
    auto round = std::make_shared<Round>();
    round->results.resize(names.size());
    round->left = names.size();
    round->names = std::move(names);
    round->then = std::move(then);
    return round;
}

// The caller holds the mutex.
FlushOutcome outcome_of(const Round& round) {
    FlushOutcome out;
    for (std::size_t i = 0; i < round.names.size(); ++i) {
        const auto& result = round.results[i];
        if (!result)
            out.unfinished.push_back(round.names[i]);
        else if (*result != 0)
            out.failed.push_back({round.names[i], *result});
    }
    return out;
}

FlushOutcome wait_for(Shared& shared, const Round& round, std::chrono::milliseconds deadline) {
    std::unique_lock lock(shared.mutex);
    shared.done.wait_for(lock, deadline, [&] { return round.left == 0; });
    return outcome_of(round);
}

}   // namespace

FlushThreads::FlushThreads() : shared_(std::make_shared<Shared>()) {}

FlushThreads::~FlushThreads() {
    std::lock_guard lock(shared_->mutex);   // a `then` running now ends first
    shared_->owner_gone = true;
}

std::shared_ptr<Round> FlushThreads::start(const std::vector<std::unique_ptr<Device>>& devices,
                                           std::function<void()> then) {
    return start_each(
        devices, [](Device& d) { return d.flush_now(); }, std::move(then));
}

std::shared_ptr<Round> FlushThreads::start_each(const std::vector<std::unique_ptr<Device>>& devices,
                                                std::function<int(Device&)> job, std::function<void()> then) {
    std::vector<std::string> names;
    for (const auto& d : devices) names.push_back(d->name());
    auto round = new_round(std::move(names), std::move(then));
    if (devices.empty() && round->then) round->then();
    for (std::size_t i = 0; i < devices.size(); ++i)
        launch(shared_, round, i, [device = devices[i].get(), job] { return job(*device); });
    return round;
}

FlushOutcome FlushThreads::wait(const std::shared_ptr<Round>& round, std::chrono::milliseconds deadline) {
    return wait_for(*shared_, *round, deadline);
}

FlushOutcome FlushThreads::outcome(const std::shared_ptr<Round>& round) const {
    std::lock_guard lock(shared_->mutex);
    return outcome_of(*round);
}

std::vector<std::string> FlushThreads::running() const {
    std::lock_guard lock(shared_->mutex);
    std::vector<std::string> out;
    for (const auto& [name, count] : shared_->running) out.push_back(name);
    return out;
}

bool run_within(const std::string& what, std::function<void()> job, std::chrono::milliseconds deadline) {
    auto shared = std::make_shared<Shared>();
    auto round = new_round({what}, {});
    launch(shared, round, 0, [job = std::move(job)] {
        job();
        return 0;
    });
    return wait_for(*shared, *round, deadline).unfinished.empty();
}

bool join_within(boost::asio::thread_pool& pool, std::chrono::milliseconds deadline) {
    auto join = [&pool] { pool.join(); };
    return run_within("the I/O thread pool", join, deadline);
}

}   // namespace nbdsched::daemon
