"""The one user-error type: the message names the file or option, what was expected and what came;
parameters named as the caller gave them (``given``: Python keywords, or the command line's flags)."""
from contextlib import contextmanager


class PPackError(ValueError):
    """An error the user can fix (bad input, bad option); printed without a traceback.

    A ``ValueError``, so code that validates arguments the scikit-learn way keeps working.
    ``collective`` is True when every rank raised it at the same point (see
    ``mpi.comm.agree``), so the job can exit cleanly instead of being aborted.

    Parameters
    ----------
    message : str
        One line: the file, parameter or option, what was expected and what came.
    collective : bool, default=False
        Every rank raised it at the same point.
    """

    def __init__(self, message, collective=False):
        super().__init__(message)
        self.collective = collective


class InputError(PPackError):
    """A data, model or option problem, tied to a file when there is one.

    Parameters
    ----------
    message : str
        What was expected and what came.
    path : str, os.PathLike or None, default=None
        The file, which the message then starts with.
    collective : bool, default=False
        Every rank raised it at the same point.
    """

    def __init__(self, message, path=None, collective=False):
        self.path = None if path is None else str(path)
        super().__init__(f"{self.path}: {message}" if self.path else message, collective)


# {parameter name: command-line flag} while the command line runs a command (``naming_flags``)
_FLAGS = {}
_NO_VALUE = object()


def given(name, value=_NO_VALUE):
    """A parameter as an error message names it: ``name`` or ``name=value`` (the Python
    keyword, value as repr gives it), or, while the command line runs, its flag: ``--name``,
    ``--name value``, or the switch alone for True (False for a ``--no-`` switch)."""
    flag = _FLAGS.get(name)
    if flag is None:
        return name if value is _NO_VALUE else f"{name}={value!r}"
    if value is _NO_VALUE or isinstance(value, bool):
        return flag
    return f"{flag} {value}"


@contextmanager
def naming_flags(flags):
    """Within: ``given`` names the parameters in ``flags`` ({name: flag}) by their flags."""
    saved = dict(_FLAGS)
    _FLAGS.update(flags)
    try:
        yield
    finally:
        _FLAGS.clear()
        _FLAGS.update(saved)
