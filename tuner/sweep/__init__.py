"""Sweeps: spec, plan, runner, results store, statistics, report."""
