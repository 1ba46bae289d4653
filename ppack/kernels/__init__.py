"""Kernels: their specification (spec), the operations the trainers call (ops) and the
numba CPU backend that evaluates them (cpu)."""
