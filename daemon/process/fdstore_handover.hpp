// A planned restart under systemd (`--fdstore-handover`, docs/restart.md):
// on SIGTERM the old process parks its connections as for --takeover, then
// pushes them (and its listeners, unless systemd owns those already) into
// the service's file descriptor store (FDSTORE=1, FileDescriptorStoreMax=)
// with the state in a memfd, and exits. systemd keeps the store while a
// restart job is queued (`systemctl restart`, Restart=) and passes it to the
// next process with the activated sockets; that one takes its entries out
// of the list and, once its server is built, removes them from the store
// (FDSTOREREMOVE=1), so a connection it closes is really closed.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "daemon/process/systemd_notify.hpp"
#include "daemon/process/takeover.hpp"

namespace nbdsched::daemon {

// False and `error` when the state or a descriptor could not be stored
// (no $NOTIFY_SOCKET, FileDescriptorStoreMax= too small shows only in
// systemd's log: the next process then finds less than was sent).
bool push_to_fd_store(const std::string& json, const std::vector<int>& fds, std::string& error);

// Takes the fd store's entries out of `inherited`: nullopt when there are
// none; nullopt and `error` when they do not make a hand-over (their
// descriptors are closed then, and removed from the store).
std::optional<HandedOver> take_from_fd_store(std::vector<InheritedSocket>& inherited, std::string& error);

// The new server holds everything: drop systemd's copies.
void release_fd_store(const HandedOver& handed);

}   // namespace nbdsched::daemon
