"""Reliability trials through the real parts (broker, Spark, RocksDB state, Delta):
kill -9, broker faults, bad input, resource bounds."""
