"""Fast reader for LIBSVM / SVMlight sparse text (plain, gzip, bzip2 or xz).

Each data line is ``label idx:val idx:val ...`` with 1-based, strictly
ascending feature indices. Blank lines and ``# comments`` are skipped,
``qid:N`` tokens are ignored, and spaces, tabs and CRLF line ends are all
accepted. Rows whose indices are out of order are rejected rather than
silently reordered, because LIBSVM itself assumes ascending order.

The file is streamed in chunks cut at a newline, so memory is bounded by one
chunk plus the rows kept; ``iter_libsvm_chunks`` hands the chunks' rows out one
chunk at a time and keeps nothing. A numba kernel splits the chunk into tokens and
converts numbers; a number it cannot convert exactly (more than 18
significant digits, or a decimal exponent beyond +-22) is handed back and
converted with Python's ``float``, so every value is the correctly rounded
double.
"""

import bz2
import gzip
import lzma
import math
import os
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from ..errors import InputError
from ..jit import njit

CHUNK_BYTES = 4 << 20  # text parsed at once: bounds the memory of a streaming pass

_HDF5_MAGIC = b"\x89HDF\r\n\x1a\n"
_UTF8_BOM = b"\xef\xbb\xbf"


@dataclass(frozen=True)
class LibsvmInfo:
    """Whole-file statistics, the same for every row_range."""

    n_samples: int  # data lines in the file
    n_features: int  # the requested value, or the largest index seen
    max_row_nnz: int  # most index:value pairs on one line


# ---------------------------------------------------------------- numba core

# Status codes returned by _tokenize; _raise_parse_error turns them into text.
OK = 0
ERR_LABEL = 1
ERR_NO_COLON = 2
ERR_INDEX_SYNTAX = 3
ERR_INDEX_ZERO = 4
ERR_INDEX_HUGE = 5
ERR_INDEX_ORDER = 6
ERR_INDEX_RANGE = 7
ERR_VALUE = 8
ERR_VALUE_RANGE = 9

# _parse_decimal result codes.
NUM_EXACT = 0
NUM_SLOW = 1
NUM_BAD = 2

# Columns of the "slow token" table: byte span, line number, destination.
# Destination >= 0 is a position in the values array, -1 means "validate
# only" (row not kept) and -2 - k is the label of kept row k.
SLOW_START, SLOW_END, SLOW_LINE, SLOW_DEST = 0, 1, 2, 3
SLOW_SKIP = -1

MAX_INDEX = 2**31 - 1  # indices are stored as int32

# Powers of ten that are exact doubles; m * 10**e for m < 2**53 and |e| <= 22
# is then one correctly rounded IEEE operation (Clinger's fast path).
_POW10 = np.array([float(10**k) for k in range(23)])

_NL, _HASH, _COLON = 10, 35, 58


@njit(cache=True, inline="always")
def _is_space(c):
    # space, \t, \v, \f, \r -- '\r' makes CRLF files work unchanged
    return c == 32 or c == 9 or c == 11 or c == 12 or c == 13


@njit(cache=True, inline="always")
def _token_end(buf, i, n):
    while i < n:
        c = buf[i]
        if c == _NL or c == _HASH or _is_space(c):
            break
        i += 1
    return i


@njit(cache=True, inline="always")
def _digits(buf, i, b, mant, n_sig):
    """Read the decimal digits at buf[i:b], continuing the mantissa ``mant`` of ``n_sig``
    significant digits (the first 18 go to mant, which then stays below 2**63);
    returns (position after them, mant, n_sig, digits read)."""
    start = i
    while i < b and 48 <= buf[i] <= 57:
        d = buf[i] - 48
        if n_sig > 0 or d != 0:
            n_sig += 1
            if n_sig <= 18:
                mant = mant * 10 + d
        i += 1
    return i, mant, n_sig, i - start


@njit(cache=True)
def _parse_decimal(buf, a, b):
    """Parse buf[a:b] as ``[+-]digits[.digits][(e|E)[+-]digits]``.

    Returns (code, value); value is only meaningful for NUM_EXACT.
    """
    i = a
    neg = False
    if i < b and (buf[i] == 43 or buf[i] == 45):
        neg = buf[i] == 45
        i += 1
    # n_sig: significant digits seen (from the first non-zero one); the first 18 go to mant
    i, mant, n_sig, n_digits = _digits(buf, i, b, 0, 0)
    exp10 = 0
    if i < b and buf[i] == 46:
        i, mant, n_sig, n_fraction = _digits(buf, i + 1, b, mant, n_sig)
        n_digits += n_fraction
        exp10 -= n_fraction
    if n_digits == 0:
        return NUM_BAD, 0.0
    if i < b and (buf[i] == 101 or buf[i] == 69):
        i += 1
        eneg = False
        if i < b and (buf[i] == 43 or buf[i] == 45):
            eneg = buf[i] == 45
            i += 1
        if i == b:
            return NUM_BAD, 0.0
        e = 0
        while i < b and 48 <= buf[i] <= 57:
            if e < 100000:  # anything this large goes to the slow path anyway
                e = e * 10 + (buf[i] - 48)
            i += 1
        exp10 += -e if eneg else e
    if i != b:
        return NUM_BAD, 0.0
    if n_sig == 0:
        return NUM_EXACT, -0.0 if neg else 0.0
    if n_sig > 18 or mant > 2**53 or exp10 < -22 or exp10 > 22:
        return NUM_SLOW, 0.0
    v = float(mant)
    if exp10 >= 0:
        v *= _POW10[exp10]
    else:
        v /= _POW10[-exp10]
    return NUM_EXACT, -v if neg else v


@njit(cache=True, nogil=True)
def _tokenize(buf, line0, row0, keep_lo, keep_hi, max_index, value_limit,
              labels, row_nnz, row_line, indices, values, slow):
    """Parse one chunk of whole lines.

    buf is the chunk as uint8; line0 is the 1-based number of its first line
    and row0 the 0-based number of its first data row. Rows numbered in
    [keep_lo, keep_hi) are written to labels/row_nnz/row_line (one entry per
    kept row: label, pairs, 1-based line) and indices/values (one per kept
    pair). Writes past an output's length are dropped but still counted, so
    the caller can retry with exact sizes.

    Returns (status, err_line, err_start, err_end, err_aux, n_rows, n_kept,
    n_pairs, n_slow, max_idx, max_nnz).
    """
    n = buf.shape[0]
    cap_rows = labels.shape[0]
    cap_pairs = indices.shape[0]
    cap_slow = slow.shape[0]
    line = line0
    row = row0
    n_kept = 0
    n_pairs = 0
    n_slow = 0
    max_idx = 0
    max_nnz = 0
    i = 0
    while i < n:
        c = buf[i]
        if _is_space(c):
            i += 1
            continue
        if c == _NL:
            line += 1
            i += 1
            continue
        if c == _HASH:
            while i < n and buf[i] != _NL:
                i += 1
            continue

        # A data line: the label first.
        keep = keep_lo <= row < keep_hi
        a = i
        i = _token_end(buf, i, n)
        code, v = _parse_decimal(buf, a, i)
        if code == NUM_BAD:
            return (ERR_LABEL, line, a, i, 0, row - row0, n_kept, n_pairs,
                    n_slow, max_idx, max_nnz)
        if keep and n_kept < cap_rows:
            labels[n_kept] = v
        if code == NUM_SLOW:
            if n_slow < cap_slow:
                slow[n_slow, SLOW_START] = a
                slow[n_slow, SLOW_END] = i
                slow[n_slow, SLOW_LINE] = line
                slow[n_slow, SLOW_DEST] = -2 - n_kept if keep else SLOW_SKIP
            n_slow += 1

        # Then index:value pairs up to the end of the line or a comment.
        nnz = 0
        prev = 0
        while True:
            while i < n and _is_space(buf[i]):
                i += 1
            if i >= n or buf[i] == _NL or buf[i] == _HASH:
                break
            a = i
            i = _token_end(buf, i, n)
            colon = a
            while colon < i and buf[colon] != _COLON:
                colon += 1
            if colon == i:
                return (ERR_NO_COLON, line, a, i, 0, row - row0, n_kept,
                        n_pairs, n_slow, max_idx, max_nnz)
            if (colon - a == 3 and buf[a] == 113 and buf[a + 1] == 105
                    and buf[a + 2] == 100):  # "qid"
                continue
            if colon == a:
                return (ERR_INDEX_SYNTAX, line, a, i, 0, row - row0,
                        n_kept, n_pairs, n_slow, max_idx, max_nnz)
            idx = 0
            for j in range(a, colon):
                d = buf[j]
                if d < 48 or d > 57:
                    return (ERR_INDEX_SYNTAX, line, a, i, 0, row - row0,
                            n_kept, n_pairs, n_slow, max_idx, max_nnz)
                if idx <= MAX_INDEX:
                    idx = idx * 10 + (d - 48)
            if idx == 0:
                return (ERR_INDEX_ZERO, line, a, colon, 0, row - row0,
                        n_kept, n_pairs, n_slow, max_idx, max_nnz)
            if idx > MAX_INDEX:
                return (ERR_INDEX_HUGE, line, a, colon, 0, row - row0,
                        n_kept, n_pairs, n_slow, max_idx, max_nnz)
            if idx <= prev:
                return (ERR_INDEX_ORDER, line, a, colon, prev, row - row0,
                        n_kept, n_pairs, n_slow, max_idx, max_nnz)
            if max_index > 0 and idx > max_index:
                return (ERR_INDEX_RANGE, line, a, colon, max_index,
                        row - row0, n_kept, n_pairs, n_slow, max_idx, max_nnz)
            code, v = _parse_decimal(buf, colon + 1, i)
            if code == NUM_BAD:
                return (ERR_VALUE, line, a, i, 0, row - row0, n_kept,
                        n_pairs, n_slow, max_idx, max_nnz)
            if code == NUM_EXACT and abs(v) > value_limit:
                return (ERR_VALUE_RANGE, line, colon + 1, i, 0, row - row0, n_kept,
                        n_pairs, n_slow, max_idx, max_nnz)
            if keep:
                if n_pairs < cap_pairs:
                    indices[n_pairs] = idx - 1
                    values[n_pairs] = v
            if code == NUM_SLOW:
                if n_slow < cap_slow:
                    slow[n_slow, SLOW_START] = colon + 1
                    slow[n_slow, SLOW_END] = i
                    slow[n_slow, SLOW_LINE] = line
                    slow[n_slow, SLOW_DEST] = n_pairs if keep else SLOW_SKIP
                n_slow += 1
            if keep:
                n_pairs += 1
            nnz += 1
            prev = idx

        if keep:
            if n_kept < cap_rows:
                row_nnz[n_kept] = nnz
                row_line[n_kept] = line
            n_kept += 1
        if prev > max_idx:
            max_idx = prev
        if nnz > max_nnz:
            max_nnz = nnz
        row += 1
    return (OK, line, 0, 0, 0, row - row0, n_kept, n_pairs, n_slow, max_idx,
            max_nnz)


# ------------------------------------------------------------ python driver


def _open_stream(path):
    """Open path for binary reading, decompressing by magic bytes."""
    try:
        with open(path, "rb") as f:
            head = f.read(8)
    except FileNotFoundError:
        raise InputError("No such file", path) from None
    except IsADirectoryError:
        raise InputError("is a directory, expected a LIBSVM text file", path) from None
    except OSError as e:
        raise InputError(f"cannot open: {e.strerror or e}", path) from None
    if head.startswith(b"\x1f\x8b"):
        return gzip.open(path, "rb"), "gzip"
    if head.startswith(b"BZh") and head[3:4].isdigit():
        return bz2.open(path, "rb"), "bzip2"
    if head.startswith(b"\xfd7zXZ\x00"):
        return lzma.open(path, "rb"), "xz"
    if head.startswith(_HDF5_MAGIC):
        raise InputError("is an HDF5 file, expected LIBSVM text", path)
    return open(path, "rb"), None


def _chunks(stream, chunk_bytes):
    """Yield (data, length): data[:length] holds only whole lines.

    The last chunk may lack a final newline.
    """
    carry = b""
    while True:
        block = stream.read(chunk_bytes)
        if not block:
            if carry:
                yield carry, len(carry)
            return
        data = carry + block if carry else block
        block = None  # one copy of the text at a time
        cut = data.rfind(b"\n") + 1
        if cut == 0:  # a line longer than a chunk: read more
            carry = data
            continue
        yield data, cut
        carry = data[cut:]
        data = None


def _token_text(buf, a, b, limit=40):
    text = bytes(buf[a:b]).decode("utf-8", errors="replace")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _is_non_finite(text):
    return text.lstrip("+-").lower() in ("nan", "inf", "infinity")


def _raise_parse_error(path, buf, status, line, a, b, aux, n_features):
    tok = _token_text(buf, a, b)
    where = f"line {line}: "
    if status == ERR_LABEL:
        if _is_non_finite(tok):
            msg = f"non-finite label '{tok}'"
        else:
            msg = f"expected a numeric label, got '{tok}'"
    elif status == ERR_NO_COLON:
        msg = f"expected 'index:value', got '{tok}'"
    elif status == ERR_INDEX_SYNTAX:
        msg = f"expected a positive integer feature index (indices are 1-based), got '{tok}'"
    elif status == ERR_INDEX_ZERO:
        msg = f"feature index {tok} is invalid: indices are 1-based"
    elif status == ERR_INDEX_HUGE:
        msg = f"feature index {tok} is too large (at most {MAX_INDEX})"
    elif status == ERR_INDEX_ORDER:
        if int(tok) == aux:
            msg = f"duplicate feature index {aux}"
        else:
            msg = (f"feature indices must be strictly ascending: "
                   f"{int(tok)} follows {aux}")
    elif status == ERR_INDEX_RANGE:
        msg = f"feature index {int(tok)} exceeds n_features={n_features}"
    elif status == ERR_VALUE:
        value = tok.split(":", 1)[1] if ":" in tok else tok
        if _is_non_finite(value):
            msg = f"non-finite value '{value}'"
        else:
            msg = f"expected a number after ':', got '{tok}'"
    elif status == ERR_VALUE_RANGE:
        msg = f"value '{tok}' does not fit the requested float32"
    else:  # pragma: no cover - guards against a new code without a message
        msg = f"parse error {status}"
    raise InputError(where + msg, path)


@dataclass(frozen=True)
class LibsvmChunk:
    """The kept data rows of one chunk of text, as pieces of a CSR matrix."""

    first_row: int  # 0-based number of the first kept row
    labels: np.ndarray  # float64 (kept rows,)
    indptr: np.ndarray  # int64 (kept rows + 1,), from 0: row r is pairs indptr[r]:indptr[r+1]
    indices: np.ndarray  # int32 (pairs,): 0-based columns, ascending within a row
    values: np.ndarray  # float64 (pairs,)
    lines: np.ndarray  # int64 (kept rows,): 1-based text line of each row
    n_rows: int  # data rows in the chunk, kept or not
    max_index: int  # largest 1-based feature index of any row in the chunk, 0 if none
    max_row_nnz: int  # most pairs on one row of the chunk

    def line_of_pair(self, k):
        """The text line of the row holding pair k (0-based within the chunk)."""
        return int(self.lines[int(np.searchsorted(self.indptr, k, side="right")) - 1])


class _Parser:
    """Feeds chunks to _tokenize; returns each chunk's kept rows."""

    def __init__(self, path, n_features, keep_lo, keep_hi, value_limit):
        self.path = path
        self.n_features = n_features
        self.keep_lo = keep_lo
        self.keep_hi = keep_hi
        self.value_limit = value_limit
        self.line = 1  # 1-based number of the next chunk's first line
        self.row = 0  # 0-based number of the next chunk's first data row
        self.slow_cap = 1024

    def feed(self, data, length):
        """Parse data[:length] (whole lines); returns a LibsvmChunk."""
        buf = np.frombuffer(data, dtype=np.uint8, count=length)
        if self.line == 1 and data.startswith(_UTF8_BOM):
            buf = buf[len(_UTF8_BOM):]
        # Upper bounds: a row per line, a pair per colon.
        row_cap = data.count(b"\n", 0, length) + 1
        if self.row >= self.keep_hi or self.row + row_cap <= self.keep_lo:
            row_cap = pair_cap = 0
        else:
            row_cap = min(row_cap, self.keep_hi - max(self.row, self.keep_lo))
            pair_cap = data.count(b":", 0, length)
        slow_cap = self.slow_cap
        while True:
            labels = np.empty(row_cap, np.float64)
            row_nnz = np.empty(row_cap, np.int64)
            row_line = np.empty(row_cap, np.int64)
            indices = np.empty(pair_cap, np.int32)
            values = np.empty(pair_cap, np.float64)
            slow = np.empty((slow_cap, 4), np.int64)
            (status, err_line, err_a, err_b, aux, n_rows, n_kept, n_pairs,
             n_slow, max_idx, max_nnz) = _tokenize(
                buf, np.int64(self.line), np.int64(self.row),
                np.int64(self.keep_lo), np.int64(self.keep_hi),
                np.int64(self.n_features or 0), np.float64(self.value_limit),
                labels, row_nnz, row_line, indices, values, slow)
            if n_kept <= row_cap and n_pairs <= pair_cap and n_slow <= slow_cap:
                break
            row_cap = max(row_cap, n_kept)
            pair_cap = max(pair_cap, n_pairs)
            slow_cap = self.slow_cap = max(slow_cap, n_slow)

        # Slow tokens all precede any error position, so convert them first:
        # a non-finite one is the earlier error.
        self._convert_slow(buf, slow[:n_slow], labels, values)
        if status != OK:
            _raise_parse_error(self.path, buf, status, err_line, err_a, err_b,
                               aux, self.n_features)

        indptr = np.zeros(n_kept + 1, np.int64)
        np.cumsum(row_nnz[:n_kept], out=indptr[1:])
        chunk = LibsvmChunk(max(self.row, self.keep_lo), _trim(labels, n_kept), indptr,
                            _trim(indices, n_pairs), _trim(values, n_pairs), _trim(row_line, n_kept),
                            int(n_rows), int(max_idx), int(max_nnz))
        self.line += data.count(b"\n", 0, length)
        self.row += n_rows
        return chunk

    def _convert_slow(self, buf, slow, labels, values):
        for start, end, line, dest in slow:
            text = bytes(buf[start:end])
            v = float(text)
            is_label = dest <= -2
            if not math.isfinite(v):
                what = "label" if is_label else "value"
                raise InputError(f"line {line}: non-finite {what} '{_token_text(buf, start, end)}'",
                                 self.path)
            if not is_label and abs(v) > self.value_limit:
                raise InputError(f"line {line}: value '{_token_text(buf, start, end)}' does not "
                                 f"fit the requested float32", self.path)
            if is_label:
                labels[-2 - dest] = v
            elif dest >= 0:
                values[dest] = v


def _trim(a, n):
    # Copy when part of the buffer is unused so the big chunk buffer is freed.
    return a if n == len(a) else a[:n].copy()


def iter_libsvm_chunks(path, n_features=None, row_range=None, dtype=np.float64):
    """Parse a LIBSVM/SVMlight text file chunk by chunk, keeping nothing between chunks.

    path, n_features, row_range: as for read_libsvm. dtype: float32 makes a value
    beyond float32's range an error; the values come as float64 either way.
    Returns an iterator of LibsvmChunk, one per chunk of text (CHUNK_BYTES of whole
    lines), in file order; every chunk comes, also those without kept rows. Raises
    InputError for bad arguments at once, and for missing, unreadable or malformed
    files (naming the file and line) or a file without data rows while iterating.
    """
    dtype = np.dtype(dtype)
    if dtype not in (np.float32, np.float64):
        raise InputError(f"dtype must be float32 or float64, got {dtype}")
    if n_features is not None:
        n_features = int(n_features)
        if not 1 <= n_features <= MAX_INDEX:
            raise InputError(f"n_features must be between 1 and {MAX_INDEX}, got {n_features}")
    if row_range is None:
        keep_lo, keep_hi = 0, 2**62
    else:
        keep_lo, keep_hi = (int(r) for r in row_range)
        if not 0 <= keep_lo <= keep_hi:
            raise InputError(f"row_range must satisfy 0 <= start <= stop, got {tuple(row_range)}")
    parser = _Parser(os.fspath(path), n_features, keep_lo, keep_hi, float(np.finfo(dtype).max))
    return _parse_chunks(parser)


def _parse_chunks(parser):
    stream, codec = _open_stream(parser.path)
    with stream:
        chunks = _chunks(stream, CHUNK_BYTES)
        while True:
            try:
                item = next(chunks, None)
            except (OSError, EOFError, lzma.LZMAError) as e:
                raise InputError(f"cannot decompress {codec or 'file'} data: {e}",
                                 parser.path) from None
            if item is None:
                break
            chunk = parser.feed(*item)
            item = None  # the text is parsed: free it before the rows are used
            yield chunk
            chunk = None  # free the rows before the next chunk is parsed
    if parser.row == 0:
        raise InputError("no data lines (the file is empty or holds only "
                         "blank lines and comments)", parser.path)


def read_libsvm(path, n_features=None, row_range=None, dtype=np.float64):
    """Read a LIBSVM/SVMlight text file, keeping the rows in row_range.

    path: plain, gzip, bzip2 or xz text (detected by magic bytes).
    n_features: number of columns; indices above it are an error. None means
        the largest index in the file.
    row_range: (start, stop) of 0-based data-row numbers to keep, like a
        Python slice (stop may exceed the row count). None keeps all rows.
        The whole file is scanned and validated either way.
    dtype: float64 or float32 for the values.

    Returns (X, y, info): X is a CSR matrix of shape (kept rows, n_features)
    with int32 column indices (0-based, ascending), y the kept rows' labels
    (float64, length kept rows) and info a LibsvmInfo for the whole file.
    Raises InputError for missing, unreadable or malformed files.
    """
    n_rows = max_idx = max_nnz = 0
    parts = []  # (labels, row_nnz, indices, values) of chunks with kept rows
    for chunk in iter_libsvm_chunks(path, n_features, row_range, dtype):
        n_rows += chunk.n_rows
        max_idx = max(max_idx, chunk.max_index)
        max_nnz = max(max_nnz, chunk.max_row_nnz)
        if len(chunk.labels):
            parts.append((chunk.labels, np.diff(chunk.indptr), chunk.indices, chunk.values))
    n_features = int(n_features) if n_features is not None else max_idx
    info = LibsvmInfo(n_rows, n_features, max_nnz)
    if parts:
        labels, row_nnz, indices, values = (np.concatenate(p) for p in zip(*parts))
    else:
        labels, row_nnz = np.empty(0), np.empty(0, np.int64)
        indices, values = np.empty(0, np.int32), np.empty(0)
    indptr = np.zeros(len(labels) + 1, np.int64)
    np.cumsum(row_nnz, out=indptr[1:])
    X = sp.csr_matrix((values.astype(dtype, copy=False), indices, indptr),
                      shape=(len(labels), n_features))
    X.has_sorted_indices = True
    return X, labels, info
