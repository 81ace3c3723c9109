"""A reload reads the TLS files again. A PSK identity removed from psk_file
is refused from then on, and the reload says what it re-read; a session that
was up before keeps working. A renewed server certificate (here from another
CA) is the one new clients see. A reload with nothing changed in the files
says nothing about TLS. A TLS file that no longer loads (a bad PSK line, a
key that is not PEM) refuses the reload, naming the file, and the credentials
in force stay. Real clients: nbdinfo and libnbd (python3-libnbd)."""
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

SIZE = 4 << 20


def write(path, text):
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)


def read(path):
    with open(path) as f:
        return f.read()


def main():
    if not shutil.which("nbdinfo"):
        skip("nbdinfo not installed")
    keys.need_tools()
    tmp = TempDir("tls-reload")
    alice = keys.psk_dir(tmp.path, "alice", "alice")   # each client holds only its own key
    bob = keys.psk_dir(tmp.path, "bob", "bob")
    server_psk = tmp.file("server.psk")
    write(server_psk, read(alice) + read(bob))
    old_ca = keys.Ca(os.path.join(tmp.path, "old-ca"), "old CA")
    new_ca = keys.Ca(os.path.join(tmp.path, "new-ca"), "new CA")
    pki = old_ca.issue(tmp.file("pki"), "server", "localhost", server=True)
    renewed = new_ca.issue(tmp.file("renewed"), "server", "localhost", server=True)
    trusts_old = old_ca.issue(tmp.file("trusts-old"), "client", "carol")
    trusts_new = new_ca.issue(tmp.file("trusts-new"), "client", "dave")
    port = free_port()
    sock = tmp.file("tls.sock")
    config = f"""
tls: {{psk_file: {server_psk}, certificates: {pki}}}
listen: [{{unix: {sock}, tls: require}}, {{tcp: "127.0.0.1:{port}", tls: require}}]
devices: [{{name: d0, backend: ram, size: 4MiB}}]
exports: [{{name: default, device: d0}}]
"""
    checks = Checks()
    d = Daemon(config, "tls-reload", workdir=tmp.path)
    wait_for(lambda: os.path.exists(sock), 10)
    psk_uri = f"nbds+unix://{{who}}@/?socket={sock}&tls-psk-file={{keys}}"
    x509_uri = f"nbds://localhost:{port}/?tls-certificates={{dir}}"

    def connects(name, uri, want=True, log_says=None):
        before = len(d.log())
        rc, out = run_bounded(["nbdinfo", "--size", uri], timeout=20)
        ok = rc == 0 and out.strip() == str(SIZE)
        checks.check(f"{name}: {'connects' if want else 'refused'}", ok == want, f"rc {rc}: {out[-300:]}")
        if log_says:
            found = d.wait_log(log_says, timeout=5, since=before)
            checks.check(f"{name}: server log has '{log_says}'", found, d.log()[before:][-400:])

    def reload(name, expect, says=(), not_says=()):
        try:
            out = d.ctl("reload", expect=expect)
        except AssertionError as e:
            checks.check(f"{name}: ctl reload exits {expect}", False, str(e).strip())
            return ""
        for text in says:
            checks.check(f"{name}: ctl reload says '{text}'", text in out, out.strip())
        for text in not_says:
            checks.check(f"{name}: ctl reload does not say '{text}'", text not in out, out.strip())
        return out

    try:
        connects("alice before the reload", psk_uri.format(who="alice", keys=alice))
        connects("bob before the reload", psk_uri.format(who="bob", keys=bob))
        # A session up before alice is revoked: it keeps its TLS session.
        steady = nbd.NBD()
        steady.set_uri_allow_local_file(True)
        steady.connect_uri(psk_uri.format(who="alice", keys=alice))
        steady.pwrite(b"kept" * 1024, 0)

        reload("nothing changed", 0, not_says=["tls:"])

        write(server_psk, read(bob))   # alice revoked
        reload("alice removed from psk_file", 0,
               says=[f"tls: {server_psk} changed", "(1 PSK identities)", "sessions already up keep theirs"])
        connects("alice after her key was removed", psk_uri.format(who="alice", keys=alice), want=False,
                 log_says="unknown PSK identity 'alice'")
        connects("bob after alice was removed", psk_uri.format(who="bob", keys=bob))
        checks.check("the session alice had before the reload still reads",
                     steady.pread(4096, 0) == b"kept" * 1024)
        steady.shutdown()

        # A PSK file that no longer parses: the reload is refused, bob still gets in.
        good = read(server_psk)
        write(server_psk, good + "carol:nothex\n")
        err = reload("a bad line in psk_file", 1, says=[f"{server_psk}: line 2: the key is not hexadecimal"])
        checks.check("a refused TLS reload is logged", d.wait_log("keeping the configuration and the TLS credentials"),
                     err)
        connects("bob after the refused reload", psk_uri.format(who="bob", keys=bob))
        write(server_psk, good)

        # The server certificate renewed from another CA.
        connects("X.509 client trusting the old CA, before the renewal", x509_uri.format(dir=trusts_old))
        connects("X.509 client trusting the new CA, before the renewal", x509_uri.format(dir=trusts_new), want=False)
        for name in ("server-cert.pem", "server-key.pem"):
            shutil.copy(os.path.join(renewed, name), os.path.join(pki, name))
        reload("server certificate renewed", 0,
               says=[f"tls: {pki}/server-cert.pem, {pki}/server-key.pem changed"], not_says=[server_psk])
        connects("X.509 client trusting the new CA, after the renewal", x509_uri.format(dir=trusts_new))
        connects("X.509 client trusting the old CA, after the renewal", x509_uri.format(dir=trusts_old), want=False)

        # A key file that is not PEM: refused, the renewed certificate stays in force.
        key = os.path.join(pki, "server-key.pem")
        good_key = read(key)
        write(key, "not a key\n")
        reload("a server key that is not PEM", 1, says=[f"{key}: not a PEM private key"])
        connects("X.509 client after the refused reload", x509_uri.format(dir=trusts_new))
        write(key, good_key)
        reload("the key put back", 0, not_says=["tls:"])
        checks.check("clean stop after the reloads", d.stop() == 0)
    finally:
        checks.clean_up(d, tmp)
    checks.finish()


if __name__ == "__main__":
    main()
