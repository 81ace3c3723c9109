// The hand-over protocol's framing on a Unix stream socket: a message is a
// text (a command word, or the JSON state) plus any number of file
// descriptors, passed with SCM_RIGHTS. Blocking calls, bounded by the
// socket's SO_RCVTIMEO / SO_SNDTIMEO (set_timeouts).
//
// Frame: [u32 text length][u32 descriptor count] (host order: both ends are
// on one machine), then one byte per batch of up to 250 descriptors carrying
// that batch (the kernel's SCM_MAX_FD is 253), then the text.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace nbdsched::daemon {

struct HandoverMessage {
    std::string text;
    std::vector<int> fds;   // received ones are the caller's to close (O_CLOEXEC)
};

bool send_handover(int sock, const std::string& text, const std::vector<int>& fds, std::string& error);
// nullopt and `error` on EOF, a timeout, a malformed frame or missing descriptors.
std::optional<HandoverMessage> recv_handover(int sock, std::string& error);
void set_timeouts(int sock, std::chrono::milliseconds timeout);
// Closes received descriptors nobody will adopt (a refusal, a malformed
// state, a command word that should carry none) and empties the list.
void close_fds(std::vector<int>& fds);

}   // namespace nbdsched::daemon
