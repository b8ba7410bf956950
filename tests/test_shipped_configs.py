"""The study configs shipped with the package: `bayesfair configs list/export/path` and how
`bayesfair simulate NAME` tells a shipped config from a file."""

import json
import os
import tomllib
from pathlib import Path

import pytest

from bayesfair.workflow import cli, shipped
from bayesfair.workflow.config import ConfigError


def test_names_are_the_shipped_files_and_each_has_a_description():
    files = sorted(p.stem for p in shipped.config_dir().glob("*.toml"))
    assert shipped.names() == files and "demo" in files and len(files) >= 10
    for name in files:
        with open(shipped.config_path(name), "rb") as f:
            raw = tomllib.load(f)
        assert raw.get("name", name) == name, f"{name}.toml names its study {raw.get('name')!r}"
        text = shipped.description(name)
        assert text and "\n" not in text and len(text) <= 160, f"{name}: one line of description, got {text!r}"


@pytest.mark.parametrize("bad", ["nope", "../configs/demo", "demo.toml", "", "configs/demo"])
def test_an_unknown_name_lists_the_shipped_ones(bad):
    with pytest.raises(ConfigError, match="no shipped config.*bilevel.*demo"):
        shipped.config_path(bad)


def test_configs_list_prints_every_name_with_its_description(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    assert cli.main(["configs", "list"]) == 0
    out = capsys.readouterr().out
    flat = " ".join(out.split())
    listed = [line.split()[0] for line in out.splitlines()[1:] if line.startswith("  ") and not line.startswith("   ")]
    assert listed == shipped.names()
    for name in shipped.names():
        assert f"{name} {shipped.description(name)}" in flat, name
    assert cli.main(["configs", "list", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["name"] for r in rows] == shipped.names()
    assert all(os.path.isfile(r["path"]) for r in rows)
    assert cli.main(["configs", "path", "bilevel"]) == 0
    assert capsys.readouterr().out.strip() == str(shipped.config_path("bilevel"))


def test_export_writes_a_copy_and_replaces_a_different_file_only_with_force(tmp_path, capsys):
    target = tmp_path / "new" / "folder" / "bilevel.toml"
    assert cli.main(["configs", "export", "bilevel", str(target.parent)]) == 0
    assert target.read_bytes() == shipped.config_path("bilevel").read_bytes()
    assert f"wrote {target}" in capsys.readouterr().out
    assert cli.main(["configs", "export", "bilevel", str(target.parent)]) == 0  # the same bytes: left alone
    assert "already the shipped config" in capsys.readouterr().out
    target.write_text("# my edits\n")
    assert cli.main(["configs", "export", "bilevel", str(target.parent)]) == 2
    err = capsys.readouterr().err
    assert str(target) in err and "--force" in err
    assert target.read_text() == "# my edits\n"  # refused: untouched
    assert cli.main(["configs", "export", "bilevel", str(target.parent), "--force"]) == 0
    assert target.read_bytes() == shipped.config_path("bilevel").read_bytes()
    assert "replaced" in capsys.readouterr().out
    assert sorted(p.name for p in target.parent.iterdir()) == ["bilevel.toml"]  # no temp file left
    (tmp_path / "dir" / "demo.toml").mkdir(parents=True)
    with pytest.raises(shipped.ExistsError, match="is a folder"):
        shipped.export_config("demo", tmp_path / "dir", force=True)
    assert cli.main(["configs", "export", "nope", str(tmp_path)]) == 2
    (tmp_path / "afile").write_text("")
    assert cli.main(["configs", "export", "demo", str(tmp_path / "afile")]) == 2  # DIR is a file: bad input
    assert "is a file, not a folder" in capsys.readouterr().err


def test_an_exported_config_loads_as_the_shipped_one(tmp_path):
    from bayesfair.workflow.config import load_config

    def configs(path):
        obj = load_config(path, ["runs=2", "horizon=50"])
        return obj.name, json.dumps([p.config for p in getattr(obj, "points", [obj])], default=str)

    for name in ("demo", "bilevel_beta_sweep"):
        exported = shipped.export_config(name, tmp_path)
        assert configs(exported) == configs(shipped.config_path(name)) and configs(exported)[0] == name


def test_simulate_reads_a_bare_name_as_the_shipped_config_and_a_path_as_a_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    demo = shipped.config_path("demo")
    assert shipped.resolve_config("demo") == (demo, True)
    exported = shipped.export_config("demo", tmp_path)  # ./demo.toml, the same bytes: no ambiguity
    assert shipped.resolve_config("demo") == (demo, True)
    assert shipped.resolve_config("demo.toml") == (exported.relative_to(tmp_path), False)
    assert shipped.resolve_config("./demo.toml") == (exported.relative_to(tmp_path), False)
    exported.write_text(exported.read_text().replace("seed = 0", "seed = 5"))  # edited: the bare name is ambiguous
    with pytest.raises(ConfigError, match=r"names the shipped config demo and also the file demo.toml.*\./demo.toml"):
        shipped.resolve_config("demo")
    assert shipped.resolve_config("./demo.toml") == (exported.relative_to(tmp_path), False)
    exported.unlink()
    (tmp_path / "demo").write_text("seed = 1\n")  # a file called demo, without the suffix
    with pytest.raises(ConfigError, match="also the file demo here"):
        shipped.resolve_config("demo")
    (tmp_path / "demo").unlink()
    (tmp_path / "mine").write_text("runs = 1\n")  # a bare word no shipped config has: a file
    assert shipped.resolve_config("mine") == (Path("mine"), False)
    with pytest.raises(ConfigError, match="runs as `bayesfair simulate demo`"):
        shipped.resolve_config("demo.toml")  # the path is gone; the hint names the shipped one
    with pytest.raises(ConfigError, match="no shipped config of that name"):
        shipped.resolve_config("nothing")


def test_simulate_by_name_says_which_file_it_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["simulate", "demo", "--dry-run", "--set", "runs=2"]) == 0
    cap = capsys.readouterr()
    assert f"the shipped config demo ({shipped.config_path('demo')})" in cap.err
    assert "study demo: 2 runs" in cap.out
    shipped.export_config("demo", tmp_path)
    (tmp_path / "demo.toml").write_text((tmp_path / "demo.toml").read_text().replace("runs = 20", "runs = 7"))
    assert cli.main(["simulate", "demo", "--dry-run"]) == 2
    assert "also the file demo.toml" in capsys.readouterr().err
    assert cli.main(["simulate", "./demo.toml", "--dry-run"]) == 0
    cap = capsys.readouterr()
    assert "study demo: 7 runs" in cap.out and "shipped" not in cap.err
