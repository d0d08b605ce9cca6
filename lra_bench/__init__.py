"""lra-bench: a faithful, measured Long Range Arena harness for efficient attention variants."""

__version__ = "0.1.0"
