"""The P-packSVM kernel trainer: the support-vector table (table), the pack's sequential
replay (replay), its state (state), the pack loop (loop), checkpoints (checkpoint),
distributed predictions (predict), the estimator (estimator) and run planning (plan)."""
