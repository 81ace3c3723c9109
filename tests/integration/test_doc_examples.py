"""The configuration examples of the documentation load: every ```yaml block
of README.md and docs/*.md goes through `nbdsched --check-config` (or
`nbdsched-sim` for a simulator workload), and a failure names the page and
line of the block and prints the daemon's errors at their page lines.

The word after `yaml` on the opening fence says what a block is (DEVELOPERS.md,
"Configuration examples in the documentation"):

  ```yaml               a configuration: --check-config accepts it. One that
                        leaves out the required devices or exports for
                        brevity is completed first: a 1 TiB RAM device for
                        every `device:` it names and does not define, and an
                        export `default` of its first device when it has no
                        `exports:` (appended, so its lines keep their numbers)
  ```yaml invalid       a configuration the daemon refuses: --check-config
                        exits 1 and every error it prints (for a file named
                        nbdsched.yaml) is quoted on the same page; and every
                        `nbdsched.yaml:LINE:COL: ...` line a page quotes is
                        printed for one of its invalid blocks (none stale)
  ```yaml nbdsched-sim  a simulator workload: nbdsched-sim runs it, exit 0

Files a check reads are provided: the values of `psk_file:` and
`certificates:` are replaced by a fresh PSK file and a certificate directory
(server-cert.pem, server-key.pem, ca-cert.pem), since --check-config loads
them. What this host cannot decide is reported and not held against the
example: a user or group name it does not know (`group: kvm`), and, in a
binary built without librbd, an rbd device (that block counts as skipped).
The run fails when no block was checked.

Usage: test_doc_examples.py [SOURCE_ROOT [NBDSCHED_SIM]] with $NBDSCHED set;
without nbdsched-sim (or $NBDSCHED_SIM) workloads count as skipped."""
import glob
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile

from nbdsched_test.verdict import skip

KINDS = ("config", "invalid", "nbdsched-sim")
FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*(.*)$")
ERROR = re.compile(r"^nbdsched\.yaml:(\d+):(\d+): (.*)$")
# What depends on the host, not on the example.
HOST_NAME = re.compile(r"unknown (user|group) '[^']*' \(not in the (passwd|group) database\)$")
NO_RBD = "rbd is not built into this nbdsched"
LABEL = {"ok": "ok  ", "skip": "SKIP", "fail": "FAIL"}


class Block:
    def __init__(self, page, line, kind, text):
        self.page = page   # path relative to the source root
        self.line = line   # page line of the block's first line
        self.kind = kind
        self.text = text

    def where(self, line=1):
        return f"{self.page}:{self.line + line - 1}"


def yaml_blocks(root, page, problems):
    """The ```yaml blocks of one page, in order."""
    blocks = []
    with open(os.path.join(root, page), encoding="utf-8") as f:
        lines = f.read().split("\n")
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, info = len(m.group(1)), m.group(2), m.group(3).split()
        body, j = [], i + 1
        while j < len(lines):
            close = FENCE.match(lines[j])
            if close and close.group(2).startswith(fence) and not close.group(3):
                break
            body.append(lines[j][indent:] if lines[j][:indent].strip() == "" else lines[j])
            j += 1
        if info and info[0] in ("yaml", "yml"):
            words = info[1:]
            if not words:
                blocks.append(Block(page, i + 2, "config", "\n".join(body) + "\n"))
            elif len(words) == 1 and words[0] in KINDS[1:]:
                blocks.append(Block(page, i + 2, words[0], "\n".join(body) + "\n"))
            else:
                problems.append(f"{page}:{i + 1}: unknown kind of yaml block '{' '.join(words)}' "
                                f"(after yaml: nothing, invalid or nbdsched-sim)")
        i = j + 1
    return blocks


def complete(text):
    """`text` with a RAM device for every device its exports name when it
    has no devices, and an export of its first device when it has no
    exports; appended, so its lines keep their numbers. The same text when
    it has both."""
    extra = ""
    defined = re.search(r"^devices:", text, re.M)
    if not defined:
        names = list(dict.fromkeys(re.findall(r"\bdevice:\s*([\w.-]+)", text))) or ["d0"]
        extra += "devices:\n" + "".join(f"  - {{name: {n}, size: 1TiB}}\n" for n in names)
    if not re.search(r"^exports:", text, re.M):
        if defined:
            first = re.search(r"\bname:\s*([\w.-]+)", text[defined.end():])
            device = first.group(1) if first else "d0"
        else:
            device = names[0]
        extra += f"exports:\n  - {{name: default, device: {device}}}\n"
    return text + extra


class TlsFiles:
    """A PSK file and a certificate directory, made when a block needs them."""

    def __init__(self, tmp):
        self.tmp = tmp
        self.psk = None
        self.certs = None

    def psk_file(self):
        if not self.psk:
            self.psk = os.path.join(self.tmp, "keys.psk")
            with open(self.psk, "w") as f:
                f.write(f"alice:{secrets.token_hex(32)}\n")
        return self.psk

    def certificates(self):
        """The directory, or None when openssl is missing."""
        if not self.certs and shutil.which("openssl"):
            d = os.path.join(self.tmp, "pki")
            os.makedirs(d)
            subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                            "-nodes", "-keyout", os.path.join(d, "server-key.pem"),
                            "-out", os.path.join(d, "server-cert.pem"), "-subj", "/CN=localhost", "-days", "30"],
                           check=True, capture_output=True, timeout=60)
            shutil.copy(os.path.join(d, "server-cert.pem"), os.path.join(d, "ca-cert.pem"))
            self.certs = d
        return self.certs


def provide_files(text, tls):
    """`text` with its tls: files replaced by real ones; None when one
    cannot be made here."""
    for key, make in (("psk_file", tls.psk_file), ("certificates", tls.certificates)):
        pattern = re.compile(rf"^(\s*{key}:\s*)[^\s#]+", re.M)
        if pattern.search(text):
            path = make()
            if not path:
                return None
            text = pattern.sub(lambda m: m.group(1) + path, text)
    return text


def check_config(nbdsched, block, text, page_text, tmp, printed):
    """(verdict, lines): verdict is 'ok', 'skip' or 'fail'. The error lines
    of an invalid block are added to `printed`."""
    path = os.path.join(tmp, "nbdsched.yaml")
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    r = subprocess.run([nbdsched, "--check-config", "nbdsched.yaml"], cwd=tmp, capture_output=True, text=True,
                       timeout=60)
    errors, notes, other = [], [], []
    for line in r.stderr.splitlines():
        m = ERROR.match(line)
        if not m:
            other.append(line)
            continue
        at = f"{block.where(int(m.group(1)))}:{m.group(2)}: {m.group(3)}"
        if HOST_NAME.search(m.group(3)):
            notes.append(f"not on this host: {at}")
        elif NO_RBD in m.group(3):
            notes.append(f"rbd not built: {at}")
        else:
            errors.append((line, at))
    if any(n.startswith("rbd not built") for n in notes) and not errors:
        return "skip", notes
    if block.kind == "invalid":
        printed.update(line for line, _ in errors)
        if r.returncode != 1 or not errors:
            return "fail", notes + [f"expected to be refused, but --check-config exited {r.returncode}"] + other
        unquoted = [at for line, at in errors if line not in page_text]
        if unquoted:
            return "fail", notes + [f"not quoted on {block.page}: {at}" for at in unquoted]
        return "ok", notes + [f"refused as quoted ({len(errors)} errors)"]
    if errors or other or (r.returncode != 0 and not notes):
        return "fail", notes + [at for _, at in errors] + other + [f"--check-config exited {r.returncode}"]
    return "ok", notes


def check_workload(sim, block, tmp):
    path = os.path.join(tmp, "workload.yaml")
    with open(path, "w", encoding="utf-8") as f:
        f.write(block.text)
    r = subprocess.run([sim, path], cwd=tmp, capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        return "fail", [f"nbdsched-sim exited {r.returncode}"] + r.stderr.replace(path, block.page).splitlines()
    return "ok", []


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    nbdsched = os.environ.get("NBDSCHED")
    if not nbdsched or not os.access(nbdsched, os.X_OK):
        skip("nbdsched not built (NBDSCHED unset)")
    sim = os.path.abspath(sys.argv[2]) if len(sys.argv) > 2 else os.environ.get("NBDSCHED_SIM")
    pages = ["README.md"] + sorted(os.path.relpath(p, root) for p in glob.glob(os.path.join(root, "docs", "*.md")))
    problems, blocks, texts = [], [], {}
    for page in pages:
        blocks += yaml_blocks(root, page, problems)
        with open(os.path.join(root, page), encoding="utf-8") as f:
            texts[page] = f.read()
    counts = {kind: 0 for kind in KINDS}
    skipped = completed = 0
    printed = {}   # page: the error lines its invalid blocks made the daemon print
    tmp = tempfile.mkdtemp(prefix="nbdsched-doc-examples-")
    try:
        tls = TlsFiles(tmp)
        for b in blocks:
            work = tempfile.mkdtemp(dir=tmp)
            if b.kind == "nbdsched-sim":
                if not sim or not os.access(sim, os.X_OK):
                    verdict, lines = "skip", ["nbdsched-sim not built (NBDSCHED_SIM unset)"]
                else:
                    verdict, lines = check_workload(sim, b, work)
            else:
                text = complete(b.text) if b.kind == "config" else b.text
                added = text[len(b.text):]
                given = text
                text = provide_files(text, tls)
                if text is None:
                    verdict, lines = "skip", ["openssl not installed: no certificates to check tls.certificates with"]
                else:
                    verdict, lines = check_config(nbdsched, b, text, texts[b.page], work,
                                                  printed.setdefault(b.page, set()))
                    if text != given:
                        lines.append("tls: files replaced by generated ones")
                    if added:
                        lines.append("completed with: " + " ".join(added.split()))
                        completed += verdict == "ok"
            print(f"{LABEL[verdict]} {b.where()}: yaml {b.kind}")
            for line in lines:
                print(f"       {line}")
            if verdict == "fail":
                problems.append(f"{b.where()}: yaml {b.kind} block (the errors are above)")
            elif verdict == "skip":
                skipped += 1
            else:
                counts[b.kind] += 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    # The other way round: an error quoted for nbdsched.yaml that no invalid
    # block of its page makes the daemon print any more is stale.
    for page, text in texts.items():
        for i, line in enumerate(text.split("\n"), 1):
            if ERROR.match(line.strip()) and line.strip() not in printed.get(page, ()):
                problems.append(f"{page}:{i}: quoted, but no invalid block of the page makes the daemon print it: "
                                f"{line.strip()}")
    checked = sum(counts.values())
    print(f"checked {checked} of {len(blocks)} yaml blocks in {len(pages)} pages: "
          + ", ".join(f"{n} {kind}" for kind, n in counts.items())
          + f" ({completed} configurations completed with devices or exports); {skipped} skipped")
    if checked == 0:
        problems.append("no yaml block was checked")
    for p in problems:
        print(f"FAIL {p}")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
