"""Real datasets: a registry of files with checksums, a local cache, downloads, and pandas loaders.

Every dataset is a folder of files. Each file is registered with its sha256, its size, the URL it
comes from and a note on its provenance; a file is only handed out after its checksum matched.

Where the files live
--------------------
``<cache>/<dataset>/<file>``, where ``<cache>`` is, by the one rule every command follows
(:func:`cache_dir`): the ``BAYESFAIR_DATA`` environment variable if set; else ``shared/data``
beside the source checkout bayesfair is imported from, if it exists; else a per-user cache folder:
``$XDG_CACHE_HOME/bayesfair`` (``~/.cache/bayesfair``) on Linux, ``~/Library/Caches/bayesfair`` on
macOS, ``%LOCALAPPDATA%\\bayesfair`` on Windows. The layout is that of the project's shared data
folder, so ``BAYESFAIR_DATA=/path/to/shared/data`` uses it as is.

Checks and downloads
--------------------
:func:`path` returns the local path of one file after checking its sha256 (the result is remembered
per process, keyed by path, size and modification time, so repeated loads do not hash again).
A missing file is downloaded only when asked (``download=True``, or :func:`fetch`): with ``urllib``
into a temp file in the target folder, checked, then renamed into place with ``os.replace``, so a
failed, interrupted or corrupt download leaves nothing behind. Errors name the dataset, the file,
the expected (and actual) sha256, the URL and the exact path where a hand-downloaded file belongs.
Importing this module does no I/O; pandas is imported by the loaders only.
:func:`data_folder` sets the data folder for a block of code (a study's ``[data] path``; the
copies a Dask worker was shipped), and :mod:`bayesfair.datasets.shipping` carries registered files
to another machine by content, checked against the registry where they arrive.

Where the URLs point, and the derived files
-------------------------------------------
Each URL serves the registered bytes exactly (the source repository at a pinned commit, or the UCI
repository), except for three files that no server holds byte for byte:

* ``compas/compas-scores-raw.csv.gz`` and ``family_income/family_income_and_expenditure.csv.gz``
  were compressed locally with ``gzip -9 -n``, and Python's zlib does not reproduce GNU gzip's
  output bit for bit. The registry records the URL of the *uncompressed* file at a pinned commit
  whose git blob is the same content (ProPublica's ``compas-scores-raw.csv``; the family-income CSV
  in the repository of Schumann et al.), together with the sha256 and size of that content. A
  download checks the content's sha256 while streaming and writes it gzip-compressed. Such a file
  is accepted when its bytes match the reference copy's sha256 *or* its decompressed content
  matches the content sha256, so the reference copy and a freshly made one both verify.
* ``german_credit/values_maps.json`` (code -> text maps written by the authors of the
  ``responsibly`` package) is only published inside the ``responsibly`` 0.1.2 wheel. The download
  fetches that wheel (28 MB) through PyPI's stable file URL and extracts the member, whose sha256
  is checked. It is only needed by ``load_german_credit(decode=True)``.

Loaders
-------
:func:`load_yeast`, :func:`load_compas`, :func:`load_family_income`, :func:`load_adult` and
:func:`load_german_credit` return pandas DataFrames (shapes and dtypes in their docstrings); they
read local files and download only with ``download=True``. :func:`list_datasets` lists the
registry. Licences are recorded as the sources state them (several are unstated); check them
before redistributing any file.
"""

from __future__ import annotations

import sys  # noqa: F401  (tests patch sys.platform through this module)

from bayesfair.datasets import files as _files  # noqa: F401
from bayesfair.datasets import loaders  # noqa: F401
from bayesfair.datasets.catalog import (  # noqa: F401  (_REGISTRY: tests register toy datasets)
    _REGISTRY,
    REGISTRY,
    ChecksumError,
    DataFile,
    Dataset,
    DatasetError,
    DownloadError,
    MissingFileError,
)
from bayesfair.datasets.files import cache_dir, data_folder, fetch, info, list_datasets, path, recording
from bayesfair.datasets.loaders import (  # noqa: F401
    ADULT_COLUMNS,
    GERMAN_COLUMNS,
    load_adult,
    load_compas,
    load_family_income,
    load_german_credit,
    load_yeast,
)

__all__ = [
    "DataFile",
    "Dataset",
    "DatasetError",
    "MissingFileError",
    "ChecksumError",
    "DownloadError",
    "REGISTRY",
    "cache_dir",
    "data_folder",
    "recording",
    "info",
    "list_datasets",
    "path",
    "fetch",
    "load_yeast",
    "load_compas",
    "load_family_income",
    "load_adult",
    "load_german_credit",
]
