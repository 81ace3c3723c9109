#include "daemon/process/takeover.hpp"

#include <cerrno>
#include <cstring>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "daemon/process/handover_wire.hpp"
#include "kernel/connect.hpp"

namespace nbdsched::daemon {

namespace {
// After the old process sent everything it waits this long for our verdict;
// we wait as long for its goodbye.
constexpr std::chrono::seconds confirm_wait{10};
}   // namespace

std::unique_ptr<Takeover> Takeover::request(const std::string& path, bool force, std::chrono::milliseconds wait,
                                            std::string& error) {
    std::unique_ptr<Takeover> t(new Takeover);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (path.size() >= sizeof addr.sun_path) {
        error = "--takeover " + path + ": path too long";
        return nullptr;
    }
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    t->sock_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (t->sock_ < 0 || ::connect(t->sock_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
        error = "--takeover " + path + ": cannot connect: " + std::strerror(errno) + " (is a daemon serving hand-overs there?)";
        return nullptr;
    }
    kernel::set_io_timeouts(t->sock_, wait);
    if (!send_handover(t->sock_, force ? "takeover force" : "takeover", {}, error)) return nullptr;
    auto reply = recv_handover(t->sock_, error);
    if (!reply) return nullptr;
    if (reply->text.rfind("state ", 0) != 0) {
        close_fds(reply->fds);
        const bool refused = reply->text.rfind("refused ", 0) == 0;   // the wire's word, not the reason's
        error = "the running daemon refused the hand-over: " + (refused ? reply->text.substr(8) : reply->text);
        return nullptr;
    }
    auto state = handover_from_json(reply->text.substr(6), reply->fds.size(), error);
    if (!state) {   // nothing will adopt what came with it
        close_fds(reply->fds);
        t->refuse(error);
        return nullptr;
    }
    t->handed_.fds = std::move(reply->fds);
    t->handed_.state = std::move(*state);
    return t;
}

Takeover::~Takeover() {
    if (sock_ >= 0) ::close(sock_);
}

bool Takeover::confirm(std::string& error) {
    kernel::set_io_timeouts(sock_, confirm_wait);
    if (!send_handover(sock_, "adopted", {}, error)) return false;
    auto reply = recv_handover(sock_, error);
    if (!reply) return false;
    close_fds(reply->fds);   // a goodbye carries none
    if (reply->text != "bye") {
        error = "the old daemon did not let go: " + reply->text;
        return false;
    }
    return true;
}

void Takeover::refuse(const std::string& why) {
    std::string ignored;
    send_handover(sock_, "failed " + why, {}, ignored);
}

}   // namespace nbdsched::daemon
