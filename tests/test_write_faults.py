"""Writes that fail, writers that collide, writes that were cut short: each reproduction of the
reliability issue on progress and saved state, one regression test each.

- a second process writing the same study (name) into the same folder is refused at once, with the
  lock file and the owner's PID; studies of other names share the folder;
- temp files a killed process left (``.name.nc.XXXXXXXX.nc``) are removed at the study's next start
  and named;
- a full disk or a read-only folder at any write: exit 1, the file, the free space and the progress
  kept; ``--resume`` continues from it; never a segmentation fault (the real fault, RLIMIT_FSIZE);
- ``<name>.nc`` being a directory, or too little free space, is refused before the first round.
"""

import errno
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
from test_reliability import TINY, _config, _simulate  # the same tiny study and CLI call

from bayesfair.core import _atomic
from bayesfair.simulation import results as io
from bayesfair.workflow import outputs


def _same_numbers(a, b):
    assert set(a.data_vars) == set(b.data_vars)
    for v in a.data_vars:
        if v != "seconds":
            np.testing.assert_array_equal(a[v].values, b[v].values, err_msg=v)


@pytest.fixture
def no_simulation(monkeypatch):
    """Fail the test if a study plays a round (for refusals that must come before the first one)."""
    def refuse(*args, **kwargs):
        raise AssertionError("the study was simulated before the output folder was checked")

    monkeypatch.setattr(sys.modules["bayesfair.workflow.study"], "simulate", refuse)  # what Study.run calls


# ---------------------------------------------------------------------------------------------
# one writer per study


def test_a_second_writer_of_the_same_study_is_refused_at_once(tmp_path, capsys):
    """Reported: two processes running different studies of one name into one folder both passed the
    pre-flight and both exited 0 ('wrote out/base.nc'); the file held only one of them."""
    out = tmp_path / "out"
    long = TINY.replace("runs = 2", "runs = 64").replace("horizon = 40", "horizon = 3000000") \
               .replace("chunk_size = 16", "chunk_size = 2048").replace("checkpoints = [1, 20, 40]", "checkpoints = 10")
    cmd = [sys.executable, "-m", "bayesfair", "simulate", str(_config(tmp_path, long, "long.toml")), "--out", str(out),
           "-q"]
    first = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 240
        while not (out / "tiny.resume.npz").exists() and time.time() < deadline and first.poll() is None:
            time.sleep(0.1)  # running: past its pre-flight, one chunk saved
        assert first.poll() is None, first.communicate()
        other_settings = _config(tmp_path, TINY.replace("seed = 3", "seed = 4"), "second.toml")
        assert _simulate(other_settings, "--out", out, "-q", "--restart") == 2
        err = capsys.readouterr().err
        assert f"another process (PID {first.pid} on " in err and str(out / ".tiny.lock") in err, err
        assert "--out" in err
        # a study of another name shares the folder
        assert _simulate(_config(tmp_path, TINY.replace('name = "tiny"', 'name = "other"'), "other.toml"),
                         "--out", out, "-q") == 0
        assert io.read_results(out / "other.nc").sizes["run"] == 2
    finally:
        first.kill()  # SIGKILL: the lock must not outlive its process
        first.communicate(timeout=60)
    assert _simulate(other_settings, "--out", out, "-q", "--restart") == 0
    assert json.loads(io.read_results(out / "tiny.nc").attrs["config"])["study"]["seed"] == 4
    assert not (out / ".tiny.lock.pid").exists()


def test_the_lock_names_the_owner_and_is_released(tmp_path):
    with outputs.study_lock(tmp_path, "s"):
        owner = json.loads((tmp_path / ".s.lock.pid").read_text())
        assert owner["pid"] == os.getpid()
        with pytest.raises(outputs.OutputError, match=rf"another process \(PID {os.getpid()} on .*\.s\.lock"):
            with outputs.study_lock(tmp_path, "s"):
                pass
        with outputs.study_lock(tmp_path, "t"):  # another study in the same folder
            pass
    with outputs.study_lock(tmp_path, "s"):  # released
        pass


# ---------------------------------------------------------------------------------------------
# temp files of interrupted writes


def test_temp_files_of_a_killed_write_are_removed_at_the_next_start_and_named(tmp_path, capsys):
    """Reported: a SIGKILL during a resume-file save or the final results write left hidden temp
    files (.name.resume.npz.XXXX.npz, a 9 MB .big.nc.XXXX.nc) in the output folder for good."""
    out = tmp_path / "out"
    out.mkdir()
    left = [_atomic.atomic_temp(out / name) for name in ("tiny.nc", "tiny.resume.npz", "tiny.log.csv")]
    for path in left:  # what a killed write leaves: the temp file as atomic_write names it, part-written
        with open(path, "wb") as f:
            f.write(b"\x89HDF part of a file" * 1000)
    others = [_atomic.atomic_temp(out / "other.nc"), out / ".tiny.nc.notatemp", out / ".tiny.x.nc.abcdefgh.nc"]
    for path in others[1:]:
        path.write_bytes(b"not this study's temp file")
    assert _simulate(_config(tmp_path), "--out", out) == 0
    err = capsys.readouterr().err
    for path in left:
        assert not os.path.exists(path)
        assert sum(f"removed {path} (" in line and "left by an interrupted write" in line
                   for line in err.splitlines()) == 1, err
    assert all(os.path.exists(p) for p in others)  # another study's, or not a temp file
    assert _atomic.leftover_temps(out / "tiny.nc") == []


# ---------------------------------------------------------------------------------------------
# full disk, read-only folder


def _enospc(path, data):  # part of the file, then the disk is full
    with open(path, "wb") as f:
        f.write(bytes(data)[: len(data) // 2])
    raise OSError(errno.ENOSPC, "No space left on device")


def test_a_full_disk_at_the_results_write_exits_1_naming_file_and_space_and_resume_finishes(tmp_path, capsys,
                                                                                              monkeypatch):
    """Reported: disk full at the final results write: 'failed: OSError: [Errno 28] Can't close file'
    and then Segmentation fault, exit 139."""
    out, ref = tmp_path / "out", tmp_path / "ref"
    cfg = _config(tmp_path)
    monkeypatch.setattr(io, "_write_bytes", _enospc)
    assert _simulate(cfg, "--out", out, "-q") == 1
    monkeypatch.undo()
    err = capsys.readouterr().err
    assert f"cannot write {out / 'tiny.nc'}: No space left on device after " in err
    assert " free of " in err and f"the last saved progress is kept in {out / 'tiny.resume.npz'}" in err
    assert "EG: 40 of 40 rounds" in err and "--resume" in err and "Traceback" not in err
    assert sorted(p.name for p in out.iterdir()) == [".tiny.lock", "tiny.resume.npz"]  # no temp file
    assert _simulate(cfg, "--out", out, "-q", "--resume") == 0
    assert _simulate(cfg, "--out", ref, "-q") == 0
    _same_numbers(io.read_results(out / "tiny.nc"), io.read_results(ref / "tiny.nc"))


def test_a_full_disk_at_a_resume_save_keeps_the_last_one_and_resume_continues_from_it(tmp_path, capsys, monkeypatch):
    """Reported: full disk with --save-every-chunks 1: --resume afterwards started over; the message
    named no file or free space."""
    out, ref = tmp_path / "out", tmp_path / "ref"
    cfg = _config(tmp_path)
    saves, real_savez = [], np.savez

    def savez(f, **arrays):
        saves.append(1)
        if len(saves) == 2:  # the second save: the disk is full
            f.write(b"PK part of a zip")
            raise OSError(errno.ENOSPC, "No space left on device")
        real_savez(f, **arrays)

    monkeypatch.setattr(np, "savez", savez)
    assert _simulate(cfg, "--out", out, "-q", "--save-every-chunks", "1") == 1
    monkeypatch.undo()
    err = capsys.readouterr().err
    resume = out / "tiny.resume.npz"
    assert f"cannot write {resume}: No space left on device" in err and " free of " in err
    assert f"the last saved progress is kept in {resume}" in err and "EG: 16 of 40 rounds" in err
    capsys.readouterr()
    assert _simulate(cfg, "--out", out, "--resume") == 0
    assert f"resuming from {resume}" in capsys.readouterr().err
    assert _simulate(cfg, "--out", ref, "-q") == 0
    _same_numbers(io.read_results(out / "tiny.nc"), io.read_results(ref / "tiny.nc"))


def test_a_folder_that_becomes_read_only_mid_run_exits_1_naming_the_file(tmp_path, capsys, monkeypatch):
    """Reported: output folder remounted read-only mid-run: the first save failed ~30 s in, and the
    error named nothing. (The folder passes the pre-flight; every write after it fails.)"""
    out = tmp_path / "out"

    def read_only(path):
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(_atomic, "atomic_temp", read_only)
    assert _simulate(_config(tmp_path), "--out", out, "-q") == 1
    err = capsys.readouterr().err
    assert f"cannot write {out / 'tiny.resume.npz'}: Read-only file system" in err and " free of " in err
    assert "no progress was saved" in err and "Traceback" not in err
    monkeypatch.undo()
    # --resume with nothing saved says so, instead of starting over without a word
    assert _simulate(_config(tmp_path), "--out", out, "--resume") == 0
    assert f"no saved progress in {out / 'tiny.resume.npz'}: starting from the first round" in capsys.readouterr().err


def test_the_real_disk_fault_is_an_error_not_a_segfault(tmp_path):
    """The real fault, not a stand-in: writes past RLIMIT_FSIZE fail with EFBIG in the kernel, as
    they fail with ENOSPC on a full disk (no root needed). HDF5 writing the results file itself
    crashed here (exit 139): its close failed, and h5netcdf closed the file again when collected."""
    pytest.importorskip("resource")
    if not hasattr(signal, "SIGXFSZ"):
        pytest.skip("no SIGXFSZ on this platform")
    script = textwrap.dedent(f"""
        import gc, resource, signal
        import numpy as np, xarray as xr
        from bayesfair.simulation.results import write_results
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write fails with EFBIG instead of killing us
        data = np.random.default_rng(0).random((2, 50, 10_000))  # 8 MB
        ds = xr.Dataset({{"fairness_regret": (("policy", "run", "checkpoint"), data)}})
        resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, resource.RLIM_INFINITY))
        try:
            write_results(ds, {str(tmp_path / "big.nc")!r})
        except OSError as exc:
            print("error:", exc, flush=True)
        gc.collect()
        print("exited cleanly", flush=True)
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, (proc.returncode, proc.stdout, proc.stderr[-2000:])
    assert f"error: cannot write {tmp_path / 'big.nc'}: File too large after 1.0 MiB of it" in proc.stdout
    assert "exited cleanly" in proc.stdout and "Exception ignored" not in proc.stderr
    assert os.listdir(tmp_path) == []  # no temp file, no partial file


# ---------------------------------------------------------------------------------------------
# refused before the first round


def test_results_path_that_is_a_directory_is_refused_before_the_run_even_with_overwrite(tmp_path, capsys,
                                                                                          no_simulation):
    """Reported: <name>.nc a directory and --overwrite: the whole study ran, then IsADirectoryError at
    the final write."""
    out = tmp_path / "out"
    (out / "tiny.nc").mkdir(parents=True)
    (out / "tiny.nc" / "keep.txt").write_text("a user's file")
    for flags in ([], ["--overwrite"]):
        assert _simulate(_config(tmp_path), "--out", out, "-q", *flags) == 2
        err = capsys.readouterr().err
        assert f"{out / 'tiny.nc'} is a directory" in err and "even with --overwrite" in err
    assert (out / "tiny.nc" / "keep.txt").read_text() == "a user's file"
    (out / "tiny.nc" / "keep.txt").unlink()
    (out / "tiny.nc").rmdir()
    (out / "tiny.log.csv").mkdir()  # the per-round log's place, with --log
    assert _simulate(_config(tmp_path), "--out", out, "-q", "--log") == 2
    assert f"{out / 'tiny.log.csv'} is a directory" in capsys.readouterr().err


def test_too_little_free_space_for_the_first_save_is_refused_before_the_run(tmp_path, capsys, monkeypatch,
                                                                            no_simulation):
    real = outputs.shutil.disk_usage

    def nearly_full(path):
        return real(path)._replace(free=100)

    monkeypatch.setattr(outputs.shutil, "disk_usage", nearly_full)
    out = tmp_path / "out"
    assert _simulate(_config(tmp_path), "--out", out, "-q") == 2
    err = capsys.readouterr().err
    assert f"{out} has 100 B free, but the first save of the study's progress needs about " in err
