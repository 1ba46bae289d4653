"""The data's path up to the solvers: LIBSVM text and the ppack HDF5 layout, per-rank shards,
the bundled data set, the shared sampling stream and the delivery of rows to every rank."""
