"""The deterministic simulator and the test tools it shares with the test suite: named faults, a fault-injecting
store, invariant checkers, and the workload generator."""
