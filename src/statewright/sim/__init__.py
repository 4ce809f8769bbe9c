"""The deterministic simulator and the test tools it shares with the test suite (faults, checkers)."""
