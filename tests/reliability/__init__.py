"""Reliability trials through the real parts (broker, Spark, RocksDB state, Delta): issue 17."""
