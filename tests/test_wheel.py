"""The package as a user installs it: the wheel built from this tree, installed into a fresh venv
outside the checkout, runs the README's commands.

The wheel is built from a copy of the sources (pyproject.toml, README.md, LICENSE, bayesfair/) in a
temp folder, so no stale ``build/`` of the checkout can leak into it, with this venv's setuptools
(``--no-build-isolation --no-index``: no network). The fresh venv gets the wheel alone
(``pip install --no-deps --no-index``, before anything else is visible to it); then, to spare a
download of jax and the rest, a ``.pth`` line puts this venv's site-packages on its ``sys.path``.
A plain path line only appends the folder: the ``.pth`` files inside it, among them the editable
install's finder that maps ``bayesfair`` to the checkout, are not executed, and the fresh venv's
own site-packages comes first, so ``bayesfair`` is the installed wheel (asserted). Every command
runs with the working folder outside the checkout.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from pathlib import Path

import pytest

from bayesfair.workflow import shipped

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
# README commands this test does not run: `fit` runs a model recipe (NUTS on a data set, minutes)
NOT_RUN_HERE = {"fit"}


def _readme_commands() -> list[str]:
    """The `bayesfair ...` lines of the README's ``sh`` blocks, without comments."""
    blocks = re.findall(r"```sh\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    lines = [line.split("#")[0].strip() for block in blocks for line in block.splitlines()]
    return [line for line in lines if line.startswith("bayesfair")]


def _command_words(line: str) -> str:
    """``bayesfair configs export demo x`` -> ``configs export``; ``bayesfair --help`` -> ``--help``."""
    words = line.split()[1:]
    if not words:
        return ""
    return " ".join(words[:2]) if words[0] == "configs" else words[0]


def test_readme_links_and_images_work_outside_the_repository():
    """The README is the package's long description on PyPI, where relative links and images (to
    docs/, experiments/, models/) do not resolve: only absolute URLs and in-page anchors."""
    text = README.read_text(encoding="utf-8")
    relative = [t for t in re.findall(r"\]\(([^)\s]+)\)", text) if not re.match(r"(https?://|#)", t)]
    assert not relative, f"relative links in README.md: {relative}"
    assert not re.search(r"<img\s|<a\s+href=\"(?!https?://)", text)
    assert _readme_commands(), "the README shows no `bayesfair` command"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    pytest.importorskip("setuptools", reason="the test extra's setuptools builds the wheel offline")
    src = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(ROOT / name, src / name)
    shutil.copytree(ROOT / "bayesfair", src / "bayesfair", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    dist = tmp_path_factory.mktemp("dist")
    res = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                          "--quiet", "-w", str(dist), str(src)], capture_output=True, text=True, cwd=src)
    assert res.returncode == 0, res.stdout + res.stderr
    (whl,) = dist.glob("bayesfair-*.whl")
    return whl


def test_the_wheel_holds_the_license_the_configs_and_the_metadata(wheel):
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/METADATA"))
        assert f"{info}/licenses/LICENSE" in names
        licence = z.read(f"{info}/licenses/LICENSE").decode()
        meta = z.read(f"{info}/METADATA").decode()
        configs = sorted(Path(n).stem for n in names if n.startswith("bayesfair/data/configs/") and n.endswith(".toml"))
        for n in shipped.names():
            assert z.read(f"bayesfair/data/configs/{n}.toml") == shipped.config_path(n).read_bytes()
    assert licence == (ROOT / "LICENSE").read_text() and licence.startswith("MIT License")
    assert "Copyright (c) 2026 bayesfair developers" in licence
    assert "License-Expression: MIT" in meta and "License-File: LICENSE" in meta
    assert configs == shipped.names()
    with open(ROOT / "pyproject.toml", "rb") as f:
        project = tomllib.load(f)["project"]
    for url in project.get("urls", {}).values():  # only real addresses, never a placeholder
        assert url.startswith("https://") and "example" not in url and "TODO" not in url
    assert not [n for n in names if n.startswith(("tests/", "experiments/", "models/", "docs/"))]


def test_every_file_of_the_package_is_in_the_wheel(wheel):
    """Every file under bayesfair/ (modules and data: a file left out of package-data would be
    missing only from installed copies) is in the wheel, with the same bytes."""
    source = {p.relative_to(ROOT).as_posix(): p for p in (ROOT / "bayesfair").rglob("*")
              if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"}
    with zipfile.ZipFile(wheel) as z:
        packed = {n for n in z.namelist() if n.startswith("bayesfair/")}
        assert packed == set(source), f"missing: {sorted(set(source) - packed)}; extra: {sorted(packed - set(source))}"
        changed = [n for n in sorted(packed) if z.read(n) != source[n].read_bytes()]
    assert not changed, f"files whose wheel copy differs from the tree: {changed}"


@pytest.fixture(scope="module")
def fresh(wheel, tmp_path_factory):
    """A fresh venv outside the checkout with the wheel installed, and a runner for its commands."""
    home = tmp_path_factory.mktemp("user")
    venv = home / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    res = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index",
                          "--quiet", str(wheel)], capture_output=True, text=True, cwd=home)
    assert res.returncode == 0, res.stdout + res.stderr
    purelib = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                  capture_output=True, text=True, check=True).stdout.strip())
    ours = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (purelib / "zz_test_dependencies.pth").write_text("".join(f"{p}\n" for p in sorted(ours)))
    work = home / "work"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "BAYESFAIR_DATA", "BAYESFAIR_MODELS")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"

    def run(*args: str, code: int = 0) -> subprocess.CompletedProcess:
        res = subprocess.run(list(args), capture_output=True, text=True, cwd=work, env=env, timeout=300)
        assert res.returncode == code, f"{args}: exit {res.returncode}\n{res.stdout}\n{res.stderr}"
        return res

    return venv, purelib, work, run


def test_the_installed_package_is_the_wheel_not_the_checkout(fresh):
    venv, purelib, work, run = fresh
    res = run(str(venv / "bin" / "python"), "-c",
              "import bayesfair, importlib.metadata as m, json; "
              "print(json.dumps([bayesfair.__file__, m.version('bayesfair')]))")
    where, version = json.loads(res.stdout)
    assert Path(where).is_relative_to(purelib) and not Path(where).is_relative_to(ROOT)
    assert (purelib / "bayesfair" / "data" / "configs" / "demo.toml").is_file()
    assert not work.is_relative_to(ROOT)
    assert version == tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


def test_the_readme_commands_run_from_the_installed_package(fresh):
    """`bayesfair --help`, `list`, `demo`, `configs list`, `configs export`, `simulate` (an exported
    shipped config, and one by name), `plot` and `report`, as the README shows them, with small
    sizes; every `bayesfair` command of the README's shell blocks is one of them."""
    venv, purelib, work, run = fresh
    ran = set()

    def bayesfair(*args: str, code: int = 0) -> subprocess.CompletedProcess:
        ran.add(_command_words(" ".join(("bayesfair", *args))))
        return run(str(venv / "bin" / "bayesfair"), *args, code=code)

    out = bayesfair("--help").stdout
    for command in ("demo", "simulate", "configs", "plot", "report", "list"):
        assert command in out

    out = bayesfair("list").stdout
    assert "fairx_ts" in out and "datasets" in out and "docs/" not in out

    bayesfair("demo", "--runs", "2", "--horizon", "200", "--out", "demo-output", "--no-progress")
    for name in ("regret.png", "exposure.png", "demo.nc"):
        assert (work / "demo-output" / name).stat().st_size > 0

    out = bayesfair("configs", "list").stdout
    listed = [line.split()[0] for line in out.splitlines()[1:] if re.match(r"  \S", line)]
    assert listed == shipped.names() == sorted(p.stem for p in (purelib / "bayesfair/data/configs").glob("*.toml"))

    bayesfair("configs", "export", "demo", "my-studies")
    exported = work / "my-studies" / "demo.toml"
    assert exported.read_bytes() == shipped.config_path("demo").read_bytes()
    exported.write_text(exported.read_text() + "\n# edited\n")
    assert "--force" in bayesfair("configs", "export", "demo", "my-studies", code=2).stderr
    assert exported.read_text().endswith("# edited\n")

    bayesfair("simulate", "my-studies/demo.toml", "--set", "runs=2", "--set", "horizon=200", "--out", "results/demo",
              "--quiet")
    assert (work / "results" / "demo" / "demo.nc").stat().st_size > 0
    res = bayesfair("simulate", "bilevel", "--dry-run")
    assert "study bilevel:" in res.stdout and str(purelib / "bayesfair/data/configs/bilevel.toml") in res.stderr

    bayesfair("plot", "results/demo")
    bayesfair("report", "results/demo")
    assert (work / "results" / "demo" / "demo.report.html").stat().st_size > 0

    # the model recipes ship in the package: listed and runnable with no models/ folder about
    listed = bayesfair("fit", "--list").stdout
    assert all(r in listed for r in ("compas_group_bias", "family_income_group_bias", "adult_group_bias")), listed
    assert "--rows" in bayesfair("fit", "compas_group_bias", "--help").stdout

    shown = {_command_words(line) for line in _readme_commands()}
    assert shown - NOT_RUN_HERE <= ran, f"README commands this test does not run: {shown - NOT_RUN_HERE - ran}"
