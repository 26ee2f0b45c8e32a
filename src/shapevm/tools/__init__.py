"""Command line tools behind ``shapevm`` / ``python -m shapevm``."""
