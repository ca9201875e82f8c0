"""Resolve the Spark-side JVM packages (Delta, Kafka connector) into ``.local/ivy`` once.

Run by ``make setup``; a session started later finds them in the cache.
"""

from streamjoin.session import spark_session

if __name__ == "__main__":
    spark_session("streamjoin-setup").stop()
