"""The package version (one place; ``bayesfair.__version__`` and result metadata read it)."""

__version__ = "0.1.0"
