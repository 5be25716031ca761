"""Placeholder: being written."""
class SpectralConv:  # noqa: D101
    pass
