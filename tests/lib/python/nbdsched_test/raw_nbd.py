"""NBD on a raw socket, for tests that send what libnbd would not (a
stalled handshake, an idle connection, TLS ended by hand): the protocol's
magic numbers, exact reads, and one option or request put on the wire.
Numbers from the NBD protocol (doc/proto.md)."""
import select
import socket
import struct
import threading
import time

NBDMAGIC = b"NBDMAGIC"
IHAVEOPT = 0x49484156454F5054
OPTION_REPLY_MAGIC = 0x3E889045565A9
REQUEST_MAGIC = 0x25609513
SIMPLE_REPLY_MAGIC = 0x67446698
GREETING_BYTES = 8 + 8 + 2
CLIENT_FLAGS = 3   # FIXED_NEWSTYLE | NO_ZEROES

OPT_EXPORT_NAME, OPT_ABORT, OPT_STARTTLS, OPT_GO, OPT_STRUCTURED_REPLY = 1, 2, 5, 7, 8
REP_ACK, REP_INFO = 1, 3
CMD_READ, CMD_WRITE, CMD_DISC = 0, 1, 2


def exactly(sock, n, what="the server"):
    """n bytes from `sock`; EOFError naming `what` when it closes first."""
    got = bytearray()
    while len(got) < n:
        chunk = sock.recv(n - len(got))
        if not chunk:
            raise EOFError(f"{what} closed the connection after {len(got)} of {n} bytes")
        got += chunk
    return bytes(got)


def send_option(sock, opt, data=b""):
    sock.sendall(struct.pack(">QII", IHAVEOPT, opt, len(data)) + data)


def send_request(sock, cmd, cookie, offset, length, payload=b"", flags=0):
    sock.sendall(struct.pack(">IHHQQI", REQUEST_MAGIC, flags, cmd, cookie, offset, length) + payload)


def connect_export(path, export="default"):
    """A Unix socket at `path` (or TCP, for a (host, port) pair) past the
    handshake (NBD_OPT_EXPORT_NAME `export`)."""
    s = socket.socket(socket.AF_INET if isinstance(path, tuple) else socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    name = export.encode()
    s.sendall(struct.pack(">IQII", CLIENT_FLAGS, IHAVEOPT, OPT_EXPORT_NAME, len(name)) + name)
    greeting = exactly(s, GREETING_BYTES)
    if greeting[:8] != NBDMAGIC:
        raise AssertionError(f"bad greeting {greeting!r}")
    exactly(s, 10)   # size and flags (NO_ZEROES: no padding)
    return s


def read_reply(sock, cookie, length=0):
    """A simple reply to `cookie`: (error, data); `length` bytes of data follow a READ's."""
    magic, error, got = struct.unpack(">IIQ", exactly(sock, 16))
    if magic != SIMPLE_REPLY_MAGIC or got != cookie:
        raise AssertionError(f"bad reply: magic {magic:#x} cookie {got}")
    return error, (exactly(sock, length) if length and error == 0 else b"")


def write_then_read(sock, offset, length=4096):
    """True when a WRITE of `length` bytes at `offset` is answered and a READ
    of them gives them back (cookies 7 and 8)."""
    data = bytes((offset + i) % 251 for i in range(length))
    send_request(sock, CMD_WRITE, 7, offset, length, data)
    if read_reply(sock, 7) != (0, b""):
        return False
    send_request(sock, CMD_READ, 8, offset, length)
    return read_reply(sock, 8, length) == (0, data)


def closed_by_server(sock, timeout):
    """True when the server's side ends (EOF, a reset, a TLS session cut)
    within `timeout`, whatever it still had in the socket read and dropped."""
    sock.settimeout(timeout)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if not sock.recv(1 << 20):
                return True
    except socket.timeout:
        return False
    except OSError:   # ConnectionResetError, ssl.SSLEOFError
        return True
    return False



class HangupWatch:
    """When the server closes each socket watched, as time.monotonic() here
    (never sooner than it did), seen by poll(2) in a thread of its own from
    the moment watch() is called, whatever this thread is doing; nothing is
    read: a client that read its replies would no longer be stalled."""

    POLL_S = 0.02   # how soon a socket just watched is polled

    def __init__(self):
        self._socks = []
        self._seen = {}
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def watch(self, sock):
        with self._lock:
            self._socks.append(sock)
        return sock

    def times(self, timeout):
        """[when each watched socket was seen closed (None: still open)], in
        the order watched, once all are or after `timeout` s; the watch ends."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if len(self._seen) == len(self._socks):
                    break
            time.sleep(self.POLL_S)
        self._done.set()
        self._thread.join()
        return [self._seen.get(s) for s in self._socks]

    def _run(self):
        while not self._done.is_set():
            with self._lock:
                polled = {s.fileno(): s for s in self._socks if s not in self._seen}
            poller = select.poll()
            for fd in polled:
                poller.register(fd, select.POLLRDHUP)   # POLLHUP and POLLERR come unasked
            events = poller.poll(self.POLL_S * 1000)
            now = time.monotonic()
            with self._lock:
                for fd, _ in events:
                    self._seen[polled[fd]] = now
