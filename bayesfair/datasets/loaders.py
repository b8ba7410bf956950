"""pandas loaders of the registered datasets (they read verified local files; download on request)."""

from __future__ import annotations

import csv
import gzip
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bayesfair.datasets.files import _choice, _flag, path

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["load_yeast", "load_compas", "load_family_income", "load_adult", "load_german_credit",
           "ADULT_COLUMNS", "GERMAN_COLUMNS"]

# ----------------------------------------------------------------------------------------------
# Readers
# ----------------------------------------------------------------------------------------------


def _dedupe(names: list[str]) -> list[str]:
    """Make repeated column names unique as pandas names them: a repeat of ``x`` becomes ``x.1``, or
    the first ``x.k`` that is neither used already nor a name elsewhere in the header."""
    header = set(names)
    used: set[str] = set()
    out = []
    for n in names:
        new, k = n, 0
        while new in used or (k > 0 and new in header):
            k += 1
            new = f"{n}.{k}"
        used.add(new)
        out.append(new)
    return out


def _csv_header(p: Path) -> list[str]:
    opener = gzip.open if p.suffix == ".gz" else open
    with opener(p, "rt", encoding="utf-8", newline="") as fh:
        return next(csv.reader(fh))


def _read_csv(p: Path, *, na_values: list[str], index_col: int | None = None) -> pd.DataFrame:
    import pandas as pd

    names = _dedupe(_csv_header(p))
    df = pd.read_csv(p, header=0, names=names, na_values=na_values, keep_default_na=False, low_memory=False,
                     index_col=index_col)
    if index_col is not None:
        df.index.name = None
    return df


def _arff_attribute(text: str, where: str) -> tuple[str, str, list[str] | None]:
    """Parse the part after ``@attribute``: (name, kind, categories)."""
    text = text.strip()
    if text[:1] in ("'", '"'):
        end = text.find(text[0], 1)
        if end < 0:
            raise ValueError(f"{where}: unterminated quoted attribute name")
        name, rest = text[1:end], text[end + 1:].strip()
    else:
        parts = text.split(None, 1)
        if len(parts) != 2:
            raise ValueError(f"{where}: attribute without a type: {text!r}")
        name, rest = parts
    low = rest.lower()
    if low in ("numeric", "real", "integer"):
        return name, "numeric", None
    if rest.startswith("{") and rest.endswith("}"):
        cats = [c.strip() for c in next(csv.reader([rest[1:-1]], quotechar="'", skipinitialspace=True), [])]
        return name, "nominal", cats
    if low == "string" or low.startswith("date"):
        return name, "string", None
    raise ValueError(f"{where}: unsupported ARFF attribute type {rest!r} for {name!r} "
                     f"(supported: numeric/real/integer, {{nominal}}, string, date)")


def _read_arff(p: Path) -> pd.DataFrame:
    """Read a dense ARFF file.

    ``numeric`` attributes become float64 (``?`` -> NaN); nominal attributes whose categories are
    all integers (e.g. ``{0,1}``) become int64 (missing values are an error); other nominal
    attributes become pandas categoricals with the declared categories; string and date
    attributes stay strings. ``df.attrs["arff_kinds"]`` maps each column to numeric/nominal/string.
    """
    import numpy as np
    import pandas as pd

    lines = p.read_text(encoding="utf-8").splitlines()
    attrs: list[tuple[str, str, list[str] | None]] = []
    data_start = None
    for i, line in enumerate(lines):
        s = line.strip()
        if not s or s.startswith("%"):
            continue
        word = s.split(None, 1)[0].lower()
        if word == "@relation":
            continue
        if word == "@attribute":
            attrs.append(_arff_attribute(s[len("@attribute"):], f"{p}, line {i + 1}"))
            continue
        if word == "@data":
            data_start = i + 1
            break
        raise ValueError(f"{p}, line {i + 1}: unexpected line in the ARFF header: {s[:60]!r}")
    if data_start is None or not attrs:
        raise ValueError(f"{p}: not an ARFF file (no @attribute lines or no @data section)")
    names = [a[0] for a in attrs]
    if len(set(names)) != len(names):
        raise ValueError(f"{p}: repeated attribute names")
    body = [s for s in (line.strip() for line in lines[data_start:]) if s and not s.startswith("%")]
    if body and body[0].startswith("{"):
        raise ValueError(f"{p}: sparse ARFF data is not supported")
    rows = list(csv.reader(body, quotechar="'", skipinitialspace=True))
    for r, row in enumerate(rows):
        if len(row) != len(attrs):
            raise ValueError(f"{p}: data row {r + 1} has {len(row)} values, expected {len(attrs)}")
    columns = list(zip(*rows, strict=True)) if rows else [()] * len(attrs)
    out: dict[str, Any] = {}
    for (name, kind, cats), col in zip(attrs, columns, strict=True):
        values = [v.strip() for v in col]
        if kind == "numeric":
            try:
                out[name] = np.array([np.nan if v == "?" else float(v) for v in values], dtype=np.float64)
            except ValueError as e:
                raise ValueError(f"{p}: attribute {name!r} is numeric but has a non-numeric value ({e})") from None
        elif kind == "nominal":
            assert cats is not None
            bad = set(values) - set(cats) - {"?"}
            if bad:
                raise ValueError(f"{p}: attribute {name!r} has values {sorted(bad)[:5]} outside {{{','.join(cats)}}}")
            if all(c.lstrip("-").isdigit() for c in cats):
                if "?" in values:
                    raise ValueError(f"{p}: attribute {name!r} has missing values ('?')")
                out[name] = np.array([int(v) for v in values], dtype=np.int64)
            else:
                out[name] = pd.Categorical([None if v == "?" else v for v in values], categories=cats)
        else:
            out[name] = pd.array([None if v == "?" else v for v in values], dtype="str")
    df = pd.DataFrame(out, columns=names)
    df.attrs["arff_kinds"] = {a[0]: a[1] for a in attrs}
    return df


def _mulan_labels(p: Path) -> list[str]:
    import xml.etree.ElementTree as ET

    root = ET.parse(p).getroot()
    labels = [el.get("name") for el in root.iter() if el.tag.rsplit("}", 1)[-1] == "label"]
    if not labels or any(not n for n in labels):
        raise ValueError(f"{p}: no MULAN <label name=...> entries")
    return [str(n) for n in labels]


# ----------------------------------------------------------------------------------------------
# Loaders
# ----------------------------------------------------------------------------------------------

_YEAST_FILES = {"all": "yeast.arff", "train": "yeast-train.arff", "test": "yeast-test.arff"}


def load_yeast(split: str = "all", *, download: bool = False) -> pd.DataFrame:
    """The yeast multi-label dataset (MULAN's ARFF files) as one DataFrame.

    Parameters
    ----------
    split : {"all", "train", "test"}, default "all"
        ``"all"``: ``yeast.arff``, 2,417 rows; ``"train"``: 1,500 rows; ``"test"``: 917 rows (the
        standard split; train and test together are the rows of ``"all"``).
    download : bool, default False
        Download missing files (see :func:`path`).

    Returns
    -------
    pandas.DataFrame
        ``n x 117``: the 103 features ``Att1`` ... ``Att103`` (float64) then the 14 labels
        ``Class1`` ... ``Class14`` (int64, 0/1), in ARFF order, with a RangeIndex.
        ``df.attrs["features"]`` and ``df.attrs["labels"]`` list the column names; which
        attributes are labels is read from ``yeast.xml`` and checked against the ARFF header.
    """
    split = _choice("split", split, _YEAST_FILES)
    _flag("download", download)
    df = _read_arff(path("yeast", _YEAST_FILES[split], download=download))
    xml_labels = _mulan_labels(path("yeast", "yeast.xml", download=download))
    kinds = df.attrs.pop("arff_kinds")
    missing = [n for n in xml_labels if n not in kinds]
    if missing:
        raise ValueError(f"yeast.xml names labels {missing} that are not attributes of the ARFF file")
    label_set = set(xml_labels)
    labels = [c for c in df.columns if c in label_set]
    features = [c for c in df.columns if c not in label_set]
    not_binary = [c for c in labels if str(df[c].dtype) != "int64" or not df[c].isin([0, 1]).all()]
    not_numeric = [c for c in features if kinds[c] != "numeric"]
    if not_binary or not_numeric:
        raise ValueError(f"unexpected yeast attributes: labels not 0/1 {not_binary}, "
                         f"features not numeric {not_numeric}")
    df.attrs.update(dataset="yeast", split=split, features=features, labels=labels)
    return df


_COMPAS_FILES = {
    "two_years": "compas-scores-two-years.csv",
    "two_years_violent": "compas-scores-two-years-violent.csv",
    "scores": "compas-scores.csv",
    "raw": "compas-scores-raw.csv.gz",
    "groupfairtreatment": "compas_filtered_groupfairtreatment.csv",
}


def load_compas(variant: str = "two_years", *, download: bool = False) -> pd.DataFrame:
    """A COMPAS table (ProPublica, or the filtered table of Schumann et al.).

    Parameters
    ----------
    variant : str, default "two_years"
        ================== ======================================== ============
        variant            file                                     DataFrame
        ================== ======================================== ============
        two_years          compas-scores-two-years.csv              7,214 x 53
        two_years_violent  compas-scores-two-years-violent.csv      4,743 x 54
        scores             compas-scores.csv                        11,757 x 47
        raw                compas-scores-raw.csv.gz                 60,843 x 28
        groupfairtreatment compas_filtered_groupfairtreatment.csv   18,316 x 19
        ================== ======================================== ============
    download : bool, default False
        Download the file if missing (see :func:`path`).

    Returns
    -------
    pandas.DataFrame
        Columns as in the file's header. Repeated header names get pandas' suffixes, fixed here:
        ``decile_score.1`` and ``priors_count.1`` in the ProPublica tables (the second copies),
        ``two_year_recid.1`` in the violent table. Integer columns are int64, columns with
        missing numbers float64, everything else (including dates, kept as text) ``str``. Missing
        values are empty fields and ``N/A`` (``score_text``), and ``NULL`` in the raw table.
        ``groupfairtreatment`` is the table of the biased-feedback paper's real-data experiment:
        its unnamed first column (0 ... 18,315) becomes the index; its header names ``decile_score``
        twice next to a ``decile_score.1``, so the columns are ``decile_score``, ``decile_score.2``
        and ``decile_score.1`` (identical values). Its paper configuration: group ``race``
        (African-American vs rest), arms ``age_cat``, reward ``v_decile_score``.
        ``df.attrs["dataset"]``/``["variant"]`` record what was loaded.

    Notes
    -----
    These files hold names and birth dates of real defendants, as ProPublica published them.
    """
    variant = _choice("variant", variant, _COMPAS_FILES)
    _flag("download", download)
    p = path("compas", _COMPAS_FILES[variant], download=download)
    na = ["", "N/A", "NULL"] if variant == "raw" else ["", "N/A"]
    df = _read_csv(p, na_values=na, index_col=0 if variant == "groupfairtreatment" else None)
    df.attrs.update(dataset="compas", variant=variant)
    return df


def load_family_income(*, categorical: bool = False, download: bool = False) -> pd.DataFrame:
    """The Filipino Family Income and Expenditure table (FIES 2015, 41,544 households x 60 columns).

    Parameters
    ----------
    categorical : bool, default False
        Convert the 15 columns that ``column_types_groupfairtreatment.csv`` marks ``vals``
        (Region, Household Head Sex, Type of Household, ...) to pandas ``category`` dtype.
    download : bool, default False
        Download missing files (see :func:`path`).

    Returns
    -------
    pandas.DataFrame
        ``41,544 x 60`` with the original column names (including the original spellings, e.g.
        ``Total Fish and  marine products Expenditure`` with two spaces). The 45 ``num`` columns
        are int64; the 15 ``vals`` columns are ``str`` (or ``category``). There are no missing
        values: the literal ``NA`` (household heads without an occupation) and ``None`` (toilet
        facilities) are kept as categories, and values are not stripped (``" ARMM"``).
        ``df.attrs["column_types"]`` maps every column to ``"num"`` or ``"vals"``;
        ``df.attrs["categorical"]`` lists the ``vals`` columns. Schumann et al. use
        ``Household Head Sex`` as group, 5 buckets of ``Household Head Age`` as arms and
        ``Total Household Income`` as reward.
    """
    import pandas as pd

    _flag("categorical", categorical)
    _flag("download", download)
    df = pd.read_csv(path("family_income", download=download), keep_default_na=False, na_values=[],
                     low_memory=False)
    types = pd.read_csv(path("family_income", "column_types_groupfairtreatment.csv", download=download),
                        keep_default_na=False, dtype=str)
    column_types = dict(zip(types["Name"], types["Type"], strict=True))
    if list(column_types) != list(df.columns) or not set(column_types.values()) <= {"num", "vals"}:
        raise ValueError("column_types_groupfairtreatment.csv does not describe the columns of the family income table")
    cats = [c for c, t in column_types.items() if t == "vals"]
    if categorical:
        df[cats] = df[cats].astype("category")
    df.attrs.update(dataset="family_income", column_types=column_types, categorical=cats)
    return df


#: Column names of adult.data / adult.test, as listed in adult.names (plus the label ``income``).
ADULT_COLUMNS = (
    "age", "workclass", "fnlwgt", "education", "education-num", "marital-status", "occupation",
    "relationship", "race", "sex", "capital-gain", "capital-loss", "hours-per-week", "native-country", "income",
)
_ADULT_NUMERIC = ("age", "fnlwgt", "education-num", "capital-gain", "capital-loss", "hours-per-week")


def _read_adult(p: Path, *, test: bool) -> pd.DataFrame:
    import pandas as pd

    df = pd.read_csv(p, header=None, names=list(ADULT_COLUMNS), skiprows=1 if test else 0, skipinitialspace=True,
                     na_values=["?"], keep_default_na=False, dtype={c: "int64" for c in _ADULT_NUMERIC})
    for c in ADULT_COLUMNS:
        if c not in _ADULT_NUMERIC:
            df[c] = df[c].str.strip()
    df["income"] = df["income"].str.removesuffix(".")
    bad = set(df["income"].unique()) - {"<=50K", ">50K"}
    if bad:
        raise ValueError(f"{p}: unexpected income values {sorted(map(str, bad))}")
    df["label"] = (df["income"] == ">50K").astype("int64")
    return df


def load_adult(split: str = "train", *, download: bool = False) -> pd.DataFrame:
    """The UCI Adult data with column names and clean labels.

    Parameters
    ----------
    split : {"train", "test", "all"}, default "train"
        ``"train"``: ``adult.data``, 32,561 rows; ``"test"``: ``adult.test``, 16,281 rows (its
        leading comment line skipped); ``"all"``: train then test, 48,842 rows (RangeIndex;
        ``df.attrs["n_train"]`` = 32,561).
    download : bool, default False
        Download missing files (see :func:`path`).

    Returns
    -------
    pandas.DataFrame
        ``n x 16``: the 15 columns of :data:`ADULT_COLUMNS` (names as in ``adult.names``), then
        ``label`` (int64, 1 if ``income`` is ``>50K``). ``age``, ``fnlwgt``, ``education-num``,
        ``capital-gain``, ``capital-loss``, ``hours-per-week`` are int64; the others are ``str``
        with surrounding spaces stripped and ``?`` read as missing (NaN; in ``adult.data``:
        workclass 1,836, occupation 1,843, native-country 583). ``income`` is ``<=50K`` or
        ``>50K`` in both splits (the test file's trailing ``.`` is removed).
    """
    import pandas as pd

    split = _choice("split", split, ("train", "test", "all"))
    _flag("download", download)
    parts = []
    if split in ("train", "all"):
        parts.append(_read_adult(path("adult", "adult.data", download=download), test=False))
    if split in ("test", "all"):
        parts.append(_read_adult(path("adult", "adult.test", download=download), test=True))
    df = parts[0] if len(parts) == 1 else pd.concat(parts, ignore_index=True)
    df.attrs.update(dataset="adult", split=split)
    if split == "all":
        df.attrs["n_train"] = len(parts[0])
    return df


#: Column names used for german.data (the categorical ones are the keys of values_maps.json).
GERMAN_COLUMNS = (
    "status", "duration", "credit_history", "purpose", "credit_amount", "savings", "present_employment",
    "installment_rate", "status_sex", "other_debtors", "present_residence", "property", "age",
    "installment_plans", "housing", "existing_credits", "job", "people_liable", "telephone", "foreign_worker",
    "credit",
)
_GERMAN_NUMERIC = ("duration", "credit_amount", "installment_rate", "present_residence", "age",
                   "existing_credits", "people_liable", "credit")


def load_german_credit(*, decode: bool = True, download: bool = False) -> pd.DataFrame:
    """The Statlog German Credit data (1,000 applicants).

    Parameters
    ----------
    decode : bool, default True
        Replace the symbolic codes (``A11`` ... ``A202``) by the texts of ``values_maps.json``
        (needs that file); with False the codes are kept and only ``german.data`` is read.
    download : bool, default False
        Download missing files (see :func:`path`).

    Returns
    -------
    pandas.DataFrame
        ``1,000 x 23``: the 21 columns of :data:`GERMAN_COLUMNS` in file order, then two derived
        columns: ``sex`` (``"female"`` for status_sex A92/A95, else ``"male"``: 310 female, 690
        male) and ``label`` (int64, 1 for good credit: 700 of 1,000). Numeric attributes
        (duration in months, credit amount, installment rate, present residence, age in years,
        number of existing credits, people liable) are int64. With ``decode=True`` the
        categorical attributes are ``str`` texts, ``telephone`` and ``foreign_worker`` are bool,
        and ``credit`` is ``"good"``/``"bad"``; with ``decode=False`` they are the codes (``str``)
        and ``credit`` is 1 (good) / 2 (bad).
    """
    import json

    import pandas as pd

    _flag("decode", decode)
    _flag("download", download)
    p = path("german_credit", "german.data", download=download)
    df = pd.read_csv(p, sep=" ", header=None, names=list(GERMAN_COLUMNS), keep_default_na=False,
                     dtype={c: ("int64" if c in _GERMAN_NUMERIC else "str") for c in GERMAN_COLUMNS})
    if df.shape[1] != len(GERMAN_COLUMNS) or not df["credit"].isin([1, 2]).all():
        raise ValueError(f"{p}: not the german.data layout (21 space-separated fields, class 1 or 2)")
    sex = df["status_sex"].map(lambda c: "female" if c in ("A92", "A95") else "male").astype("str")
    label = (df["credit"] == 1).astype("int64")
    if decode:
        maps = json.loads(path("german_credit", "values_maps.json", download=download).read_text(encoding="utf-8"))
        for col, mapping in maps.items():
            if col not in df.columns:
                raise ValueError(f"values_maps.json maps an unknown column {col!r}")
            mapping = {str(k): (v.strip() if isinstance(v, str) else v) for k, v in mapping.items()}
            codes = df[col].astype("str")
            unknown = set(codes) - set(mapping)
            if unknown:
                raise ValueError(f"values_maps.json has no text for the {col!r} codes {sorted(unknown)}")
            values = codes.map(mapping)
            kinds = {type(v) for v in mapping.values()}
            df[col] = values.astype("bool" if kinds == {bool} else "str")
    df["sex"] = sex
    df["label"] = label
    df.attrs.update(dataset="german_credit", decoded=decode)
    return df
