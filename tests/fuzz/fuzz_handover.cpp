// Fuzz target: what a planned restart's new process reads from the old one
// (daemon/process/handover_wire.hpp, daemon/session/connection_state.hpp):
// a frame on the hand-over socket, and the JSON state it carries. A
// corrupt or truncated state must be an error, never a crash, and what is
// accepted must be usable as it stands. The first input byte picks how the
// rest is read:
//   0: the raw bytes of the socket (frame header, descriptor batches, text),
//      received with recv_handover() from a socketpair;
//   1: the rest as the text of a well-formed frame, read the way
//      Takeover::request() does ("state " + JSON, else a refusal);
//   2: one byte of descriptor count, then the JSON state for handover_from_json().
// Checked: a failure says why; an accepted state is of the current version,
// every descriptor index is below the count passed, every TLS mode is
// known, every ctl weight it carries is in 1..1000; and it survives
// to_json() and back unchanged.
#include <chrono>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <sys/socket.h>
#include <unistd.h>

#include "daemon/process/handover_wire.hpp"
#include "daemon/session/connection_state.hpp"
#include "kernel/connect.hpp"
#include "sched/weight.hpp"
#include "tests/fuzz/check.hpp"

namespace {

using namespace nbdsched::daemon;

// The socket buffer takes it whole, so the write never blocks.
constexpr std::size_t max_stream = 64u << 10;

void check_state(const std::string& text, std::size_t fd_count) {
    std::string error;
    auto s = handover_from_json(text, fd_count, error);
    if (!s) {
        FUZZ_CHECK(!error.empty());
        return;
    }
    FUZZ_CHECK(s->version == HandoverState::current_version);
    for (const auto& l : s->listeners) {
        FUZZ_CHECK(l.fd >= 0 && static_cast<std::size_t>(l.fd) < fd_count);
        FUZZ_CHECK(l.tls_mode == nbdsched::nbd::TlsMode::off || l.tls_mode == nbdsched::nbd::TlsMode::on ||
                   l.tls_mode == nbdsched::nbd::TlsMode::require);
    }
    for (const auto& c : s->connections) FUZZ_CHECK(c.fd >= 0 && static_cast<std::size_t>(c.fd) < fd_count);
    for (const auto& w : s->live_changes.weights)   // applied to every scheduler as they stand
        FUZZ_CHECK(w.weight >= nbdsched::sched::min_weight && w.weight <= nbdsched::sched::max_weight);
    const std::string again = to_json(*s);
    std::string error2;
    auto back = handover_from_json(again, fd_count, error2);
    FUZZ_CHECK(back.has_value());
    FUZZ_CHECK(to_json(*back) == again);
}

// The frame as the old process's socket delivers it; nullopt for a bad one.
std::optional<HandoverMessage> receive(const std::uint8_t* data, std::size_t size) {
    int sv[2];
    FUZZ_CHECK(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
    const int buffer = 4 * max_stream;
    ::setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &buffer, sizeof buffer);
    ::setsockopt(sv[1], SOL_SOCKET, SO_RCVBUF, &buffer, sizeof buffer);
    if (size > 0) FUZZ_CHECK(::send(sv[0], data, size, MSG_NOSIGNAL) == static_cast<ssize_t>(size));
    ::shutdown(sv[0], SHUT_WR);   // the old process is gone after these bytes
    nbdsched::kernel::set_io_timeouts(sv[1], std::chrono::milliseconds(1000));
    std::string error;
    auto m = recv_handover(sv[1], error);
    ::close(sv[0]);
    ::close(sv[1]);
    if (!m) FUZZ_CHECK(!error.empty());
    return m;
}

void as_takeover(const HandoverMessage& m) {
    FUZZ_CHECK(m.text.size() <= max_handover_text(m.fds.size()));
    if (m.text.rfind("state ", 0) != 0) return;   // a refusal
    check_state(m.text.substr(6), m.fds.size());
}

}   // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size == 0) return 0;
    const std::uint8_t mode = data[0] % 3;
    ++data, --size;
    if (size > max_stream) return 0;
    if (mode == 0) {
        if (auto m = receive(data, size)) {
            as_takeover(*m);
            for (int fd : m->fds) ::close(fd);
        }
    } else if (mode == 1) {
        std::string frame(8 + size, '\0');
        const std::uint32_t header[2] = {static_cast<std::uint32_t>(size), 0};
        std::memcpy(frame.data(), header, sizeof header);
        if (size > 0) std::memcpy(frame.data() + 8, data, size);
        auto m = receive(reinterpret_cast<const std::uint8_t*>(frame.data()), frame.size());
        FUZZ_CHECK(m.has_value());   // a whole frame without descriptors is always read
        FUZZ_CHECK(m->text.size() == size && m->fds.empty());
        as_takeover(*m);
    } else {
        if (size == 0) return 0;
        const std::size_t fd_count = data[0];
        check_state(std::string(reinterpret_cast<const char*>(data + 1), size - 1), fd_count);
    }
    return 0;
}
