"""Running machines on Apache Spark (everything that imports pyspark lives here)."""

__all__: list[str] = []
