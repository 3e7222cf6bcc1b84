"""Statistical disclosure control library: block kernels and Dask graph builders (never imports Prefect)."""

__version__ = "0.1.0"
