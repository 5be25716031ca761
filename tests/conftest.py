"""Shared test fixtures."""
import h5py
import numpy as np
import pytest
import scipy.io


def write_v5(path, arrays):
    scipy.io.savemat(path, arrays)  # MATLAB 5 format, arrays in MATLAB index order
    return path


def write_v73(path, arrays):
    """What MATLAB's save -v7.3 produces, as far as a reader sees it: an HDF5 file after a 512-byte header
    block, each variable an HDF5 dataset whose axes are reversed (column-major storage)."""
    with h5py.File(path, "w", userblock_size=512) as h5:
        for name, value in arrays.items():
            h5.create_dataset(name, data=np.asarray(value).T)
            h5[name].attrs["MATLAB_class"] = np.bytes_("double")
    header = b"MATLAB 7.3 MAT-file, Platform: GLNXA64, Created on: Mon Jan  1 00:00:00 2024 HDF5 schema 1.00 ."
    with open(path, "r+b") as fh:
        fh.write(header.ljust(116) + b"\x00" * 8 + b"\x00\x02IM")
    return path


@pytest.fixture
def mat_writers():
    """``(write_v5, write_v73)``: ``writer(path, {name: array}) -> path``, arrays in MATLAB index order."""
    return write_v5, write_v73
