"""Every writer of gcexplore against the same attacks (issue 46): a symlink planted at its target
(the link is replaced, its target never written), a dangling symlink (nothing created outside the
folder), and the umask (077 leaves 0600, 022 leaves 0644). Writers are listed once, in WRITERS; a
source scan checks that no module writes a file except through results/files.py or a writer here."""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest

import _synthetic as S

ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(ROOT), str(HERE), os.environ.get("PYTHONPATH"))))}


def _figure():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1])
    return fig


def _save(suffix):
    def write(path):
        from gcexplore.results.io import save

        save(S.sweep_df(splits=[8]), path)
    return write, suffix


def _trace(path):
    from gcexplore.results.chrome_trace import to_chrome_trace

    to_chrome_trace(S.sweep_df(splits=[8]), path)


def _figure_writer(path):
    from gcexplore.results.files import write_figure

    write_figure(_figure(), path)


def _checkpoint(path):
    from gcexplore.experiments.runner import Checkpoint

    c = Checkpoint(path, {"kind": "x"})
    assert c.load() == {}
    c.append("8", [{"a": 1}])


def _campaign_spec(path):
    from gcexplore.campaigns.store import CampaignFolder

    CampaignFolder(path.parent).write_spec("camp", {"k1": {"key": "k1"}}, "0")


def _failure(path):
    from gcexplore.campaigns.store import CampaignFolder

    CampaignFolder(path.parent.parent).write_failure(path.stem, {"error": "x"})


#: (name, write(path), the target's name inside the folder)
WRITERS = [
    ("save parquet", _save(".parquet")[0], "r.parquet"),
    ("save csv", _save(".csv")[0], "r.csv"),
    ("chrome trace", _trace, "t.json"),
    ("figure png", _figure_writer, "f.png"),
    ("figure svg", _figure_writer, "f.svg"),
    ("checkpoint", _checkpoint, "c.jsonl"),
    ("campaign.json", _campaign_spec, "campaign.json"),
    ("failure record", _failure, "failed/k1.json"),
]
IDS = [w[0] for w in WRITERS]


@pytest.mark.parametrize("name,write,target", WRITERS, ids=IDS)
def test_a_planted_symlink_is_replaced_never_written_through(tmp_path, name, write, target):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    victim.chmod(0o640)
    path = tmp_path / "out" / target
    path.parent.mkdir(parents=True)
    path.symlink_to(victim)
    refused = _write_or_refuse(write, path)
    assert victim.read_text() == "precious", f"{name} wrote through a planted symlink"
    assert stat.S_IMODE(victim.stat().st_mode) == 0o640, f"{name} changed the link target's mode"
    assert refused or (path.is_file() and not path.is_symlink()), f"{name} left the link in place"


def _write_or_refuse(write, path) -> bool:
    """Write; True when the writer refused the link instead (an error naming it), which is fine too."""
    try:
        write(path)
    except (ValueError, OSError) as e:
        assert "symlink" in str(e), e
        return True
    return False


@pytest.mark.parametrize("name,write,target", WRITERS, ids=IDS)
def test_a_dangling_symlink_creates_nothing_outside_the_folder(tmp_path, name, write, target):
    outside = tmp_path / "elsewhere" / "planted"
    outside.parent.mkdir()
    path = tmp_path / "out" / target
    path.parent.mkdir(parents=True)
    path.symlink_to(outside)
    refused = _write_or_refuse(write, path)
    assert not outside.exists(), f"{name} created a file through a dangling symlink"
    assert refused or (path.is_file() and not path.is_symlink())


@pytest.mark.parametrize("umask,mode", [(0o077, 0o600), (0o022, 0o644), (0o027, 0o640)])
@pytest.mark.parametrize("name,write,target", WRITERS, ids=IDS)
def test_new_files_honour_the_umask(tmp_path, name, write, target, umask, mode):
    path = tmp_path / "out" / target
    path.parent.mkdir(parents=True)
    old = os.umask(umask)
    try:
        write(path)
    finally:
        os.umask(old)
    made = [p for p in path.parent.iterdir() if p.is_file()]
    assert made and {p.name: stat.S_IMODE(p.stat().st_mode) for p in made} == {p.name: mode for p in made}, name


def _cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "gcexplore", *args], capture_output=True, text=True, cwd=cwd,
                          env=ENV, timeout=300)


@pytest.mark.parametrize("suffix", [".png", ".svg"])
def test_compare_plot_replaces_a_planted_link(tmp_path, suffix):
    from gcexplore.results.synthetic import sweep

    import gcexplore as gx

    victim, dangling = tmp_path / "notes.txt", tmp_path / "elsewhere" / "made"
    victim.write_text("the user's notes")
    dangling.parent.mkdir()
    gx.save(sweep(1), tmp_path / "a.parquet")
    gx.save(sweep(2), tmp_path / "b.parquet")
    for name, to in (("fig", victim), ("dangling", dangling)):
        (tmp_path / f"{name}{suffix}").symlink_to(to)
        r = _cli("compare", "a.parquet", "b.parquet", "--plot", f"{name}{suffix}", cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        assert not (tmp_path / f"{name}{suffix}").is_symlink()
    assert victim.read_text() == "the user's notes" and not dangling.exists()


def test_demo_overwrite_replaces_planted_links_and_a_dangling_one_makes_nothing_outside(tmp_path):
    victim, dangling = tmp_path / "notes.txt", tmp_path / "elsewhere" / "made.png"
    victim.write_text("the user's notes")
    dangling.parent.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    names = ("sweep.png", "throughput.png", "scaling.png", "isolation.png", "sweep.parquet")
    for n in names[:-1]:
        (out / n).symlink_to(victim)
    (out / "occupancy.png").symlink_to(dangling)
    (out / names[-1]).symlink_to(victim)
    r = _cli("demo", "--recorded", "--out", "out", "--overwrite", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert victim.read_text() == "the user's notes" and not dangling.exists()
    assert not [p.name for p in out.iterdir() if p.is_symlink()]
    # without --overwrite, a dangling link is a name taken: the run writes beside it, not through it
    (out / "sweep.png").unlink()
    (out / "sweep.png").symlink_to(dangling)
    r = _cli("demo", "--recorded", "--out", "out", cwd=tmp_path)
    assert r.returncode == 0 and (out / "sweep-2.png").is_file() and not dangling.exists(), r.stderr


#: Places that write files without results/files.py, each with its reason.
_ALLOWED = {
    "gcexplore/results/files.py": "the writer itself",
    "gcexplore/views/_style.py": "a PNG into a BytesIO (no file)",
    "gcexplore/explorers/_base.py": "a PNG into a BytesIO (no file)",
    "gcexplore/cli/commands.py": "os.devnull over a closed stdout pipe",
    "gcexplore/experiments/_pm_child.py": "the PM child's error.json in its own private temporary folder",
    "gcexplore/experiments/pm.py": "the PM child's spec.json in its own private temporary folder",
    "gcexplore/campaigns/_fork_preload.py": "a lock opened read-write, never created",
}
_WRITES = re.compile(r"\.savefig\(|\.write_text\(|\.write_bytes\(|\bopen\([^)]*[\"'][wax]b?\+?[\"']|os\.open\(|"
                     r"\.to_parquet\(|\.to_csv\([^)]|pq\.write_table\(|json\.dump\(|os\.replace\(|mkstemp\(")
#: What makes a write safe: the files module's helpers, or an open that never follows a link.
_GATED = ("atomic_write", "temp_beside", "write_figure", "new_file_mode", "O_NOFOLLOW", "O_EXCL")


def test_every_writer_goes_through_the_files_module():
    """A writer outside results/files.py either uses its helpers in the same function or is listed."""
    bad = []
    for path in sorted((ROOT / "gcexplore").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel in _ALLOWED:
            continue
        text = path.read_text()
        for m in _WRITES.finditer(text):
            eol = text.find("\n", m.end())
            if "# files:" in text[m.start():eol]:  # a justified exception, said on its line
                continue
            start = text.rfind("\ndef ", 0, m.start())
            start = max(start, text.rfind("\n    def ", 0, m.start()))
            end = text.find("\ndef ", m.end())
            body = text[start:end if end > 0 else len(text)]
            if not any(g in body for g in _GATED):
                line = text.count("\n", 0, m.start()) + 1
                bad.append(f"{rel}:{line}: {m.group(0)}")
    assert not bad, "writers that bypass results/files.py:\n" + "\n".join(bad)


# ------------------------------------------------------------------ the campaign lock


@pytest.mark.parametrize("plant", ["hardlink", "symlink", "dangling"])
def test_a_planted_campaign_lock_is_refused_never_truncated(tmp_path, plant):
    from gcexplore.campaigns.store import CampaignFolder, NotRegular

    victim, outside = tmp_path / "notes.txt", tmp_path / "elsewhere"
    victim.write_text("the user's notes")
    folder = tmp_path / "c"
    folder.mkdir()
    lock = folder / "campaign.lock"
    {"hardlink": lambda: os.link(victim, lock), "symlink": lambda: lock.symlink_to(victim),
     "dangling": lambda: lock.symlink_to(outside)}[plant]()
    with pytest.raises(NotRegular, match="hard links|symlink"):
        CampaignFolder(folder).lock()
    assert victim.read_text() == "the user's notes" and not outside.exists()


def test_the_campaign_lock_is_made_exclusively_with_the_umask_and_a_stale_one_is_taken(tmp_path):
    from gcexplore.campaigns.store import CampaignFolder

    folder = tmp_path / "c"
    old = os.umask(0o077)
    try:
        held = CampaignFolder(folder).lock()
    finally:
        os.umask(old)
    lock = folder / "campaign.lock"
    assert stat.S_IMODE(lock.stat().st_mode) == 0o600 and f"pid {os.getpid()}" in lock.read_text()
    with pytest.raises(RuntimeError, match="in use by pid"):
        CampaignFolder(folder).lock()
    held.release()
    assert not lock.exists()  # removed at release: the next campaign creates it afresh
    lock.write_text("pid 999999 on gone since then\n")  # a killed campaign's, held by no one
    again = CampaignFolder(folder).lock()
    assert f"pid {os.getpid()}" in lock.read_text()
    again.release()


@pytest.mark.parametrize("plant", ["user parquet", "symlink", "text"])
def test_comm_refuses_to_replace_a_trace_name_it_did_not_write(tmp_path, plant):
    """``gcexplore comm --out r.parquet`` writes r-trace.parquet too: a file of that name it did not
    save is named before anything is measured (no GPU needed to reach the check), never replaced."""
    import pandas as pd

    victim = tmp_path / "notes.txt"
    victim.write_text("the user's notes")
    trace = tmp_path / "r-trace.parquet"
    if plant == "user parquet":
        pd.DataFrame({"x": [1, 2]}).to_parquet(trace)
    elif plant == "symlink":
        trace.symlink_to(victim)
    else:
        trace.write_text("the user's notes")
    before = trace.read_bytes()
    r = _cli("comm", "--out", "r.parquet", cwd=tmp_path)
    assert r.returncode == 2 and "r-trace.parquet" in r.stderr and "not a result gcexplore saved" in r.stderr, r.stderr
    assert trace.read_bytes() == before and victim.read_text() == "the user's notes"
    r = _cli("comm", "--out", "r.parquet", "--no-trace", cwd=tmp_path)
    assert "not a result gcexplore saved" not in r.stderr  # --no-trace writes no trace: nothing to refuse
