"""Stopping a training run by signal: SIGTERM (SLURM's time limit) or SIGINT (Ctrl-C; mpiexec
forwards it to every rank) asks every rank to stop after its current pack and write its
checkpoint. A second SIGINT raises KeyboardInterrupt at once, which aborts the job."""
import signal

# exit status of a run stopped by each signal: SIGTERM's 0 tells a batch script that the
# checkpoint is written (jobs/README.md); Ctrl-C's is the shell's 128 + SIGINT
EXIT_STATUS = {"SIGTERM": 0, "SIGINT": 130}


class StopRequest:
    """Installed for the training (``install``, then ``uninstall``): ``is_set()`` turns true at
    the first SIGTERM or SIGINT, whose name ``signal_name`` keeps (None before)."""

    def __init__(self):
        self.signal_name = None
        self._previous = {}

    def install(self):
        for signum in (signal.SIGTERM, signal.SIGINT):
            if signum == signal.SIGINT and signal.getsignal(signum) is signal.SIG_IGN:
                continue  # a background job's ignored Ctrl-C stays ignored
            self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def uninstall(self):
        """SIGINT interrupts at once again; SIGTERM stays caught, so the model is still written."""
        if signal.SIGINT in self._previous:
            signal.signal(signal.SIGINT, self._previous.pop(signal.SIGINT))

    def is_set(self):
        return self.signal_name is not None

    def _handle(self, signum, frame):
        if self.signal_name is None:
            self.signal_name = signal.Signals(signum).name
        if signum == signal.SIGINT:
            signal.signal(signal.SIGINT, signal.default_int_handler)


def report_stop(comm, say, stop, checkpoint, done, total):
    """Collective, after a run that ``stop`` (a StopRequest) ended at iteration ``done`` of
    ``total``: say where its state went (``checkpoint``, a path or None), then exit with the
    signal's status when it has one (SIGINT: 130); SIGTERM returns."""
    # the signal may have reached some ranks only: every rank takes the first one's
    name = next(filter(None, comm.allgather(stop.signal_name)), "SIGTERM")
    if checkpoint:
        say(f"stopped at iteration {done} of {total} ({name}); state saved to {checkpoint}; run the same command "
            "with --resume to continue")
    else:
        say(f"stopped at iteration {done} of {total} ({name}); nothing saved (no --checkpoint): run with "
            "--checkpoint PATH to be able to resume")
    if EXIT_STATUS[name]:
        raise SystemExit(EXIT_STATUS[name])
