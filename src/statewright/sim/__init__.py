"""The deterministic simulator: one seed drives a virtual clock, the real engine, a workload and its checkers."""
