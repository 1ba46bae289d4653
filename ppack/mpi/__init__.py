"""MPI: partition math, error agreement and thread budgets (comm), and every buffer collective (collectives)."""
