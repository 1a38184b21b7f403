"""ndstore: chunked N-dimensional arrays (zarr v2/v3, N5, neuroglancer precomputed) on file, memory, lmdb,
S3, GCS and HTTP stores, from Python. A thin layer over the C library (docs/python.md).

    import ndstore, numpy as np
    a = ndstore.open("file:///tmp/a.zarr|zarr:", create=True, delete_existing=True,
                     shape=(100, 200), chunks=(10, 20), dtype="uint16", codec="zstd:1")
    a[3:7, ::2] = 5
    print(a[3, :10])
"""
from . import _ndstore
from ._errors import *  # noqa: F401,F403  Error and one class per status code
from ._errors import Error, CLASSES as _ERROR_CLASSES
from ._array import Array, Attributes, executor, open  # noqa: A001
from ._txn import Transaction, current as current_transaction
from ._kvstore import KvStore, kvstore_open
from ._versioned import commit, current_version, diff, gc, log, tag, tags
from ._dtypes import NAMES as dtypes, bfloat16_to_float32, float32_to_bfloat16

__version__ = _ndstore.version()

__all__ = ["open", "Array", "Attributes", "Transaction", "current_transaction", "KvStore", "kvstore_open",
           "commit", "current_version", "diff", "gc", "log", "tag", "tags", "Error", "executor", "dtypes",
           "bfloat16_to_float32", "float32_to_bfloat16", "__version__"] + sorted(_ERROR_CLASSES)
