"""Integrity of results files: schema version and checksum, verified on read.

A damaged, foreign or newer file is refused with a ResultsFileError (a ValueError, exit code 2 in
the CLI) instead of giving wrong numbers; so is a file written before the checks or with its
integrity attributes stripped, unless the caller opts in (allow_unverified=True, --unverified): then
it is read with a warning.
"""

import copy
import json
import warnings

import h5py
import numpy as np
import pytest
import xarray as xr

import bayesfair as bf
from bayesfair.simulation import results as io
from bayesfair.simulation.results import RESULTS_SCHEMA, ResultsFileError, read_results, results_checksum, write_results
from bayesfair.workflow import cli
from bayesfair.workflow.outputs import OutputError
from bayesfair.workflow.sweep import Sweep, combine

SCHEMA, CHECKSUM = "bayesfair_schema", "bayesfair_checksum"


@pytest.fixture(scope="module")
def sim():
    """A small simulate() Dataset with the optional group-floor variables (bf_regret, group_floor, ...)."""
    m = bf.merit.exponential(4.0)
    env = bf.bernoulli_arms(np.array([0.2, 0.5, 0.55, 0.8]), groups=[0, 0, 1, 1])
    ds = bf.simulate(0, env, {"EG": bf.fairx_eg(m, epsilon=0.1), "U": bf.uniform()}, 40, 2, merit=m,
                     floors=[0.3, 0.3])
    assert {"group_floor", "bf_regret", "anytime_slack", "pi_star_within", "group_exposure"} <= set(ds.data_vars)
    return ds


@pytest.fixture
def results(sim, tmp_path):
    return write_results(sim, tmp_path / "r.nc")


def _flip(path, offset, n=64):
    raw = bytearray(path.read_bytes())
    for i in range(offset, min(offset + n, len(raw))):
        raw[i] ^= 0xFF
    path.write_bytes(bytes(raw))


def _same_data(a, b):
    """Same variables, coordinates and values (attributes aside)."""
    xr.testing.assert_identical(a.drop_attrs(), b.drop_attrs())


# ---------------------------------------------------------------------------------------------
# writing and verifying


def test_round_trip_stamps_and_verifies(sim, results):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        back = read_results(results)
    assert int(back.attrs[SCHEMA]) == RESULTS_SCHEMA == 1
    assert back.attrs[CHECKSUM].startswith("sha256:") and len(back.attrs[CHECKSUM]) == 7 + 64
    assert results_checksum(back) == back.attrs[CHECKSUM] == results_checksum(sim.assign_attrs(
        {SCHEMA: RESULTS_SCHEMA}))
    _same_data(sim, back)
    assert {k: back.attrs[k] for k in sim.attrs} == sim.attrs
    assert SCHEMA not in sim.attrs and CHECKSUM not in sim.attrs  # the caller's Dataset is not changed


def test_checksum_is_stable_and_changes_with_any_value(sim, tmp_path):
    a = read_results(write_results(sim, tmp_path / "a.nc"))
    b = read_results(write_results(sim, tmp_path / "b.nc"))
    assert a.attrs[CHECKSUM] == b.attrs[CHECKSUM]
    # written again from a Dataset that was read (stale stamp, file encodings): the same hash
    c = read_results(write_results(a, tmp_path / "c.nc"))
    assert c.attrs[CHECKSUM] == a.attrs[CHECKSUM]
    base = results_checksum(a)
    ge = a["group_exposure"].values.copy()
    ge[1, 0, -1, 1] += 1e-9
    changed = [
        a.assign(group_exposure=(a["group_exposure"].dims, ge)),
        a.assign(pulls=a["pulls"].where(a["pulls"] != a["pulls"].values.flat[-1], 0)),
        a.assign_coords(policy=["EG", "V"]),
        a.assign_coords(checkpoint=a["checkpoint"].values + 1),
        a.assign_attrs(config=a.attrs["config"].replace('"horizon": 40', '"horizon": 41')),
        a.assign_attrs(note="x"),
        a.rename({"bf_regret": "bf_regret2"}),
        a.drop_vars("seconds"),
    ]
    gf = a["group_floor"].copy()
    gf.attrs["long_name"] = "changed"
    changed.append(a.assign(group_floor=gf))
    hashes = {results_checksum(d) for d in changed}
    assert base not in hashes and len(hashes) == len(changed)
    # a changed copy written out gets its own, valid checksum (the stale one is replaced)
    d = read_results(write_results(changed[0], tmp_path / "d.nc"))
    assert d.attrs[CHECKSUM] != a.attrs[CHECKSUM] and d["group_exposure"].values[1, 0, -1, 1] == ge[1, 0, -1, 1]


def test_checksum_survives_the_round_trip_for_other_dtypes(tmp_path):
    """bools, small ints, float32, NaN, strings, datetimes and non-string attributes change dtype
    or form on the way through netCDF; the normalized hash does not."""
    ds = xr.Dataset(
        {"flag": ("x", np.array([True, False, True])),
         "small": ("x", np.array([1, -2, 3], np.int8)),
         "u": ("x", np.array([1, 2, 3], np.uint16)),
         "f32": (("x", "y"), np.arange(6, dtype=np.float32).reshape(3, 2) / 7),
         "nan": ("x", np.array([np.nan, 1.5, -np.nan])),
         "label": ("x", np.array(["a", "bé", ""])),
         "when": ("x", np.array(["2026-01-01", "2026-06-01", "NaT"], "datetime64[ns]")),
         "empty": ("z", np.zeros(0))},
        coords={"x": ["p", "q", "r"], "y": [0.5, 1.5], "xi": ("x", np.array([3, 4, 5], np.int32))},
        attrs={"int": 3, "float": 0.25, "list": [1, 2, 3], "one": [7], "strs": ["a", "b"], "text": "t",
               "arr": np.array([0.5, 1.5]), "versions": json.dumps({"bayesfair": "0"})},
    )
    ds["f32"].attrs["units"] = "s"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # xarray may warn about encodings of the exotic dtypes
        path = write_results(ds, tmp_path / "odd.nc")
        back = read_results(path)
    assert back.attrs[CHECKSUM] == results_checksum(back)
    assert back["flag"].dtype == bool and back["label"].values.tolist() == ["a", "bé", ""]


def test_sweep_results_and_points_carry_verified_checksums(tmp_path):
    base = {
        "name": "sw", "seed": 4, "runs": 2, "horizon": 24, "chunk_size": 8, "checkpoints": [8, 24],
        "floors": [0.3, 0.3], "merit": {"name": "identity"},
        "environment": {"name": "bernoulli_arms", "means": {"low": 0.6, "high": 0.85}, "n_arms": 4,
                        "group_sizes": [2, 2]},
        "policies": {"GEF": {"name": "gef", "groups_beta": [0.4, 0.4]}},
        "sweep": {"policies.GEF.groups_beta": [[0.2, 0.2], [0.4, 0.4]]},
    }
    sw = Sweep.from_raw(copy.deepcopy(base), "sw.toml")
    res = sw.execute(tmp_path)  # writes every point and the combined file through write_results
    points = sorted((tmp_path / "sw.points").glob("*.nc"))
    assert [p.name for p in points] == ["sw-000.nc", "sw-001.nc"]
    for p in [res.results, *points]:
        ds = read_results(p)
        assert int(ds.attrs[SCHEMA]) == RESULTS_SCHEMA and ds.attrs[CHECKSUM] == results_checksum(ds)
    combined = read_results(res.results)
    assert combined["policies.GEF.groups_beta"].values.tolist() == ["[0.2, 0.2]", "[0.4, 0.4]"]
    assert {"bf_regret", "group_floor", "arm_group"} <= set(combined.data_vars)
    # resume: the points are read back (with their own stamps) and combined; the new file verifies
    again = sw.execute(tmp_path, resume=True)
    assert again.resumed and read_results(again.results).attrs[CHECKSUM] == results_checksum(combined)
    # a damaged point is not trusted on resume: the sweep refuses to go on (naming the damage)
    # until told to overwrite it; then it is run again and its file replaced
    point = read_results(points[1])
    with h5py.File(points[1]) as f:
        offset = f["exposure"].id.get_offset()
    _flip(points[1], offset)
    with pytest.raises(ResultsFileError, match="checksum mismatch"):
        read_results(points[1])
    with pytest.raises(OutputError, match="sw-001.nc is damaged: checksum mismatch"):
        sw.execute(tmp_path, resume=True)
    said = []
    sw.execute(tmp_path, resume=True, overwrite=True, report=said.append)
    assert "resume: 1 of 2 points already done" in said
    _same_data(read_results(points[1]).drop_vars("seconds"), point.drop_vars("seconds"))
    # (combined from points read back, arm_group returns as a coordinate: not covered by the checksum)
    _same_data(read_results(res.results).drop_vars("seconds").reset_coords(),
               combined.drop_vars("seconds").reset_coords())


def test_combined_points_with_padding_verify(tmp_path):
    """combine() pads points of different shapes with NaN (an outer join); those files verify too."""
    def fake(n_arms, value):
        return xr.Dataset(
            {"regret": (("policy", "run", "checkpoint"), np.full((1, 2, 2), value)),
             "pulls": (("policy", "run", "checkpoint", "arm"), np.full((1, 2, 2, n_arms), 3, np.int64))},
            coords={"policy": ["P"], "run": [0, 1], "checkpoint": [5, 10], "arm": np.arange(n_arms),
                    "arm_group": ("arm", np.zeros(n_arms, int))}, attrs={"created": "x"})

    ds = combine([fake(2, 0.5), fake(3, 1.5)], ["environment.n_arms"], [[2, 3]], {"sweep": "s"})
    assert np.isnan(ds["pulls"].values).any()
    back = read_results(write_results(ds, tmp_path / "c.nc"))
    _same_data(ds, back)
    # the points read from files (as a resumed sweep does) carry an int64 on-disk dtype in their
    # encodings; the padded (float) pulls must still be written as NaN, not cast to garbage integers
    pts = [read_results(write_results(fake(n, v), tmp_path / f"p{n}.nc")) for n, v in ((2, 0.5), (3, 1.5))]
    assert pts[0]["pulls"].encoding["dtype"] == np.int64
    again = combine(pts, ["environment.n_arms"], [[2, 3]], {"sweep": "s"})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        back2 = read_results(write_results(again, tmp_path / "c2.nc"))
    assert back2.attrs[CHECKSUM] == back.attrs[CHECKSUM]
    np.testing.assert_array_equal(back2["pulls"].values, ds["pulls"].values)  # NaN where padded


# ---------------------------------------------------------------------------------------------
# damaged files


def test_flipped_group_exposure_bytes_are_refused(sim, results):
    """The issue's regression: 64 flipped bytes in group_exposure used to read back as other numbers."""
    with h5py.File(results) as f:
        var = f["group_exposure"]
        assert var.chunks is None and var.compression is None  # contiguous storage
        offset = var.id.get_offset()
        nbytes = var.id.get_storage_size()
    assert nbytes >= 64
    _flip(results, offset)
    wrong = read_results(results, verify=False)  # what nothing noticed before
    assert not np.array_equal(wrong["group_exposure"].values, sim["group_exposure"].values)
    with pytest.raises(ResultsFileError, match="damaged: checksum mismatch") as exc:
        read_results(results)
    assert str(results) in str(exc.value) and isinstance(exc.value, ValueError)


@pytest.mark.parametrize("var", ["checkpoint", "pulls", "anytime_slack", "mean", "policy", "group"])
def test_flipped_bytes_in_any_variable_are_refused(results, var):
    with h5py.File(results) as f:
        offset = f[var].id.get_offset()
        vlen = h5py.check_string_dtype(f[var].dtype) is not None
    if vlen:
        # a string is stored as (length, heap address, index): damage the address. (libhdf5
        # trusts a damaged length and may allocate up to 4 GB before it fails.)
        _flip(results, offset + 4, 8)
        with pytest.raises(ResultsFileError, match="damaged"):  # an index: read while opening
            read_results(results)
    else:
        _flip(results, offset, 8)
        with pytest.raises(ResultsFileError, match="checksum mismatch"):
            read_results(results)


def _layout(path):
    """Byte ranges of the numeric variables' data, and of what libhdf5 trusts blindly: the
    global heap collections and the variable-length string references pointing into them."""
    data, trusted = [], []
    with h5py.File(path) as f:
        for var in f.values():
            if isinstance(var, h5py.Dataset) and var.chunks is None and var.id.get_storage_size():
                span = (var.id.get_offset(), var.id.get_offset() + var.id.get_storage_size())
                (trusted if h5py.check_string_dtype(var.dtype) is not None else data).append(span)
    raw = path.read_bytes()
    at = raw.find(b"GCOL")
    while at >= 0:
        trusted.append((at, at + int.from_bytes(raw[at + 8:at + 16], "little")))
        at = raw.find(b"GCOL", at + 4)
    return _merged(data), _merged(trusted)


def _merged(ranges):
    out = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1]:
            out[-1] = (out[-1][0], max(hi, out[-1][1]))
        else:
            out.append((lo, hi))
    return out


def test_damaged_metadata_is_refused_never_wrong_numbers(sim, results):
    """Flip 128-byte windows across the HDF5 metadata h5py needs (superblock, object headers,
    B-trees, heaps, attributes) and the first bytes of every variable's data: every damaged copy
    is refused with a ResultsFileError or, where the bytes were unused, reads back exactly the
    original; never another exception, never other numbers.

    Left out: the global heap collection holding the variable-length strings, and the string
    variables' references into it. libhdf5 trusts both: on some damage there it loops forever
    (H5HG__cache_heap_deserialize, seen with HDF5 2.0.0) or allocates gigabytes before failing,
    before bayesfair gets the file. Their safe cases are checked in the tests next to this one.
    """
    raw = results.read_bytes()
    original = read_results(results)
    data, trusted = _layout(results)
    assert data and trusted

    def inside(lo, hi, ranges):
        return any(a <= lo and hi <= b for a, b in ranges)

    def touches(lo, hi, ranges):
        return any(lo < b and a < hi for a, b in ranges)

    width = 128  # windows side by side: every byte outside the left-out parts is damaged once
    flips = [(o, width) for o in range(0, len(raw), width)
             if not touches(o, o + width, trusted) and not inside(o, o + width, data)]
    with h5py.File(results) as f:  # and the first 8 bytes of every numeric variable's data
        flips += [(v.id.get_offset(), 8) for v in f.values()
                  if isinstance(v, h5py.Dataset) and v.id.get_storage_size() >= 8
                  and h5py.check_string_dtype(v.dtype) is None]
    outcomes = {"refused": 0, "unchanged": 0}
    damaged = results.with_name("damaged.nc")
    for offset, n in flips:
        damaged.write_bytes(raw)
        _flip(damaged, offset, n)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error")  # no legacy warning either
                back = read_results(damaged)
        except ResultsFileError:
            outcomes["refused"] += 1
        else:
            xr.testing.assert_identical(back, original)
            outcomes["unchanged"] += 1
    assert outcomes["refused"] > 0.8 * len(flips), outcomes


def test_damaged_attribute_text_is_refused(sim, results):
    """The attributes' strings live in the global heap: damage or an edit there is caught too."""
    raw = results.read_bytes()
    at = raw.find(b'"horizon": 40')
    assert at > 0
    edited = results.with_name("edited.nc")
    edited.write_bytes(raw[:at] + b'"horizon": 41' + raw[at + 13:])
    with pytest.raises(ResultsFileError, match="checksum mismatch"):
        read_results(edited)
    _flip(results, at, 13)
    with pytest.raises(ResultsFileError):
        read_results(results)


def test_damaged_signature_and_truncated_file(results, tmp_path):
    raw = results.read_bytes()
    _flip(results, 0, 8)
    with pytest.raises(ResultsFileError, match="not a netCDF-4/HDF5 file"):
        read_results(results)
    cut = tmp_path / "cut.nc"
    cut.write_bytes(raw[: len(raw) // 2])
    with pytest.raises(ResultsFileError, match=str(cut)):
        read_results(cut)


# ---------------------------------------------------------------------------------------------
# foreign, legacy and newer files


def test_foreign_netcdf_is_refused(tmp_path):
    path = tmp_path / "foreign.nc"
    xr.Dataset({"temperature": ("time", np.arange(3.0))}, coords={"time": [1, 2, 3]},
               attrs={"title": "weather"}).to_netcdf(path, engine="h5netcdf")
    with pytest.raises(ResultsFileError, match="not a bayesfair results file") as exc:
        read_results(path)
    assert "temperature" in str(exc.value) and "title" in str(exc.value) and str(path) in str(exc.value)
    assert read_results(path, verify=False)["temperature"].values.tolist() == [0.0, 1.0, 2.0]


def test_plain_text_empty_and_netcdf3_files_are_refused(tmp_path):
    text = tmp_path / "notes.nc"
    text.write_text("fairness_regret,exposure\n1,2\n")
    with pytest.raises(ResultsFileError, match="not a netCDF-4/HDF5 file") as exc:
        read_results(text)
    assert str(text) in str(exc.value)
    with pytest.raises(ResultsFileError, match="not a netCDF-4/HDF5 file"):
        read_results(text, verify=False)
    empty = tmp_path / "empty.nc"
    empty.write_bytes(b"")
    with pytest.raises(ResultsFileError, match="is empty"):
        read_results(empty)
    classic = tmp_path / "classic.nc"
    xr.Dataset({"x": ("a", np.arange(3.0))}).to_netcdf(classic, engine="scipy")
    with pytest.raises(ResultsFileError, match="netCDF-3"):
        read_results(classic)
    with pytest.raises(FileNotFoundError):
        read_results(tmp_path / "missing.nc")


def test_legacy_file_reads_with_a_warning(sim, tmp_path):
    """Rule: no bayesfair_schema, but checkpoint, fairness_regret, exposure and a versions attribute
    naming bayesfair -> refused unless allow_unverified=True (the opt-in), then read with a
    UserWarning that it cannot be verified."""
    legacy = tmp_path / "legacy.nc"
    sim.to_netcdf(legacy, engine="h5netcdf")  # how write_results wrote files before the checks
    with pytest.raises(ResultsFileError, match="cannot be verified.*allow_unverified=True.*--unverified"):
        read_results(legacy)
    with pytest.warns(UserWarning, match="written before integrity checks; cannot verify"):
        back = read_results(legacy, allow_unverified=True)
    _same_data(sim, back)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        read_results(legacy, verify=False)  # no checks, no warning
    # written again: now stamped and verified
    with pytest.warns(UserWarning):
        again = write_results(read_results(legacy, allow_unverified=True), tmp_path / "again.nc")
    assert int(read_results(again).attrs[SCHEMA]) == RESULTS_SCHEMA
    # without a versions attribute naming bayesfair, or without its variables: foreign
    for name, ds in [("noversions", sim.drop_attrs()),
                     ("otherversions", sim.assign_attrs(versions=json.dumps({"numpy": "2"}))),
                     ("novars", sim.drop_vars("fairness_regret"))]:
        path = tmp_path / f"{name}.nc"
        ds.to_netcdf(path, engine="h5netcdf")
        with pytest.raises(ResultsFileError, match="not a bayesfair results file"):
            read_results(path)
        with pytest.raises(ResultsFileError, match="not a bayesfair results file"):
            read_results(path, allow_unverified=True)  # the opt-in is for bayesfair's own files only


def _stamp_then(ds, path, **attrs):
    """Write ``ds`` as write_results would, then replace or drop (None) attributes."""
    write_results(ds, path)
    with h5py.File(path, "r+") as f:
        for k, v in attrs.items():
            if v is None:
                del f.attrs[k]
            else:
                f.attrs[k] = v
    return path


def test_newer_schema_and_missing_or_bad_stamps_are_refused(sim, tmp_path):
    newer = _stamp_then(sim, tmp_path / "newer.nc", bayesfair_schema=np.int64(RESULTS_SCHEMA + 1))
    with pytest.raises(ResultsFileError, match=f"schema {RESULTS_SCHEMA + 1}, newer than the schema "
                                               f"{RESULTS_SCHEMA}") as exc:
        read_results(newer)
    assert "upgrade bayesfair" in str(exc.value)
    no_sum = _stamp_then(sim, tmp_path / "nosum.nc", bayesfair_checksum=None)
    with pytest.raises(ResultsFileError, match="damaged: it has bayesfair_schema = 1 but no bayesfair_checksum"):
        read_results(no_sum)
    no_schema = _stamp_then(sim, tmp_path / "noschema.nc", bayesfair_schema=None)
    with pytest.raises(ResultsFileError, match="damaged: it has a bayesfair_checksum but no bayesfair_schema"):
        read_results(no_schema)
    odd = _stamp_then(sim, tmp_path / "odd.nc", bayesfair_schema="one")
    with pytest.raises(ResultsFileError, match="not an integer"):
        read_results(odd)
    md5 = _stamp_then(sim, tmp_path / "md5.nc", bayesfair_checksum="md5:abc")
    with pytest.raises(ResultsFileError, match="not 'sha256:<hex>'"):
        read_results(md5)
    edited = _stamp_then(sim, tmp_path / "edited.nc", created="2000-01-01T00:00:00+00:00")
    with pytest.raises(ResultsFileError, match="checksum mismatch"):
        read_results(edited)  # attributes are covered too


def test_datatree_is_written_as_it_is(tmp_path):
    tree = xr.DataTree.from_dict({"posterior": xr.Dataset({"mu": ("draw", np.arange(3.0))})})
    path = write_results(tree, tmp_path / "posterior.nc")
    back = xr.open_datatree(path, engine="h5netcdf")
    assert back["posterior"]["mu"].values.tolist() == [0.0, 1.0, 2.0] and SCHEMA not in back.attrs
    back.close()


# ---------------------------------------------------------------------------------------------
# the CLI


@pytest.mark.parametrize("command", ["report", "plot"])
def test_cli_on_a_damaged_file_exits_2_without_traceback(results, command, capsys):
    with h5py.File(results) as f:
        offset = f["group_exposure"].id.get_offset()
    _flip(results, offset)
    assert cli.main([command, str(results)]) == cli.EXIT_USAGE == 2
    captured = capsys.readouterr()
    assert "damaged: checksum mismatch" in captured.err and str(results) in captured.err
    assert "Traceback" not in captured.err + captured.out
    assert not list(results.parent.glob("*.png"))  # nothing was drawn from the damaged numbers


@pytest.mark.parametrize("command", ["report", "plot"])
def test_cli_on_foreign_and_text_files_exits_2(tmp_path, command, capsys):
    foreign = tmp_path / "foreign.nc"
    xr.Dataset({"temperature": ("time", np.arange(3.0))}).to_netcdf(foreign, engine="h5netcdf")
    text = tmp_path / "text" / "notes.nc"
    text.parent.mkdir()
    text.write_text("hello\n")
    for path, words in ((foreign, "not a bayesfair results file"), (text, "not a netCDF-4/HDF5 file")):
        assert cli.main([command, str(path)]) == 2
        captured = capsys.readouterr()
        assert words in captured.err and "Traceback" not in captured.err + captured.out
    assert io.ResultsFileError is ResultsFileError


@pytest.mark.parametrize("command", ["report", "plot"])
def test_stripped_integrity_attributes_are_an_error_unless_opted_in(sim, tmp_path, command, capsys):
    """Reported: a results file with bayesfair_schema and bayesfair_checksum stripped was read, and
    reported by `bayesfair report` with exit 0, with only a Python UserWarning."""
    stripped = _stamp_then(sim, tmp_path / "stripped.nc", bayesfair_schema=None, bayesfair_checksum=None)
    with pytest.raises(ResultsFileError, match="cannot be verified.*stripped.*allow_unverified=True") as exc:
        read_results(stripped)
    assert str(stripped) in str(exc.value)
    assert cli.main([command, str(stripped)]) == 2
    err = capsys.readouterr().err
    assert str(stripped) in err and "--unverified" in err and "Traceback" not in err
    assert not list(tmp_path.glob("*.png")) and not list(tmp_path.glob("*.md"))
    assert cli.main([command, str(stripped), "--unverified"]) == 0  # the explicit opt-in
    err = capsys.readouterr().err
    assert "bayesfair: warning:" in err and "cannot verify" in err
    assert list(tmp_path.glob("stripped.*.png"))
