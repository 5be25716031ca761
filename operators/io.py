"""Placeholder: being written."""
def save_model(model, path):  # noqa: D103
    raise NotImplementedError


def load_model(path):  # noqa: D103
    raise NotImplementedError
