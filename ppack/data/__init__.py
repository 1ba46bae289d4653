"""Data I/O: LIBSVM text, the ppack HDF5 layout, per-rank shards and the bundled data set."""
