// The new process's side of a planned restart without systemd
// (`nbdsched --takeover PATH`, docs/restart.md): ask the running daemon on
// its hand-over socket for its listeners and live connections, build the
// server around them, then confirm; the old process exits only on that
// confirmation, so a new process that fails leaves the old one serving.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "daemon/session/connection_state.hpp"

namespace nbdsched::daemon {

// What a hand-over brought: the state, and the descriptors it indexes.
struct HandedOver {
    HandoverState state;
    std::vector<int> fds;
};

class Takeover {
public:
    // Connects, asks (`force`: even when RAM devices lose their data) and
    // waits up to `wait` while the old process drains. nullptr and `error`
    // when it refuses or anything fails; the old process keeps serving then.
    static std::unique_ptr<Takeover> request(const std::string& path, bool force, std::chrono::milliseconds wait,
                                             std::string& error);
    ~Takeover();
    Takeover(const Takeover&) = delete;
    Takeover& operator=(const Takeover&) = delete;

    const HandedOver& handed_over() const { return handed_; }
    // Everything adopted: the old process acknowledges and exits. Only after
    // true may the new process read the handed-over sockets.
    bool confirm(std::string& error);
    // The new server could not start: the old process resumes serving.
    void refuse(const std::string& why);

private:
    Takeover() = default;
    int sock_ = -1;
    HandedOver handed_;
};

}   // namespace nbdsched::daemon
