"""The dataset registry: checksums, cache folder, errors, downloads (local only) and loaders.

No network: downloads go to ``file://`` URLs or to an HTTP server on 127.0.0.1 in a thread.
The real files come from the shared data folder, ``$BAYESFAIR_DATA`` or else ``<repo>/../shared/data``;
tests that need it are skipped when it is absent.
"""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import http.server
import os
import re
import shutil
import threading
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import bayesfair  # noqa: F401  (must precede jax)
from bayesfair import datasets as ds

SHARED = Path(os.environ.get("BAYESFAIR_DATA", "").strip()
              or Path(__file__).resolve().parents[1].parent / "shared" / "data")
needs_shared = pytest.mark.skipif(
    not SHARED.is_dir(), reason=f"shared data folder not found at {SHARED} (clone the repo with ../shared beside it)")

ALL_FILES = [(d.name, f.name) for d in ds.REGISTRY.values() for f in d.files]


@pytest.fixture(autouse=True)
def shared_data(monkeypatch):
    """Every test reads the shared data folder unless it points BAYESFAIR_DATA elsewhere; local
    HTTP requests must not go through a proxy."""
    monkeypatch.setenv("BAYESFAIR_DATA", str(SHARED))
    monkeypatch.setenv("no_proxy", "*")
    monkeypatch.setenv("NO_PROXY", "*")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An empty data folder in use."""
    root = tmp_path / "cache"
    monkeypatch.setenv("BAYESFAIR_DATA", str(root))
    return root


@pytest.fixture
def server(tmp_path):
    """(folder, base URL) of an HTTP server on 127.0.0.1 serving the folder. ``/truncated/<file>``
    announces the file's full length but sends half of it and closes the connection."""
    root = tmp_path / "www"
    root.mkdir()

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, directory=str(root), **kwargs)

        def log_message(self, *args):
            pass

        def do_GET(self):
            if self.path.startswith("/truncated/"):
                body = (root / self.path.removeprefix("/truncated/")).read_bytes()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body[: len(body) // 2])
                self.wfile.flush()
                self.close_connection = True
                return
            super().do_GET()

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield root, f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()
    thread.join(5)


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def register(monkeypatch, name: str, *files: ds.DataFile) -> ds.Dataset:
    """Add a dataset made of ``files`` to the registry for one test."""
    rec = ds.Dataset(name=name, title=name, description="test", files=files, default=files[0].name, loader="",
                     source="test", license="test", citation="test")
    monkeypatch.setitem(ds._REGISTRY, name, rec)
    return rec


def patch_file(monkeypatch, name: str, file: str, **changes) -> ds.DataFile:
    """Replace fields (e.g. the URL) of one registered file for one test."""
    rec = ds.REGISTRY[name]
    files = tuple(dataclasses.replace(f, **changes) if f.name == file else f for f in rec.files)
    monkeypatch.setitem(ds._REGISTRY, name, dataclasses.replace(rec, files=files))
    return ds.REGISTRY[name].file(file)


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


# ---------------------------------------------------------------------------------------------
# Registry and checksums of the real files
# ---------------------------------------------------------------------------------------------


def test_registry_records_are_well_formed():
    assert set(ds.REGISTRY) == {"yeast", "compas", "family_income", "adult", "german_credit"}
    for d in ds.REGISTRY.values():
        assert d.default in d.file_names and hasattr(ds, d.loader)
        for f in d.files:
            assert re.fullmatch(r"[0-9a-f]{64}", f.sha256) and f.size > 0
            assert f.url.startswith("https://")
            if "raw.githubusercontent.com" in f.url:  # pinned to a commit, not a branch
                assert re.search(r"/[0-9a-f]{40}/", f.url), f.url
            if f.transform == "gzip":
                assert f.name.endswith(".gz") and re.fullmatch(r"[0-9a-f]{64}", f.content_sha256)
            if f.transform == "zip-member":
                assert f.member and f.member.endswith(f.name)


@needs_shared
@pytest.mark.parametrize("name", sorted(ds.REGISTRY))
def test_registry_matches_shared_folder_and_provenance(name):
    folder = SHARED / name
    rec = ds.REGISTRY[name]
    assert set(rec.file_names) == {p.name for p in folder.iterdir()} - {"PROVENANCE.md"}
    provenance = (folder / "PROVENANCE.md").read_text(encoding="utf-8")
    for f in rec.files:
        assert f.sha256 in provenance and f"{f.size:,}" in provenance
        if f.content_sha256:
            assert f.content_sha256 in provenance and f"{f.content_size:,}" in provenance
        if f.shape:
            assert f"{f.shape[0]:,}" in provenance


@needs_shared
@pytest.mark.parametrize("name,file", ALL_FILES)
def test_every_registered_file_verifies(name, file):
    p = ds.path(name, file)
    assert p == SHARED / name / file
    assert p.stat().st_size == ds.REGISTRY[name].file(file).size


@needs_shared
def test_fetch_without_download_verifies_everything():
    for name in ds.REGISTRY:
        assert ds.fetch(name, download=False) == SHARED / name


@needs_shared
def test_verification_is_cached_by_path_size_and_mtime(cache, monkeypatch):
    src = SHARED / "german_credit" / "german.data"
    dest = cache / "german_credit" / "german.data"
    dest.parent.mkdir(parents=True)
    shutil.copyfile(src, dest)
    assert ds.path("german_credit") == dest

    def no_hashing(p):
        raise AssertionError("hashed again")

    with monkeypatch.context() as m:
        m.setattr(ds._files, "_sha256_file", no_hashing)
        assert ds.path("german_credit") == dest  # remembered
    data = bytearray(dest.read_bytes())
    data[100] ^= 0xFF
    dest.write_bytes(bytes(data))
    st = dest.stat()
    os.utime(dest, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    with pytest.raises(ds.ChecksumError):
        ds.path("german_credit")


# ---------------------------------------------------------------------------------------------
# Errors: unknown names, corrupt files, missing files
# ---------------------------------------------------------------------------------------------


def test_unknown_dataset_lists_the_known_names():
    with pytest.raises(ValueError, match="unknown dataset 'mediamill'") as e:
        ds.path("mediamill")
    for name in ds.REGISTRY:
        assert name in str(e.value)
    with pytest.raises(ValueError, match="unknown dataset 'COMPAS'"):
        ds.info("COMPAS")
    with pytest.raises(TypeError, match="name must be"):
        ds.fetch(3)


def test_unknown_file_and_bad_arguments():
    with pytest.raises(ValueError, match=r"file must be one of adult\.data, adult\.test, adult\.names"):
        ds.path("adult", "adult.csv")
    with pytest.raises(TypeError, match="download must be True or False"):
        ds.path("adult", download="yes")
    with pytest.raises(ValueError, match=r"split must be one of 'all', 'train', 'test', got 'validation'"):
        ds.load_yeast("validation")
    with pytest.raises(ValueError, match=r"split must be one of 'train', 'test', 'all'"):
        ds.load_adult(split="full")
    with pytest.raises(ValueError, match=r"variant must be one of 'two_years', .*'groupfairtreatment'"):
        ds.load_compas("propublica")
    with pytest.raises(TypeError, match="categorical must be True or False"):
        ds.load_family_income(categorical=1)
    with pytest.raises(TypeError, match="decode must be True or False"):
        ds.load_german_credit(decode="no")


@needs_shared
def test_corrupt_file_names_expected_and_actual_checksum_and_path(cache):
    rec = ds.REGISTRY["adult"].file("adult.names")
    dest = cache / "adult" / "adult.names"
    dest.parent.mkdir(parents=True)
    data = bytearray((SHARED / "adult" / "adult.names").read_bytes())
    data[10:14] = b"XXXX"
    dest.write_bytes(bytes(data))
    for download in (False, True):  # a corrupt file is never replaced silently
        with pytest.raises(ds.ChecksumError) as e:
            ds.path("adult", "adult.names", download=download)
        msg = str(e.value)
        for part in ("'adult'", "'adult.names'", rec.sha256, sha(bytes(data)), str(dest), rec.url):
            assert part in msg
    assert dest.read_bytes() == bytes(data)


@needs_shared
def test_gzip_file_is_checked_by_its_content(cache):
    rec = ds.REGISTRY["compas"].file("compas-scores-raw.csv.gz")
    content = gzip.decompress((SHARED / "compas" / rec.name).read_bytes())
    dest = cache / "compas" / rec.name
    dest.parent.mkdir(parents=True)
    # compressed differently (other bytes), same content: accepted
    dest.write_bytes(gzip.compress(content, compresslevel=1, mtime=0))
    assert ds.path("compas", rec.name) == dest
    # different content: rejected, with both checksums in the message
    dest.write_bytes(gzip.compress(content[:-10], compresslevel=1, mtime=0))
    with pytest.raises(ds.ChecksumError) as e:
        ds.path("compas", rec.name)
    assert rec.sha256 in str(e.value) and rec.content_sha256 in str(e.value)
    dest.write_bytes(b"not gzip at all")
    with pytest.raises(ds.ChecksumError, match="not a valid gzip file"):
        ds.path("compas", rec.name)


def test_missing_file_says_where_to_put_it(cache):
    rec = ds.REGISTRY["adult"].file("adult.test")
    with pytest.raises(ds.MissingFileError) as e:
        ds.path("adult", "adult.test")
    assert isinstance(e.value, FileNotFoundError)
    msg = str(e.value)
    for part in ("'adult'", "'adult.test'", str(cache / "adult" / "adult.test"), rec.sha256, rec.url,
                 "fetch('adult')", "BAYESFAIR_DATA", "download=True"):
        assert part in msg
    assert not cache.exists()  # nothing created without download
    with pytest.raises(ds.MissingFileError):
        ds.load_adult("test")
    with pytest.raises(ds.MissingFileError, match="gzip"):  # the derived file explains the transformation
        ds.path("family_income")


def test_cache_dir(monkeypatch, tmp_path):
    monkeypatch.setattr(ds._files, "_CHECKOUT", None)  # an installed copy: no checkout beside shared/
    monkeypatch.setenv("BAYESFAIR_DATA", str(tmp_path / "x"))
    assert ds.cache_dir() == tmp_path / "x"
    monkeypatch.delenv("BAYESFAIR_DATA")
    monkeypatch.setattr(ds.sys, "platform", "linux")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert ds.cache_dir() == tmp_path / "xdg" / "bayesfair"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert ds.cache_dir() == Path.home() / ".cache" / "bayesfair"
    monkeypatch.setattr(ds.sys, "platform", "darwin")
    assert ds.cache_dir() == Path.home() / "Library" / "Caches" / "bayesfair"
    monkeypatch.setattr(ds.sys, "platform", "win32")
    monkeypatch.setenv("LOCALAPPDATA", str(tmp_path / "local"))
    assert ds.cache_dir() == tmp_path / "local" / "bayesfair"
    assert not (tmp_path / "local").exists()


def test_data_folder_rule(monkeypatch, tmp_path, capsys):
    """One rule: BAYESFAIR_DATA, else shared/data beside the checkout bayesfair is imported from
    (whatever the working directory), else the user cache; the CLI reports the same folder."""
    from bayesfair.workflow.cli import main

    repo = tmp_path / "checkout" / "bayesfair-repo"
    repo.mkdir(parents=True)
    monkeypatch.setattr(ds._files, "_CHECKOUT", repo)
    monkeypatch.delenv("BAYESFAIR_DATA")
    monkeypatch.setattr(ds.sys, "platform", "linux")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert ds.cache_dir() == tmp_path / "xdg" / "bayesfair"  # no shared/data beside the checkout
    shared = tmp_path / "checkout" / "shared" / "data"
    shared.mkdir(parents=True)
    for cwd in (tmp_path, repo, shared):
        monkeypatch.chdir(cwd)
        assert ds.cache_dir() == shared
    monkeypatch.setenv("BAYESFAIR_DATA", "  ")  # blank: unset
    assert ds.cache_dir() == shared
    monkeypatch.setenv("BAYESFAIR_DATA", str(tmp_path / "mine"))
    assert ds.cache_dir() == tmp_path / "mine"  # the variable wins over the checkout's folder
    monkeypatch.delenv("BAYESFAIR_DATA")
    # a dataset is looked up there: the message of a missing file names the folder of the rule
    with pytest.raises(ds.MissingFileError, match=re.escape(str(shared / "yeast"))):
        ds.path("yeast")
    assert main(["list", "datasets"]) == 0
    assert f"data folder {shared}" in capsys.readouterr().out
    monkeypatch.setattr(ds._files, "_CHECKOUT", None)
    assert ds.cache_dir() == tmp_path / "xdg" / "bayesfair"


def test_checkout_is_the_source_tree():
    """The checkout of the rule is the folder holding this package's pyproject.toml."""
    root = Path(ds._files.__file__).resolve().parents[2]
    assert ds._files._CHECKOUT == (root if (root / "pyproject.toml").is_file() else None)


def test_list_datasets():
    table = ds.list_datasets()
    assert list(table.index) == list(ds.REGISTRY)
    assert {"title", "files", "size_bytes", "loader", "license", "source", "citation"} <= set(table.columns)
    assert table.loc["adult", "files"] == "adult.data, adult.test, adult.names"


# ---------------------------------------------------------------------------------------------
# Downloads (local URLs only)
# ---------------------------------------------------------------------------------------------


@needs_shared
def test_download_from_file_url(cache, monkeypatch):
    src = SHARED / "german_credit" / "german.data"
    patch_file(monkeypatch, "german_credit", "german.data", url=src.as_uri())
    p = ds.path("german_credit", "german.data", download=True)
    assert p == cache / "german_credit" / "german.data"
    assert p.read_bytes() == src.read_bytes()
    assert leftovers(p.parent) == ["german.data"]  # no temp file left


def test_download_over_http_success_wrong_bytes_truncated_and_404(cache, server, monkeypatch):
    root, base = server
    good = b"a,b\n1,2\n" * 1000
    (root / "good.csv").write_bytes(good)
    (root / "bad.csv").write_bytes(good[:-1] + b"3")
    f = ds.DataFile("t.csv", sha(good), len(good), f"{base}/good.csv", "test")
    register(monkeypatch, "toy", f)
    folder = cache / "toy"

    p = ds.path("toy", download=True)
    assert p == folder / "t.csv" and p.read_bytes() == good and leftovers(folder) == ["t.csv"]
    p.unlink()

    register(monkeypatch, "toy", dataclasses.replace(f, url=f"{base}/bad.csv"))
    with pytest.raises(ds.ChecksumError) as e:
        ds.path("toy", download=True)
    assert f.sha256 in str(e.value) and sha(good[:-1] + b"3") in str(e.value) and str(p) in str(e.value)
    assert leftovers(folder) == []

    register(monkeypatch, "toy", dataclasses.replace(f, url=f"{base}/truncated/good.csv"))
    with pytest.raises(ds.DownloadError, match=r"closed after 4,000 of 8,000 bytes"):
        ds.path("toy", download=True)
    assert leftovers(folder) == []

    register(monkeypatch, "toy", dataclasses.replace(f, url=f"{base}/missing.csv"))
    with pytest.raises(ds.DownloadError, match="404") as e:
        ds.path("toy", download=True)
    assert f"{base}/missing.csv" in str(e.value) and str(p) in str(e.value)
    assert leftovers(folder) == []


def test_download_gzip_transform(cache, server, monkeypatch):
    root, base = server
    content = b"x,y\n" + b"".join(b"%d,%d\n" % (i, i * i) for i in range(2000))
    (root / "t.csv").write_bytes(content)
    # the reference copy (made with GNU gzip) has other bytes than Python's gzip writes
    f = ds.DataFile("t.csv.gz", "0" * 64, 1234, f"{base}/t.csv", "test", transform="gzip",
                    content_sha256=sha(content), content_size=len(content))
    register(monkeypatch, "toy", f)
    p = ds.path("toy", download=True)
    assert gzip.decompress(p.read_bytes()) == content and leftovers(p.parent) == ["t.csv.gz"]
    ds._files._VERIFIED.clear()
    assert ds.path("toy") == p  # verifies again from scratch through the content checksum
    p.unlink()
    register(monkeypatch, "toy", dataclasses.replace(f, content_sha256="1" * 64))
    with pytest.raises(ds.ChecksumError, match="uncompressed"):
        ds.path("toy", download=True)
    assert leftovers(p.parent) == []


def test_download_zip_member_transform_and_fetch(cache, server, monkeypatch):
    root, base = server
    member = b'{"a": {"A1": "one"}}'
    with zipfile.ZipFile(root / "pkg.whl", "w") as z:
        z.writestr("pkg/data/maps.json", member)
        z.writestr("pkg/__init__.py", "")
    plain = b"1 2 3\n"
    (root / "plain.txt").write_bytes(plain)
    files = (
        ds.DataFile("plain.txt", sha(plain), len(plain), f"{base}/plain.txt", "test"),
        ds.DataFile("maps.json", sha(member), len(member), f"{base}/pkg.whl", "test", transform="zip-member",
                    member="pkg/data/maps.json"),
    )
    register(monkeypatch, "toy", *files)
    folder = ds.fetch("toy")
    assert folder == cache / "toy"
    assert (folder / "maps.json").read_bytes() == member and (folder / "plain.txt").read_bytes() == plain
    assert leftovers(folder) == ["maps.json", "plain.txt"]
    (folder / "maps.json").unlink()
    register(monkeypatch, "toy", files[0], dataclasses.replace(files[1], member="pkg/other.json"))
    with pytest.raises(ds.DownloadError, match="cannot extract pkg/other.json"):
        ds.fetch("toy")
    assert leftovers(folder) == ["plain.txt"]


def test_unwritable_data_folder_gives_download_error(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("BAYESFAIR_DATA", str(blocker))  # a file, so <cache>/<dataset> cannot be created
    with pytest.raises(ds.DownloadError, match="cannot write"):
        ds.path("adult", download=True)


# ---------------------------------------------------------------------------------------------
# Loaders (shapes and facts from the PROVENANCE.md files)
# ---------------------------------------------------------------------------------------------


@needs_shared
def test_load_yeast():
    full = ds.load_yeast()
    assert full.shape == (2417, 117)
    features, labels = full.attrs["features"], full.attrs["labels"]
    assert features == [f"Att{i}" for i in range(1, 104)] and labels == [f"Class{i}" for i in range(1, 15)]
    assert list(full.columns) == features + labels
    assert (full[features].dtypes == np.float64).all() and (full[labels].dtypes == np.int64).all()
    assert set(np.unique(full[labels].to_numpy())) == {0, 1}
    freq = [0.315, 0.429, 0.407, 0.357, 0.299, 0.247, 0.177, 0.199, 0.074, 0.105, 0.120, 0.751, 0.744, 0.014]
    np.testing.assert_allclose(full[labels].mean().to_numpy(), freq, atol=6e-4)
    assert full[labels].sum(axis=1).mean() == pytest.approx(4.237, abs=1e-3)  # label cardinality
    train, test = ds.load_yeast("train"), ds.load_yeast("test")
    assert train.shape == (1500, 117) and test.shape == (917, 117)
    assert train.attrs["labels"] == labels and test.attrs["split"] == "test"

    def rows(df):
        a = df.to_numpy()
        return a[np.lexsort(a.T[::-1])]

    np.testing.assert_array_equal(rows(full), rows(pd.concat([train, test])))  # the split partitions the rows


@needs_shared
@pytest.mark.parametrize("variant,shape", [
    ("two_years", (7214, 53)),
    ("two_years_violent", (4743, 54)),
    ("scores", (11757, 47)),
    ("raw", (60843, 28)),
    ("groupfairtreatment", (18316, 19)),
])
def test_load_compas_shapes(variant, shape):
    df = ds.load_compas(variant)
    assert df.shape == shape and df.attrs["variant"] == variant


@needs_shared
def test_load_compas_contents():
    df = ds.load_compas()
    assert {"decile_score", "decile_score.1", "priors_count", "priors_count.1", "two_year_recid"} <= set(df.columns)
    assert df["race"].value_counts().to_dict() == {"African-American": 3696, "Caucasian": 2454, "Hispanic": 637,
                                                   "Other": 377, "Asian": 32, "Native American": 18}
    assert df["age_cat"].value_counts().to_dict() == {"25 - 45": 4109, "Greater than 45": 1576, "Less than 25": 1529}
    assert df["decile_score"].dtype == np.int64 and df["decile_score"].between(1, 10).all()
    assert "two_year_recid.1" in ds.load_compas("two_years_violent").columns
    raw = ds.load_compas("raw")
    assert set(raw["DisplayText"]) == {"Risk of Violence", "Risk of Recidivism", "Risk of Failure to Appear"}
    assert raw["MiddleName"].isna().any()  # NULL is missing
    gft = ds.load_compas("groupfairtreatment")
    assert list(gft.index[:3]) == [0, 1, 2] and gft.index[-1] == 18315
    assert {"race", "age_cat", "v_decile_score", "decile_score.2"} <= set(gft.columns)
    assert (gft["decile_score"] == gft["decile_score.2"]).all()


@needs_shared
def test_load_family_income():
    df = ds.load_family_income()
    assert df.shape == (41544, 60)
    assert df["Total Household Income"].mean() == pytest.approx(247555.58, abs=0.01)
    assert df["Household Head Sex"].value_counts().to_dict() == {"Male": 32483, "Female": 9061}
    assert df["Household Head Age"].between(9, 99).all()
    assert not df.isna().any().any()
    assert df["Region"].nunique() == 17 and " ARMM" in set(df["Region"])
    types = df.attrs["column_types"]
    assert list(types) == list(df.columns) and len(df.attrs["categorical"]) == 15
    assert all(df[c].dtype == np.int64 for c, t in types.items() if t == "num")
    cat = ds.load_family_income(categorical=True)
    assert all(str(cat[c].dtype) == "category" for c in cat.attrs["categorical"])


@needs_shared
def test_load_adult():
    train, test, both = ds.load_adult(), ds.load_adult("test"), ds.load_adult("all")
    assert train.shape == (32561, 16) and test.shape == (16281, 16) and both.shape == (48842, 16)
    assert both.attrs["n_train"] == 32561 and list(both.columns) == list(ds.ADULT_COLUMNS) + ["label"]
    for df in (train, test):
        assert set(df["income"]) == {"<=50K", ">50K"} and set(df["label"]) == {0, 1}
        assert (df["label"] == (df["income"] == ">50K")).all()
    assert train["label"].sum() == 7841
    assert train["sex"].value_counts().to_dict() == {"Male": 21790, "Female": 10771}
    assert train["race"].value_counts().to_dict() == {"White": 27816, "Black": 3124, "Asian-Pac-Islander": 1039,
                                                      "Amer-Indian-Eskimo": 311, "Other": 271}
    assert train[["workclass", "occupation", "native-country"]].isna().sum().tolist() == [1836, 1843, 583]
    assert not train["workclass"].str.startswith(" ").any()
    assert train["age"].dtype == np.int64 and train.iloc[0]["workclass"] == "State-gov"
    # the names are those of adult.names
    text = (SHARED / "adult" / "adult.names").read_text()
    listed = re.findall(r"^([a-z-]+): ", text.split(">50K, <=50K.", 1)[1], flags=re.M)
    assert tuple(listed) + ("income",) == ds.ADULT_COLUMNS


@needs_shared
def test_load_german_credit():
    df = ds.load_german_credit()
    assert df.shape == (1000, 23) and list(df.columns) == list(ds.GERMAN_COLUMNS) + ["sex", "label"]
    assert df["label"].sum() == 700 and df["credit"].value_counts().to_dict() == {"good": 700, "bad": 300}
    assert df["sex"].value_counts().to_dict() == {"male": 690, "female": 310}
    assert df["telephone"].dtype == bool and df["foreign_worker"].dtype == bool
    assert df.iloc[0]["purpose"] == "radio/television" and df.iloc[0]["age"] == 67
    codes = ds.load_german_credit(decode=False)
    assert codes.shape == (1000, 23) and codes.iloc[0]["purpose"] == "A43"
    assert codes["status_sex"].value_counts().to_dict() == {"A93": 548, "A92": 310, "A94": 92, "A91": 50}
    assert codes["credit"].tolist().count(2) == 300


@needs_shared
def test_german_codes_only_need_german_data(cache):
    (cache / "german_credit").mkdir(parents=True)
    shutil.copyfile(SHARED / "german_credit" / "german.data", cache / "german_credit" / "german.data")
    assert ds.load_german_credit(decode=False).shape == (1000, 23)
    with pytest.raises(ds.MissingFileError, match="values_maps.json"):
        ds.load_german_credit()


def test_arff_reader_handles_quoting_nominals_and_missing(tmp_path):
    p = tmp_path / "t.arff"
    p.write_text("% comment\n@RELATION t\n@attribute 'a b' NUMERIC\n@attribute c {x,'y z'}\n@attribute d {0,1}\n"
                 "@attribute e string\n@data\n% row comment\n1.5, x, 1, hello\n?, 'y z', 0, ?\n\n")
    df = ds.loaders._read_arff(p)
    assert list(df.columns) == ["a b", "c", "d", "e"]
    assert np.isnan(df["a b"][1]) and df["a b"][0] == 1.5
    assert list(df["c"].cat.categories) == ["x", "y z"] and df["c"][1] == "y z"
    assert df["d"].dtype == np.int64 and df["d"].tolist() == [1, 0]
    assert df["e"][0] == "hello"
    p.write_text("@attribute a numeric\n@attribute b {0,1}\n@data\n1,2\n")
    with pytest.raises(ValueError, match=r"attribute 'b' has values \['2'\]"):
        ds.loaders._read_arff(p)
    p.write_text("@attribute a numeric\n@attribute b {0,1}\n@data\n1\n")
    with pytest.raises(ValueError, match="data row 1 has 1 values, expected 2"):
        ds.loaders._read_arff(p)
    p.write_text("@attribute a numeric\n@data\n{0 1}\n")
    with pytest.raises(ValueError, match="sparse"):
        ds.loaders._read_arff(p)


def test_dedupe_like_pandas():
    assert ds.loaders._dedupe(["a", "b", "a", "a"]) == ["a", "b", "a.1", "a.2"]
    assert ds.loaders._dedupe(["", "d", "x", "d", "v", "d.1"]) == ["", "d", "x", "d.2", "v", "d.1"]
