// The hand-over protocol's framing on a Unix stream socket: a message is a
// text (a command word, or the JSON state) plus any number of file
// descriptors, passed with SCM_RIGHTS. Blocking calls, bounded by the
// socket's SO_RCVTIMEO / SO_SNDTIMEO (kernel::set_io_timeouts).
//
// Frame: [u32 text length][u32 descriptor count] (host order: both ends are
// on one machine), then one byte per batch of up to 250 descriptors carrying
// that batch (the kernel's SCM_MAX_FD is 253), then the text.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace nbdsched::daemon {

struct HandoverMessage {
    std::string text;
    std::vector<int> fds;   // received ones are the caller's to close (O_CLOEXEC)
};

// The most descriptors one hand-over passes: the frame's limit, and the
// highest index (less one) a descriptor in the fd store may be named with.
inline constexpr std::uint32_t max_handover_fds = 1u << 20;

// The largest text a frame with `fds` descriptors may carry: every
// descriptor may be a connection with a full read buffer of unread bytes
// (two hex digits each in the state), plus room for the rest of the state.
std::size_t max_handover_text(std::size_t fds);

// False and `error` also for a text over max_handover_text (nothing is sent then).
bool send_handover(int sock, const std::string& text, const std::vector<int>& fds, std::string& error);
// nullopt and `error` on EOF, a timeout, a malformed frame or missing descriptors.
std::optional<HandoverMessage> recv_handover(int sock, std::string& error);
// Closes received descriptors nobody will adopt (a refusal, a malformed
// state, a command word that should carry none) and empties the list.
void close_fds(std::vector<int>& fds);

}   // namespace nbdsched::daemon
