"""The one user-error type: the message names the file or option, what was expected and what came."""


class PPackError(ValueError):
    """An error the user can fix (bad input, bad option); printed without a traceback.

    A ``ValueError``, so code that validates arguments the scikit-learn way keeps working.
    ``collective`` is True when every rank raised it at the same point (see
    ``mpi.comm.agree``), so the job can exit cleanly instead of being aborted.
    """

    def __init__(self, message, collective=False):
        super().__init__(message)
        self.collective = collective


class InputError(PPackError):
    """A data, model or option problem, tied to a file when there is one."""

    def __init__(self, message, path=None, collective=False):
        self.path = None if path is None else str(path)
        super().__init__(f"{self.path}: {message}" if self.path else message, collective)
