#include "daemon/session/client_mid_request.hpp"

namespace nbdsched::daemon {
namespace {
thread_local bool mid_request = false;   // one per event loop: each runs on its own thread
}   // namespace

void client_mid_request() { mid_request = true; }

bool take_client_mid_request() {
    const bool was = mid_request;
    mid_request = false;
    return was;
}

}   // namespace nbdsched::daemon
