#include "daemon/process/fdstore_handover.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <spdlog/spdlog.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "daemon/process/handover_wire.hpp"
#include "daemon/session/connection_state.hpp"

namespace nbdsched::daemon {

namespace {

const std::string state_name = "nbdsched-state";
const std::string fd_prefix = "nbdsched-fd";

// The index in a descriptor's name "nbdsched-fd<index>": digits only, no
// leading zero, below max_handover_fds; nullopt for any other name (not one
// push_to_fd_store gave). One index has one name: release_fd_store removes
// the entries by that name.
std::optional<std::size_t> fd_index(const std::string& name) {
    const std::string digits = name.substr(fd_prefix.size());
    if (digits.empty() || digits.size() > 7 || digits.find_first_not_of("0123456789") != std::string::npos ||
        (digits.size() > 1 && digits[0] == '0'))
        return std::nullopt;
    const unsigned long index = std::strtoul(digits.c_str(), nullptr, 10);
    if (index >= max_handover_fds) return std::nullopt;
    return index;
}

bool store(int fd, const std::string& name, std::string& error) {
    const std::string message = "FDSTORE=1\nFDNAME=" + name;
    int r = sd_pid_notify_with_fds(0, 0, message.c_str(), &fd, 1);
    if (r > 0) return true;
    error = "fd store: " + name + ": " + (r == 0 ? "not under systemd ($NOTIFY_SOCKET unset)" : std::strerror(-r));
    return false;
}

void unstore(const std::string& name) {
    sd_notify(0, ("FDSTOREREMOVE=1\nFDNAME=" + name).c_str());
}

// The descriptors at their indexes, -1 where none came. One hand-over names
// each index once, and systemd keeps one entry per open file: two under one
// index mean the store holds another hand-over's entries beside this one's,
// and which of them the state means is unknown. All are closed and the index left empty
// (the connection handed over on it is dropped, a listener's refuses the
// hand-over): serving a client's session on another client's socket is
// worse than making it connect again.
std::vector<int> by_index(std::vector<std::pair<std::size_t, int>> numbered) {
    std::sort(numbered.begin(), numbered.end());
    std::vector<int> fds(numbered.empty() ? 0 : numbered.back().first + 1, -1);
    for (std::size_t i = 0, j = 0; i < numbered.size(); i = j) {
        const std::size_t index = numbered[i].first;
        while (j < numbered.size() && numbered[j].first == index) ++j;
        if (j - i == 1) {
            fds[index] = numbered[i].second;
            continue;
        }
        spdlog::error("fd store: {} descriptors named {}{}: which one the hand-over's state means is unknown, so "
                      "none is used and all are closed",
                      j - i, fd_prefix, index);
        for (std::size_t k = i; k < j; ++k) ::close(numbered[k].second);
    }
    return fds;
}

std::optional<std::string> read_memfd(int fd, std::string& error) {
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
        error = std::string("fd store: state: ") + std::strerror(errno);
        return std::nullopt;
    }
    std::string text(static_cast<std::size_t>(st.st_size), '\0');
    if (::pread(fd, text.data(), text.size(), 0) != static_cast<ssize_t>(text.size())) {
        error = "fd store: state: short read";
        return std::nullopt;
    }
    return text;
}

}   // namespace

bool push_to_fd_store(const std::string& json, const std::vector<int>& fds, std::string& error) {
    int memfd = ::memfd_create(state_name.c_str(), MFD_CLOEXEC);
    if (memfd < 0) {
        error = std::string("memfd_create: ") + std::strerror(errno);
        return false;
    }
    bool ok = ::write(memfd, json.data(), json.size()) == static_cast<ssize_t>(json.size());
    if (!ok) error = "fd store: writing the state failed";
    // The descriptors first: a state in the store promises them.
    for (std::size_t i = 0; ok && i < fds.size(); ++i) ok = store(fds[i], fd_prefix + std::to_string(i), error);
    if (ok) ok = store(memfd, state_name, error);
    ::close(memfd);
    if (!ok)
        for (std::size_t i = 0; i < fds.size(); ++i) unstore(fd_prefix + std::to_string(i));
    return ok;
}

std::optional<HandedOver> take_from_fd_store(std::vector<InheritedSocket>& inherited, std::string& error) {
    std::vector<int> states;   // more than one: two hand-overs' states, neither is trusted
    std::vector<std::pair<std::size_t, int>> numbered;
    std::vector<InheritedSocket> rest;
    std::string bad_name;   // a descriptor name this nbdsched does not give: the store is not its hand-over
    for (auto& s : inherited) {
        if (s.name == state_name) {
            states.push_back(s.fd);
        } else if (s.name.rfind(fd_prefix, 0) == 0) {
            if (auto index = fd_index(s.name)) {
                numbered.emplace_back(*index, s.fd);
            } else {
                bad_name = s.name;
                unstore(s.name);
                ::close(s.fd);
            }
        } else {
            rest.push_back(s);
        }
    }
    inherited = std::move(rest);
    if (states.empty() && numbered.empty() && bad_name.empty()) return std::nullopt;
    HandedOver handed;
    handed.fds = by_index(std::move(numbered));
    std::optional<HandoverState> state;
    if (!bad_name.empty()) {
        error = "fd store: a descriptor named " + bad_name + ", not one nbdsched stores (index up to " +
                std::to_string(max_handover_fds - 1) + ")";
    } else if (states.empty()) {
        error = "fd store: descriptors without a state (a hand-over that did not finish)";
    } else if (states.size() > 1) {
        error = "fd store: " + std::to_string(states.size()) + " descriptors named " + state_name +
                " (more than one hand-over's state): none is used";
    } else if (auto text = read_memfd(states.front(), error)) {
        state = handover_from_json(*text, handed.fds.size(), error);
        for (const auto& l : state ? state->listeners : std::vector<ListenerState>{})
            if (handed.fds[static_cast<std::size_t>(l.fd)] < 0) {
                error = "fd store: a listener's descriptor is missing";
                state.reset();
                break;
            }
        // systemd drops a socket from the store when its peer hangs up: that
        // client is gone, the others go on.
        if (state)
            std::erase_if(state->connections,
                          [&](const ConnectionState& c) { return handed.fds[static_cast<std::size_t>(c.fd)] < 0; });
    }
    for (int fd : states) ::close(fd);
    if (!state) {
        release_fd_store(handed);
        for (int fd : handed.fds)
            if (fd >= 0) ::close(fd);
        return std::nullopt;
    }
    handed.state = std::move(*state);
    return handed;
}

void release_fd_store(const HandedOver& handed) {
    unstore(state_name);
    for (std::size_t i = 0; i < handed.fds.size(); ++i) unstore(fd_prefix + std::to_string(i));
}

}   // namespace nbdsched::daemon
