"""The new process's side of a planned restart's hand-over protocol
(daemon/process/handover_wire.hpp), played by a test: a frame is [u32 text
length][u32 descriptor count] (host order), one byte per batch of up to 250
descriptors carrying that batch, then the text. A test asks with
"takeover" (or "takeover force"), reads "state ..." (or "refused ..."),
then answers "adopted" or "failed <why>" when it wants to."""
import array
import os
import socket
import struct

from nbdsched_test.raw_nbd import exactly

OLD_DAEMON = "the old daemon (hand-over)"


def connect_handover(path, timeout=30):
    """A connection to the old daemon's hand-over socket; every later call
    on it gives up after `timeout` seconds (socket.timeout)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    sock.connect(path)
    return sock


def handover_message(sock, text):
    """One hand-over frame without descriptors."""
    sock.sendall(struct.pack("=II", len(text.encode()), 0) + text.encode())


def handover_reply(sock):
    """The text of one frame; the descriptors that come with it are closed
    (the old daemon keeps its own)."""
    length, count = struct.unpack("=II", exactly(sock, 8, OLD_DAEMON))
    for _ in range((count + 249) // 250):
        _, ancillary, _, _ = sock.recvmsg(1, socket.CMSG_SPACE(250 * 4))
        for _, _, data in ancillary:
            for fd in array.array("i", data[:len(data) - len(data) % 4]):
                os.close(fd)
    return exactly(sock, length, OLD_DAEMON).decode()
