"""Real TLS credentials made for a test: psktool key files and a certtool CA
with server and client certificates (qemu's and libnbd's file names), and
client certificates with subjects certtool will not write (python3-cryptography)."""
import os
import shutil
import subprocess

from nbdsched_test.verdict import skip


def _run(*argv):
    subprocess.run(argv, check=True, capture_output=True, timeout=30)


def need_tools():
    for tool in ("psktool", "certtool"):
        if not shutil.which(tool):
            skip(f"{tool} not installed (gnutls-bin)")


def psk_dir(root, name, identity):
    """A directory holding keys.psk (qemu's tls-creds-psk wants a dir) with
    one fresh random key for `identity`; the file's path."""
    d = os.path.join(root, name)
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "keys.psk")
    _run("psktool", "-u", identity, "-p", path)
    return path


def _key(path):
    _run("certtool", "--generate-privkey", "--key-type=ecdsa", "--outfile", path)


def _template(path, lines):
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path


class Ca:
    """A self-signed CA in `d` (ca-cert.pem, ca-key.pem) that signs more."""

    def __init__(self, d, cn):
        os.makedirs(d, exist_ok=True)
        self.dir = d
        self.cert = os.path.join(d, "ca-cert.pem")
        self.key = os.path.join(d, "ca-key.pem")
        _key(self.key)
        t = _template(os.path.join(d, "ca.info"), [f"cn = {cn}", "ca", "cert_signing_key", "expiration_days = 30"])
        _run("certtool", "--generate-self-signed", "--load-privkey", self.key, "--template", t,
             "--outfile", self.cert)

    def issue(self, d, prefix, cn, server=False, expired=False):
        """<prefix>-cert.pem and <prefix>-key.pem in `d`, with the CA's
        certificate as ca-cert.pem beside them."""
        os.makedirs(d, exist_ok=True)
        key = os.path.join(d, f"{prefix}-key.pem")
        _key(key)
        lines = [f"cn = {cn}", "signing_key", "encryption_key"]
        lines += ["tls_www_server", "dns_name = localhost", "ip_address = 127.0.0.1"] if server else ["tls_www_client"]
        if expired:
            lines += ['activation_date = "2020-01-01 00:00:00 UTC"', 'expiration_date = "2020-02-01 00:00:00 UTC"']
        else:
            lines += ["expiration_days = 30"]
        t = _template(os.path.join(d, f"{prefix}.info"), lines)
        _run("certtool", "--generate-certificate", "--load-privkey", key, "--load-ca-certificate", self.cert,
             "--load-ca-privkey", self.key, "--template", t, "--outfile", os.path.join(d, f"{prefix}-cert.pem"))
        if os.path.abspath(d) != os.path.abspath(self.dir):
            shutil.copy(self.cert, os.path.join(d, "ca-cert.pem"))
        return d

    def issue_with_cns(self, d, prefix, common_names):
        """<prefix>-cert.pem and <prefix>-key.pem in `d`: a client
        certificate whose subject is the CN attributes `common_names`, in
        that order, written as given (NUL bytes, any length); `d`, or None
        when python3-cryptography is missing."""
        import datetime
        try:
            from cryptography import x509
            from cryptography.hazmat.primitives import hashes, serialization
            from cryptography.hazmat.primitives.asymmetric import ec
            from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
        except ImportError:
            return None
        with open(self.key, "rb") as f:
            ca_key = serialization.load_pem_private_key(f.read(), None)
        with open(self.cert, "rb") as f:
            ca_cert = x509.load_pem_x509_certificate(f.read())
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.timezone.utc)
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn) for cn in common_names])
        cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(ca_cert.subject)
                .public_key(key.public_key()).serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(now + datetime.timedelta(days=30))
                .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
                .sign(ca_key, hashes.SHA256()))
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, f"{prefix}-cert.pem"), "wb") as f:
            f.write(cert.public_bytes(serialization.Encoding.PEM))
        with open(os.path.join(d, f"{prefix}-key.pem"), "wb") as f:
            f.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                      serialization.NoEncryption()))
        return d
