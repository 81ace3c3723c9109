"""A planned restart that fails must not disrupt the clients still in the
handshake. The old daemon used to answer their next option
NBD_REP_ERR_SHUTDOWN as soon as the hand-over began, so a hand-over that
then failed (the new process died or refused) had sent them away for
nothing, while the daemon served on. Now their options wait until the
hand-over is decided: a failed one answers them as usual, one that
succeeds answers NBD_REP_ERR_SHUTDOWN (test_handover_handshake.py).

The new process is played by the test on the hand-over socket
(nbdsched_test.handover): it asks "takeover", gets the state, and answers
"failed". Three clients of the old daemon: one had LIST answered and sends
its next option (LIST) once the hand-over began; one sent the header and
part of the data of a GO before it and sends the rest then; one greeted
and stays silent throughout. After the failed hand-over the LIST is
answered (an ACK after the export list), the GO opens the export and a
WRITE and READ over it are answered; the silent client is still open and
its GO opens the export too. None was answered NBD_REP_ERR_SHUTDOWN.

Then the same with handshake_timeout: 1s and a new process that takes
2.5 s to answer "failed": the clients whose option waits for the outcome
are not dropped by that timeout (the silent one is, by its own delay)."""
import time

from nbdsched_test.handover import Generations, connect_handover, handover_message, handover_reply
from nbdsched_test.process import wait_for
from nbdsched_test.raw_nbd import OPT_GO, REP_ACK, send_option, write_then_read
from nbdsched_test.verdict import Checks
from test_handover_handshake import CONFIG, GO, OPT_LIST, final_reply, old_with_handshakes


def outcome(s):
    """final_reply(s), or what went wrong instead."""
    try:
        return final_reply(s)
    except (OSError, EOFError, AssertionError) as e:
        return f"{type(e).__name__}: {e}"


def failed_handover(checks, tag, config, verdict_after, silent_served):
    """One old daemon, its three clients, and a hand-over that the played
    new process fails `verdict_after` seconds after it got the state.
    `silent_served`: the silent client is expected to be served after it."""
    with Generations(tag) as g:
        handover = g.tmp.file("handover.sock")
        _, _, between, midway, silent = old_with_handshakes(g, checks, config)
        new = connect_handover(handover)
        handover_message(new, "takeover")
        checks.check(f"{tag}: the hand-over begins", wait_for(lambda: "hand-over: parking" in g.log("old"), 10),
                     g.log("old")[-1500:])
        time.sleep(0.1)   # the line comes just before the connections are told
        send_option(between, OPT_LIST)
        midway.sendall(GO[19:])
        time.sleep(0.3)   # both options are in before the verdict
        state = handover_reply(new)
        checks.check(f"{tag}: the old daemon passes its state", state.startswith("state "), state[:200])
        time.sleep(verdict_after)
        handover_message(new, "failed played by the test: the new process gives up")
        new.close()
        checks.check(f"{tag}: the old daemon logs the failed hand-over and serves on",
                     wait_for(lambda: "hand-over failed" in g.log("old"), 10), g.log("old")[-1500:])

        got = outcome(between)
        checks.check(f"{tag}: the LIST sent during the failed hand-over is answered as usual (not "
                     "NBD_REP_ERR_SHUTDOWN)", got == (OPT_LIST, REP_ACK), f"got {got}")
        got = outcome(midway)
        checks.check(f"{tag}: the GO completed during the failed hand-over opens the export",
                     got == (OPT_GO, REP_ACK), f"got {got}")
        checks.check(f"{tag}: a WRITE and a READ over it are answered",
                     got == (OPT_GO, REP_ACK) and write_then_read(midway, 0))
        if silent_served:
            try:
                silent.sendall(GO)
            except OSError:
                pass   # the outcome says what came instead
            got = outcome(silent)
            checks.check(f"{tag}: the client silent during the failed hand-over is still open: its GO opens the "
                         "export", got == (OPT_GO, REP_ACK), f"got {got}")
        checks.check(f"{tag}: no client was answered NBD_REP_ERR_SHUTDOWN", "NBD_REP_ERR_SHUTDOWN" not in g.log("old"),
                     g.log("old")[-1500:])
        for s in (between, midway, silent):
            s.close()
        g.print_logs_if_failed(checks, "old")


def main():
    checks = Checks()
    failed_handover(checks, "failed", CONFIG, 0, True)
    failed_handover(checks, "slow", CONFIG.replace("handshake_timeout: 60s", "handshake_timeout: 1s"), 2.5, False)
    checks.finish()


if __name__ == "__main__":
    main()
