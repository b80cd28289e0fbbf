"""psml_core: parameter-server communication methods, one engine, exact bytes, a PDF report."""

__version__ = "0.1.0"

__all__ = ["__version__"]
