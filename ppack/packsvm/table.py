"""One rank's shard of the distributed support-vector hash table: keys and coefficients.

Entries are (key = global row id, coefficient beta); their feature vectors and norms are
the stored rows of the table's ``kernels.compute.KernelCompute``, in the same order.
``key_slots.KeySlots`` maps key -> slot (a numba hash map). The SGD never removes entries; the dual
drops those whose coefficients all returned to 0 (``drop_zeros``). The model is ``w =
scale * sum_j beta_j phi(x_j)`` over the entries of all shards.
"""
import math

import numpy as np

from ..collective_write import Part
from ..jit import njit
from ..kernels.stored import append_positions, resized, writable
from .key_slots import KeySlots, lookup, new_map, put


class SupportVectorTable:
    """Support vectors of one rank: ``keys`` (n,), ``coef`` (n, n_columns), and through
    ``compute`` (a KernelCompute, which owns them) their features and ``norms`` (n,).

    Coefficients are float64, one column per binary problem (1 for a binary model, K for K
    classes one-vs-rest, which share their support vectors: a row is an entry when any class
    gave it a coefficient). ``averaged`` tables also keep ``avg``, the weighted sum of each
    coefficient so far (``averaging.py``), brought up to date lazily: an entry's stored sum
    lacks ``coef * (avg_clock - since)``, the packs' increments (``avg_clock`` (n_columns,),
    the same on every rank) since the entry was last touched (``since`` (n, n_columns)).
    """

    def __init__(self, compute, n_columns=1, averaged=False):
        self.compute = compute
        self.n_columns = int(n_columns)
        self.averaged = bool(averaged)
        self.n = 0
        self.key_slots = KeySlots()
        cap = 64
        self._keys = np.empty(cap, dtype=np.int64)
        self._coef = np.empty((cap, self.n_columns))
        self._avg = np.empty((cap if averaged else 0, self.n_columns))
        self._since = np.empty((cap if averaged else 0, self.n_columns))
        self.avg_clock = np.zeros(self.n_columns)

    def __setstate__(self, state):
        self.__dict__.update(writable(state))

    def __len__(self):
        return self.n

    @property
    def nbytes(self):
        """Bytes allocated for the entries and their rows (capacity, not just the live ones), the key map aside."""
        return int(self._keys.nbytes + self._coef.nbytes + self._avg.nbytes + self._since.nbytes
                   + self.compute.stored.nbytes)

    # -- views of the live entries -------------------------------------------------
    @property
    def keys(self):
        return self._keys[:self.n]

    @property
    def coef(self):
        """(n, n_columns)."""
        return self._coef[:self.n]

    @property
    def avg(self):
        """(n, n_columns) running weighted sums of the coefficients (averaged tables), up to date:
        a new array (the stored lazy sums are ``lazy_avg``)."""
        return self._avg[:self.n] + self.coef * (self.avg_clock - self._since[:self.n])

    @property
    def lazy_avg(self):
        """(stored sums (n, n_columns), since (n, n_columns)), as kept (a checkpoint saves them
        with ``avg_clock``, so that a resumed run rounds as an uninterrupted one)."""
        return self._avg[:self.n], self._since[:self.n]

    @property
    def norms(self):
        return self.compute.stored.norms

    @property
    def features(self):
        """Dense (n, n_features) features, or the CSR triple (indptr, indices, values)."""
        return self.compute.stored.features

    @property
    def sparse(self):
        return self.compute.stored.sparse

    @property
    def dtype(self):
        """The feature storage type (float32 or float64)."""
        return self.compute.stored.dtype

    @property
    def n_features(self):
        return self.compute.stored.n_features

    # -- hash-table operations -----------------------------------------------------
    def slots_of(self, keys):
        """Slots of ``keys`` (int64 array), -1 for a key this shard does not hold: int64 array."""
        return self.key_slots.lookup(keys)

    def holds(self, keys):
        """Whether each of ``keys`` (int64 array) has an entry in this shard: bool array."""
        return self.key_slots.lookup(keys) >= 0

    def insert_many(self, keys, coef, X, norms=None, avg=None, since=None):
        """New entries: keys (k,), coef (k,) or (k, n_columns), X dense (k, d) or scipy CSR or a
        CSR triple with k rows and their norms (k,) (computed when None); for averaged tables
        ``avg`` as coef (zeros if None) and ``since`` (the clock today if None)."""
        keys = np.asarray(keys, dtype=np.int64).reshape(-1)
        k = len(keys)
        self._reserve(k)
        bad = self.key_slots.add(keys, self.n)
        if bad >= 0:
            raise KeyError(f"key {int(keys[bad])} is already in the table or repeats among the {k} new keys")
        self.compute.store(X, norms)
        sl = slice(self.n, self.n + k)
        self._keys[sl] = keys
        self._coef[sl] = np.reshape(coef, (k, self.n_columns))
        if self.averaged:
            self._avg[sl] = 0.0 if avg is None else np.reshape(avg, (k, self.n_columns))
            self._since[sl] = self.avg_clock if since is None else np.reshape(since, (k, self.n_columns))
        self.n += k

    def apply_pack(self, ids, owner_flags, coef, loss, average, fold, rank, occupancy, block, norms,
                   row_seconds=None):
        """A pack into the table, the same decisions on every rank (``merge_pack``): the
        averages' increments, the scale folds, the pack's coefficients and this rank's new
        entries, whose rows (of the pack's RowBlock, with its norms (r,)) are then stored.

        ids (r,) the pack's keys; owner_flags (r,) collective 2's sums; coef, loss (K, r): a
        coefficient was added at iteration k to a problem when its hinge loss was positive
        (the hinge test decides, not ``coef != 0``, which a coefficient folded many times in
        its pack may underflow to); a row any problem stepped on is an entry. average (K, r +
        1), or (0, 0) when not averaging; fold (K, 2) the pack's folds as mantissa and
        exponent, or (0, 2) when none; occupancy (p,) the entries per rank, updated;
        row_seconds (p,): each rank's measured seconds per stored row, or None (``place_new``).
        """
        entries, rows, store = self.room_for(block)
        row_seconds = np.zeros(len(occupancy)) if row_seconds is None else row_seconds
        positions = merge_pack(ids, owner_flags, coef, loss, average, fold, rank, occupancy, row_seconds, *entries,
                               _NO_DELTA)
        self.added(append_positions(*rows, positions, norms, *store))

    def room_for(self, block):
        """Room for every row of a pack's RowBlock as a new entry. Returns the arguments that
        write the pack (``apply_pack``, ``pack_update.PackStep``): ``merge_pack``'s
        after the occupancy (key map, entry arrays, clock, n), and ``stored.append_positions``'s
        before the positions (the block's arrays) and after the norms (the store's n and arrays)."""
        self._reserve(block.n_rows)
        stored = self.compute.stored
        rows, store = stored.room_for(block)
        keys = self.key_slots
        return ((keys.keys, keys.slots, self._keys, self._coef, self._avg, self._since, self.avg_clock, self.n),
                rows, (stored.n,) + store)

    def dense_room(self):
        """How many more entries of dense rows fit before any array must grow: while a pack's
        rows fit, ``room_for``'s arrays (but n and the block's rows) stay the same objects."""
        stored = self.compute.stored
        if stored.sparse:
            return 0
        return min(len(self._keys), len(self.key_slots.keys) // 2, stored.capacity) - self.n

    def added(self, k):
        """Count the k new entries written through ``room_for``'s arrays."""
        self.n += k
        self.key_slots.n += k
        self.compute.stored.n += k

    def drop_zeros(self):
        """Remove the entries whose coefficients are 0 in every column (their rows, keys and map
        slots), keeping the others' order; returns how many were removed. Not for averaged
        tables, whose entries keep averages after their coefficient returns to 0."""
        if self.averaged:
            raise ValueError("drop_zeros: an averaged table's entries keep their averages")
        kept = np.any(self.coef != 0.0, axis=1)
        removed = self.n - int(np.count_nonzero(kept))
        if removed:
            k = self.n - removed
            self._keys[:k] = self.keys[kept]
            self._coef[:k] = self.coef[kept]
            self.compute.stored.keep(kept)
            self.n = k
            self.key_slots.remap(self.keys)
        return removed

    def _reserve(self, extra):
        """Room for ``extra`` more entries in the entry arrays and the key map."""
        if self.n + extra > len(self._keys):
            new = max(self.n + extra, 2 * len(self._keys))
            self._keys, self._coef = resized(self._keys, new), resized(self._coef, new)
            if self.averaged:
                self._avg, self._since = resized(self._avg, new), resized(self._since, new)
        self.key_slots.reserve(extra)


_NO_DELTA = np.empty((0, 0))  # merge_pack's delta when not wanted

# An averaged table's clock is settled into every entry (``_settle``) when a pack's increment
# is below SETTLE_BELOW times the clock. Each addition to the clock then rounds by at most
# 2^-53 times clock <= 2^-37 times that increment, so an entry's gain clock - since, a sum
# of such increments, is exact to 2^-37 relative. The sums a_t s_t grow as t^2 (s ~ 1/t),
# so this settles about once every 2^16 packs, or on each pack where projections make s
# fall fast.
SETTLE_BELOW = 2.0 ** -16


@njit(cache=True)
def merge_pack(ids, owner_flags, coef, loss, average, fold, rank, occupancy, row_seconds, map_keys, map_slots,
               entry_keys, table_coef, table_avg, table_since, clock, n, delta):
    """The pack into the table of n entries, the same decisions on every rank.

    First the pack's increment ``average[c, r]`` of the averages (``averaging.py``: what each
    coefficient held on entry adds to its average, per unit) is added to the ``clock`` (K,),
    then the pack's scale folds are applied (fold (K, 2): coefficients times mantissa *
    2^exponent; (0, 2): none; a folded column is settled first, its clock being in the units
    before the fold), then the pack's coefficients. An entry's average lags by its
    coefficient times (clock - ``table_since``) until it is touched (settled then). ids (r,)
    the pack's keys; owner_flags (r,) collective 2's sums (owner rank + 1, or 0); coef, loss
    (K, r); average (K, r + 1), or (0, 0) when not averaging. Rows
    with a positive loss in some problem are merged by key, in pack order (a key's values
    summed in the order the pack met them); entries this rank holds get them added to
    ``table_coef`` (and their average parts to ``table_avg``); new keys are placed one by
    one (``place_new``: by count, or by ``row_seconds`` (p,) where every rank's is measured;
    ``occupancy`` counts them in), and this rank's become entries n, n + 1,
    ...: key (``entry_keys``), coefficients, average parts, and the key map (``map_keys``,
    ``map_slots``). The arrays have room for them (``SupportVectorTable._reserve``). ``delta``
    (K, r), or (0, 0) when not wanted, receives what the pack added to each key's coefficients
    after the fold, at the key's first position, and zeros elsewhere (a pipelined pack
    corrects the next pack's sums with it). Returns the new entries' first pack positions
    (int64 (m,)), where their rows are.
    """
    K, r = coef.shape
    averaging = average.shape[1] > 0
    if averaging:
        for c in range(K):
            if average[c, r] == 0.0:  # nothing to add (a grid column that has stopped): no settling either
                continue
            if average[c, r] < clock[c] * SETTLE_BELOW:
                _settle(c, n, table_coef, table_avg, table_since, clock)
            clock[c] += average[c, r]
    if fold.shape[0] > 0:
        for c in range(K):
            if fold[c, 0] == 1.0 and fold[c, 1] == 0.0:  # no fold in this column (an exact identity)
                continue
            if averaging:
                _settle(c, n, table_coef, table_avg, table_since, clock)
            mantissa, exponent = fold[c, 0], int(min(max(fold[c, 1], -4000.0), 4000.0))
            for j in range(n):
                table_coef[j, c] = math.ldexp(table_coef[j, c] * mantissa, exponent)
    # pack positions that stepped, each key's first one, and its merged coefficient (u: key number)
    pack_keys, pack_slots = new_map(r)
    unique_of = np.empty(1, dtype=np.int64)
    first = np.empty(r, dtype=np.int64)
    value = np.zeros((r, K))
    part = np.zeros((r, K))
    n_unique = 0
    for k in range(r):
        stepped = False
        for c in range(K):
            if loss[c, k] > 0.0:
                stepped = True
        if not stepped:
            continue
        lookup(pack_keys, pack_slots, ids[k:k + 1], unique_of)
        u = unique_of[0]
        if u < 0:
            u = n_unique
            first[u] = k
            unique_of[0] = u
            put(pack_keys, pack_slots, ids[k:k + 1], unique_of)
            n_unique += 1
        for c in range(K):
            value[u, c] += coef[c, k]
            if averaging:
                part[u, c] += average[c, k]
    if delta.shape[0] > 0:
        delta[:, :] = 0.0
        for u in range(n_unique):
            for c in range(K):
                delta[c, first[u]] = value[u, c]
    # entries this rank holds: add; new keys: place, and return this rank's
    owners = np.empty(n_unique, dtype=np.int64)
    n_new = 0
    slot = np.empty(1, dtype=np.int64)
    for u in range(n_unique):
        owners[u] = np.int64(np.rint(owner_flags[first[u]])) - 1
        if owners[u] < 0:
            n_new += 1
        elif owners[u] == rank:
            lookup(map_keys, map_slots, ids[first[u]:first[u] + 1], slot)
            j = slot[0]
            for c in range(K):
                if averaging:  # settled with the coefficient held on entry, then the pack's part
                    table_avg[j, c] += table_coef[j, c] * (clock[c] - table_since[j, c])
                    table_since[j, c] = clock[c]
                    table_avg[j, c] += part[u, c]
                table_coef[j, c] += value[u, c]
    placed = place_new(occupancy, row_seconds, n_new)
    mine = np.empty(n_new, dtype=np.int64)  # key numbers of this rank's new entries
    n_mine = i = 0
    for u in range(n_unique):
        if owners[u] < 0:
            if placed[i] == rank:
                mine[n_mine] = u
                n_mine += 1
            i += 1
    positions = np.empty(n_mine, dtype=np.int64)
    for j in range(n_mine):
        u, at = mine[j], n + j
        positions[j] = first[u]
        entry_keys[at] = ids[first[u]]
        slot[0] = at
        put(map_keys, map_slots, ids[first[u]:first[u] + 1], slot)
        for c in range(K):
            table_coef[at, c] = value[u, c]
            if averaging:
                table_avg[at, c] = part[u, c]
                table_since[at, c] = clock[c]
    return positions


@njit(cache=True)
def _settle(c, n, table_coef, table_avg, table_since, clock):
    """Column c of the first n entries' averages brought up to ``clock[c]``, which restarts at 0."""
    for j in range(n):
        table_avg[j, c] += table_coef[j, c] * (clock[c] - table_since[j, c])
        table_since[j, c] = 0.0
    clock[c] = 0.0


@njit(cache=True)
def place_new(occupancy, row_seconds, n):
    """Owners of n new entries placed one by one, the same on every rank: (n,) int64.

    By count (the default, and while some rank's ``row_seconds`` (p,) is 0, unmeasured): on
    the least occupied rank. By cost (every rank's measured): on the rank whose stored rows
    would then take the least time, argmin (occupancy + 1) * row_seconds, so that faster
    ranks hold more rows. Lowest rank on ties; ``occupancy`` (p,) counts them in.
    """
    by_cost = True
    for seconds in row_seconds:
        if not seconds > 0.0:
            by_cost = False
    owners = np.empty(n, dtype=np.int64)
    for i in range(n):
        owner = 0
        for k in range(1, occupancy.shape[0]):  # the first of the least: the lowest rank on ties
            if by_cost:
                better = (occupancy[k] + 1) * row_seconds[k] < (occupancy[owner] + 1) * row_seconds[owner]
            else:
                better = occupancy[k] < occupancy[owner]
            if better:
                owner = k
        occupancy[owner] += 1
        owners[i] = owner
    return owners


def shard_offsets(comm, table):
    """Collective: where every rank's shard lies in a file that holds the shards in rank order.

    Returns ``(entries, nonzeros)``, each (size + 1,) int64: rank k's entries are rows
    ``entries[k]:entries[k + 1]`` and, for CSR tables, its stored values
    ``nonzeros[k]:nonzeros[k + 1]``. Only the two counts per rank cross ranks.
    """
    nnz = table.compute.stored.nnz
    counts = np.array(comm.allgather((table.n, nnz)), dtype=np.int64).reshape(-1, 2)
    offsets = np.zeros((len(counts) + 1, 2), dtype=np.int64)
    np.cumsum(counts, axis=0, out=offsets[1:])
    return offsets[:, 0], offsets[:, 1]


def shard_parts(table, offsets, rank, keys="keys", coef="coef", dense="features",
                csr=("indptr", "indices", "values")):
    """This rank's entries as ``collective_write.Part``s of the pre-sized datasets named by
    ``keys``, ``coef``, ``dense`` or ``csr``: its rows ``offsets[0][rank]:offsets[0][rank + 1]``
    (see ``shard_offsets``), the CSR ``indptr`` shifted by the values of the ranks before it;
    one column of coefficients is stored 1-D. Views of the table, but for the shifted indptr."""
    entries, nonzeros = offsets
    lo = int(entries[rank])
    if table.n == 0:
        return []
    parts = [Part(keys, lo, table.keys), Part(coef, lo, table.coef if table.n_columns > 1 else table.coef[:, 0])]
    if table.sparse:
        indptr, indices, values = table.features
        a = int(nonzeros[rank])
        parts += [Part(csr[0], lo, indptr + a), Part(csr[1], a, indices), Part(csr[2], a, values)]
    else:
        parts.append(Part(dense, lo, table.features))
    return parts
