"""TLS with real clients and real keys: nbdinfo and nbdsh (libnbd), qemu-img
(qemu's own TLS objects), with PSK and with X.509 certificates, over a Unix
socket and TCP. Then the refusals (plaintext to a TLS-only listener, a wrong
key, an unknown identity, a certificate from another CA, an expired one):
each fails on the client with a clear error, leaves a line in the server's
log, and does not disturb a TLS client reading at the same time. One daemon
for all of it."""
import os
import shutil
import sys

import nbd

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import keys   # noqa: E402

from nbdsched_test.daemon import Daemon   # noqa: E402
from nbdsched_test.process import free_port, run_bounded, wait_for   # noqa: E402
from nbdsched_test.tempdir import TempDir   # noqa: E402
from nbdsched_test.verdict import Checks, skip   # noqa: E402

SIZE = 16 << 20


def make_keys(root):
    keys.need_tools()
    k = {"psk": keys.psk_dir(root, "psk", "alice")}
    k["wrong"] = keys.psk_dir(root, "wrong", "alice")        # same identity, another key
    k["unknown"] = keys.psk_dir(root, "unknown", "mallory")
    with open(k["psk"], "a") as f, open(k["unknown"]) as extra:   # a second identity on the server
        f.write("bob:" + extra.read().split(":")[1])
    ca = keys.Ca(os.path.join(root, "ca"), "nbdsched test CA")
    k["pki"] = ca.issue(os.path.join(root, "pki"), "server", "localhost", server=True)
    k["client"] = ca.issue(os.path.join(root, "client"), "client", "carol")
    k["expired"] = ca.issue(os.path.join(root, "expired"), "client", "old", expired=True)
    other = keys.Ca(os.path.join(root, "other-ca"), "some other CA")
    k["untrusted"] = other.issue(os.path.join(root, "untrusted"), "client", "eve")
    shutil.copy(ca.cert, os.path.join(k["untrusted"], "ca-cert.pem"))   # trusts our server
    return k


def start_problems(checks, tmp, k):
    """Configurations that must not start, or start with a warning: bad key
    files are named in the error; a plaintext listener on every address
    starts only with insecure: true, and says so."""
    import subprocess
    from nbdsched_test.daemon import nbdsched_binary
    bad_psk = tmp.file("bad.psk")
    with open(bad_psk, "w") as f:
        f.write("alice:abcd\nbob:nothex\n")
    tail = "devices: [{name: d0, backend: ram, size: 1MiB}]\nexports: [{name: default, device: d0}]\n"
    listen = f"listen: [{{unix: {tmp.file('bad.sock')}}}]\n"
    for name, tls, want in [
            ("missing server key", f"tls: {{certificates: {k['client']}}}\n", "server-cert.pem: cannot read"),
            ("PSK file with a bad line", f"tls: {{psk_file: {bad_psk}}}\n", f"{bad_psk}: line 2: the key is not hexadecimal"),
            ("missing PSK file", f"tls: {{psk_file: {bad_psk}.nope}}\n", f"{bad_psk}.nope: cannot read")]:
        path = tmp.file("bad.yaml")
        with open(path, "w") as f:
            f.write(listen + tls + tail)
        r = subprocess.run([nbdsched_binary(), "--config", path], capture_output=True, text=True, timeout=20)
        out = r.stdout + r.stderr
        checks.check(f"{name}: the daemon does not start and names the file", r.returncode != 0 and want in out,
                     f"rc {r.returncode}: {out[-300:]}")
    port = free_port()
    open_config = f"listen: [{{tcp: '0.0.0.0:{port}', insecure: true}}]\n" + tail
    with Daemon(open_config, "insecure", workdir=tmp.path, control=False, wait=False) as d:
        checks.check("insecure: true starts with a warning", d.wait_log("without TLS required (insecure: true)"))


def main():
    if not shutil.which("nbdinfo"):
        skip("nbdinfo not installed")
    tmp = TempDir("tls")
    k = make_keys(tmp.path)
    port = free_port()
    sock, opt_sock = tmp.file("tls.sock"), tmp.file("optional.sock")
    config = f"""
tls:
  psk_file: {k['psk']}
  certificates: {k['pki']}
  verify_clients: true
listen:
  - unix: {sock}
    tls: require
  - tcp: 127.0.0.1:{port}
    tls: require
  - unix: {opt_sock}
    tls: on
devices:
  - {{name: d0, backend: ram, size: 16MiB}}
  - {{name: d1, backend: ram, size: 16MiB}}
  - {{name: d2, backend: ram, size: 8MiB}}
exports:
  - {{name: default, device: d0}}
  - {{name: bulk, device: d1}}
  - {{name: alice-only, device: d2, allow: [{{tls_identity: alice}}]}}
"""
    checks = Checks()
    d = Daemon(config, "tls", workdir=tmp.path)
    wait_for(lambda: os.path.exists(sock) and os.path.exists(opt_sock), 10)   # bound after the control socket
    psk_unix = f"nbds+unix://alice@/?socket={sock}&tls-psk-file={k['psk']}"
    try:
        # A TLS client that keeps reading what it wrote while the others come and go.
        steady = nbd.NBD()
        steady.set_uri_allow_local_file(True)
        steady.connect_uri(psk_unix)
        pattern = bytes(range(256)) * 16
        steady.pwrite(pattern, 0)

        def steady_ok():
            return steady.pread(len(pattern), 0) == pattern

        def client(name, argv, want_ok=True, client_says=(), log_says=()):
            before = len(d.log())
            rc, out = run_bounded(argv, timeout=20)
            ok = (rc == 0) == want_ok
            checks.check(f"{name}: client {'succeeds' if want_ok else 'fails'}", ok, f"rc {rc}: {out[-300:]}")
            for text in client_says:
                checks.check(f"{name}: client says '{text}'", text.lower() in out.lower(), out[-300:])
            for text in log_says:
                found = d.wait_log(text, timeout=5, since=before)
                checks.check(f"{name}: server log has '{text}'", found, d.log()[before:][-400:])
            checks.check(f"{name}: the TLS client next to it still reads", steady_ok())
            return out

        out = client("nbdinfo PSK unix", ["nbdinfo", "--size", psk_unix])
        checks.check("nbdinfo PSK unix: size", out.strip() == str(SIZE), out)
        out = client("nbdinfo PSK tcp",
                     ["nbdinfo", "--size", f"nbds://alice@127.0.0.1:{port}/?tls-psk-file={k['psk']}"])
        checks.check("nbdinfo PSK tcp: size", out.strip() == str(SIZE), out)
        out = client("nbdinfo PSK, second identity",
                     ["nbdinfo", "--size", f"nbds+unix://bob@/?socket={sock}&tls-psk-file={k['psk']}"],
                     log_says=["identity 'bob'"])
        # allow: tls_identity admits the PSK identity the handshake proved, and nobody else.
        alice_only = f"nbds+unix://{{who}}@/alice-only?socket={sock}&tls-psk-file={k['psk']}"
        out = client("allow: tls_identity alice, as alice", ["nbdinfo", "--size", alice_only.format(who="alice")])
        checks.check("allow: tls_identity alice, as alice: size", out.strip() == str(8 << 20), out)
        client("allow: tls_identity alice, as bob", ["nbdinfo", "--size", alice_only.format(who="bob")],
               want_ok=False, log_says=["tls bob"])
        out = client("nbdinfo --list as bob",
                     ["nbdinfo", "--list", f"nbds+unix://bob@/?socket={sock}&tls-psk-file={k['psk']}"])
        checks.check("nbdinfo --list as bob: alice-only left out", "alice-only" not in out and "bulk" in out, out)
        client("nbdinfo X.509 tcp",
               ["nbdinfo", "--size", f"nbds://localhost:{port}/?tls-certificates={k['client']}"],
               log_says=["identity 'carol'"])
        # TLS 1.2 still works (GnuTLS told to leave 1.3 out).
        prio = tmp.file("no-tls13.conf")
        with open(prio, "w") as f:
            f.write("[overrides]\ndisabled-version = tls1.3\n")
        tls12 = ["env", f"GNUTLS_SYSTEM_PRIORITY_FILE={prio}", "nbdinfo", "--size"]
        client("nbdinfo PSK over TLS 1.2", tls12 + [psk_unix], log_says=["TLS up (TLSv1.2, ECDHE-PSK"])
        client("nbdinfo X.509 over TLS 1.2", tls12 + [f"nbds://localhost:{port}/?tls-certificates={k['client']}"],
               log_says=["TLS up (TLSv1.2"])
        client("nbdinfo --list over TLS", ["nbdinfo", "--list", psk_unix.replace("alice@/", "alice@")])
        script = (f"h.set_uri_allow_local_file(True); h.connect_uri({psk_unix!r}); "
                  "h.pwrite(b'tls!' * 1024, 1 << 20); "
                  "assert h.pread(4096, 1 << 20) == b'tls!' * 1024; print('roundtrip ok')")
        # nbdsh runs `python3`: Debian's, the one with the nbd module.
        out = client("nbdsh PSK write+read",
                     ["env", "PATH=/usr/bin:" + os.environ.get("PATH", ""), "nbdsh", "-c", script])
        checks.check("nbdsh PSK: data round trip", "roundtrip ok" in out, out)
        # Many requests in flight both ways through TLS, payloads large
        # enough to be read straight into the request's buffer.
        if shutil.which("nbdcopy"):
            src, back = tmp.file("src.bin"), tmp.file("back.bin")
            with open(src, "wb") as f:
                f.write(os.urandom(SIZE))
            bulk = psk_unix.replace("alice@/", "alice@/bulk")
            client("nbdcopy into the export over TLS",
                   ["nbdcopy", "--request-size=262144", "--requests=16", src, bulk])
            client("nbdcopy out of the export over TLS", ["nbdcopy", "--request-size=4096", "--requests=64", bulk, back])
            with open(src, "rb") as a, open(back, "rb") as b:
                checks.check("nbdcopy over TLS: the data comes back as written", a.read() == b.read())
        out = client("plain client on the tls: on listener",
                     ["nbdinfo", "--size", f"nbd+unix:///?socket={opt_sock}"])
        checks.check("tls: on still serves plaintext", out.strip() == str(SIZE), out)
        client("TLS client on the tls: on listener",
               ["nbdinfo", "--size", f"nbds+unix://alice@/?socket={opt_sock}&tls-psk-file={k['psk']}"])

        if shutil.which("qemu-img"):
            psk_obj = f"tls-creds-psk,id=tls0,dir={os.path.dirname(k['psk'])},username=alice,endpoint=client"
            out = client("qemu-img info PSK unix",
                         ["qemu-img", "info", "--object", psk_obj, "--image-opts",
                          f"driver=nbd,server.type=unix,server.path={sock},tls-creds=tls0"])
            checks.check("qemu-img PSK: virtual size", f"({SIZE} bytes)" in out, out)
            x509_obj = f"tls-creds-x509,id=tls1,dir={k['client']},endpoint=client"
            out = client("qemu-img info X.509 tcp",
                         ["qemu-img", "info", "--object", x509_obj, "--image-opts",
                          f"driver=nbd,server.type=inet,server.host=localhost,server.port={port},tls-creds=tls1"])
            checks.check("qemu-img X.509: virtual size", f"({SIZE} bytes)" in out, out)
        else:
            print("note: qemu-img not installed, its checks skipped")

        # Refusals.
        client("plaintext to tls: require", ["nbdinfo", "--size", f"nbd+unix:///?socket={sock}"], want_ok=False,
               client_says=["TLS"], log_says=["this listener requires TLS"])
        client("plaintext --list to tls: require", ["nbdinfo", "--list", f"nbd+unix://?socket={sock}"],
               want_ok=False, log_says=["refused NBD_OPT_LIST in plaintext"])
        client("wrong PSK", ["nbdinfo", "--size", f"nbds+unix://alice@/?socket={sock}&tls-psk-file={k['wrong']}"],
               want_ok=False, client_says=["TLS"], log_says=["TLS handshake failed"])
        client("unknown PSK identity",
               ["nbdinfo", "--size", f"nbds+unix://mallory@/?socket={sock}&tls-psk-file={k['unknown']}"],
               want_ok=False, client_says=["TLS"], log_says=["unknown PSK identity 'mallory'"])
        client("client certificate from another CA",
               ["nbdinfo", "--size", f"nbds://localhost:{port}/?tls-certificates={k['untrusted']}"],
               want_ok=False, client_says=["TLS"], log_says=["TLS handshake failed", "client certificate:"])
        client("expired client certificate",
               ["nbdinfo", "--size", f"nbds://localhost:{port}/?tls-certificates={k['expired']}"],
               want_ok=False, client_says=["TLS"], log_says=["certificate has expired"])
        steady.shutdown()
        start_problems(checks, tmp, k)
    finally:
        checks.clean_up(d, tmp)
    checks.finish()


if __name__ == "__main__":
    main()
