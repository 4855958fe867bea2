"""The package version, on the lowest floor so that any module can read it."""

__version__ = "0.1.0"
