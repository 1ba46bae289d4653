"""The signals that stop a training run (``cli.stop.StopRequest``), in this process."""
import os
import signal

import pytest

from ppack.cli.stop import EXIT_STATUS, StopRequest


@pytest.fixture
def handlers():
    """The process's SIGINT and SIGTERM handlers, restored after the test; SIGINT starts at
    Python's own handler, as in a terminal (a shell's background job starts with it ignored,
    which ``StopRequest`` leaves alone)."""
    saved = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    for signum, handler in saved.items():
        signal.signal(signum, handler)


def test_the_first_ctrl_c_asks_to_stop_and_the_second_interrupts(handlers):
    stop = StopRequest().install()
    assert not stop.is_set()
    os.kill(os.getpid(), signal.SIGINT)
    assert stop.is_set() and stop.signal_name == "SIGINT"
    with pytest.raises(KeyboardInterrupt):
        os.kill(os.getpid(), signal.SIGINT)
    assert EXIT_STATUS[stop.signal_name] == 130


def test_sigterm_asks_to_stop_and_stays_caught_after_the_training(handlers):
    stop = StopRequest().install()
    os.kill(os.getpid(), signal.SIGTERM)
    os.kill(os.getpid(), signal.SIGINT)  # the first signal names the stop
    assert stop.signal_name == "SIGTERM" and EXIT_STATUS["SIGTERM"] == 0
    stop.uninstall()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    os.kill(os.getpid(), signal.SIGTERM)  # caught while the model is written: no exit
    with pytest.raises(KeyboardInterrupt):
        os.kill(os.getpid(), signal.SIGINT)


def test_an_ignored_ctrl_c_stays_ignored(handlers):
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    stop = StopRequest().install()
    os.kill(os.getpid(), signal.SIGINT)
    assert not stop.is_set()
    stop.uninstall()
    assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
