"""The packed primal SGD solver (P-packSVM) and its pieces."""
