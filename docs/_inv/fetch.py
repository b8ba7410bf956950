"""Download the intersphinx inventories of the projects the docs link to into this folder.

``make docs-inventories`` (or ``python docs/_inv/fetch.py``) fetches ``<url>objects.inv`` of every
project below, checks that Sphinx can read it, and writes it as ``<name>.inv`` here (atomically).
docs/conf.py maps exactly the projects whose file is here, so the site builds offline, without
those links, when a file is missing, and a build itself never touches the network. Commit the
files to make the links part of every build; run this again to refresh them.
"""

from __future__ import annotations

import os
import sys
import tempfile
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent

# project -> the root of its documentation (the base URL of the links; objects.inv lies there)
PROJECTS = {
    "python": "https://docs.python.org/3/",
    "numpy": "https://numpy.org/doc/stable/",
    "jax": "https://docs.jax.dev/en/latest/",
    "numpyro": "https://num.pyro.ai/en/stable/",
    "arviz": "https://python.arviz.org/en/stable/",
    "xarray": "https://docs.xarray.dev/en/stable/",
}


def fetch(name: str, url: str, timeout: float = 30.0) -> int:
    """Download and check one inventory; returns its number of objects."""
    from sphinx.util.inventory import InventoryFile  # the docs extra; only this script needs it

    with urllib.request.urlopen(url + "objects.inv", timeout=timeout) as response:
        raw = response.read()
    count = sum(len(v) for v in InventoryFile.loads(raw, uri=url).data.values())
    if not count:
        raise ValueError(f"{url}objects.inv holds no objects")
    fd, tmp = tempfile.mkstemp(dir=HERE, prefix=f".{name}.", suffix=".tmp")
    with os.fdopen(fd, "wb") as out:
        out.write(raw)
    os.replace(tmp, HERE / f"{name}.inv")
    return count


def main() -> int:
    failed = []
    for name, url in PROJECTS.items():
        try:
            print(f"{name}: {fetch(name, url)} objects from {url}objects.inv -> docs/_inv/{name}.inv")
        except Exception as exc:  # report every project, then fail
            failed.append(name)
            print(f"{name}: could not fetch {url}objects.inv: {exc}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
