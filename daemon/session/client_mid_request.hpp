// A client in the middle of sending a request (a WRITE's header is in, its
// payload not yet): the connection that saw it asks its event loop not to
// busy-poll before it sleeps (daemon/process/event_loop.cpp). The client's
// next send is a few microseconds away, but a loop that polls for it on the
// client's CPU only keeps the client from making it: the loop's wake-up on
// the header preempted the client between its two sends (libnbd sends a
// header, then its payload). A loop that sleeps instead lets the client run
// on at once, and the payload's wake-up draws a loop on another CPU to the
// client's (docs/data-path.md#busy-poll).
#pragma once

namespace nbdsched::daemon {

// Called on the loop's thread by a connection left waiting for the rest of
// a request.
void client_mid_request();
// The loop's side: whether a connection asked since the last call (cleared).
bool take_client_mid_request();

}   // namespace nbdsched::daemon
