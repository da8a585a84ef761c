"""gcexplore installs beside the CUDA libraries PyTorch and CuPy pin (pip's resolver, needs PyPI).

Each case resolves the project together with a framework's CUDA requirements, given as
requirements (read from the framework's metadata on PyPI, so no framework wheel is
downloaded), and checks that resolution succeeds and that every one of those requirements
is met by what pip would install: gcexplore leaves the framework's choice alone. A new
framework release that moves a pin shows up here as a failure. Skipped, with the reason,
only where PyPI cannot be reached.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

packaging = pytest.importorskip("packaging.requirements")
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
INDEX = os.environ.get("PIP_INDEX_URL", "https://pypi.org/simple").rstrip("/")
#: The frameworks whose CUDA requirements are checked: a fixed release and the newest of each.
FRAMEWORKS = {"old": ["torch==2.14.*", "cupy-cuda13x==13.*"],
              "new": ["torch", "cupy-cuda13x", "cupy-cuda12x", "cupti-python", "nvidia-cuda-cupti"]}
#: CuPy's CUDA libraries come with its "ctk" extra (CuPy 14+).
EXTRAS = {"cupy-cuda13x": "ctk", "cupy-cuda12x": "ctk"}

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="the frameworks' CUDA pins apply on Linux (their markers)")


def _pip_env() -> dict:
    """pip as on a fresh machine: no local config, find-links or constraints; the index kept."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("PIP_") or k in ("PIP_INDEX_URL", "PIP_CERT", "PIP_TRUSTED_HOST", "PIP_DEFAULT_TIMEOUT")}
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1")
    return env


def _reachable() -> str:
    """'' where the package index answers; else why not."""
    req = urllib.request.Request(f"{INDEX}/pip/", headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return "" if r.status == 200 else f"{INDEX} answered HTTP {r.status}"
    except OSError as e:
        return f"{INDEX} cannot be reached ({type(e).__name__}: {e})"


def _pip(*args: str) -> tuple[int, dict, str]:
    p = subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True, text=True, env=_pip_env(),
                       timeout=240, check=False)
    report = json.loads(p.stdout) if p.returncode == 0 and p.stdout.strip().startswith("{") else {}
    return p.returncode, report, p.stderr[-2000:]


def _dry_run(*reqs: str, deps: bool = True) -> tuple[int, dict, str]:
    return _pip("install", "--dry-run", "--ignore-installed", "--quiet", "--report", "-",
                *([] if deps else ["--no-deps"]), *reqs)


def _cuda_requirements(meta: dict) -> list[str]:
    """The CUDA requirements in a framework's metadata that apply here (markers evaluated)."""
    name = meta["name"].lower()
    out = []
    for text in meta.get("requires_dist") or []:
        r = Requirement(text)
        if not (r.name.startswith(("cuda-", "nvidia-cuda", "cupti")) or r.name == "numpy"):
            continue
        if r.marker is not None and not r.marker.evaluate({"extra": EXTRAS.get(name, "")}):
            continue
        out.append(f"{r.name}{'[' + ','.join(sorted(r.extras)) + ']' if r.extras else ''}{r.specifier}")
    return out


#: Which frameworks share one resolve (a user with both; three resolves keep the test short).
GROUPS = (("old", "torch"), ("old", "cupy-cuda13x")), (("new", "torch"), ("new", "cupy-cuda13x")), (
    ("new", "cupy-cuda12x"), ("new", "cupti-python"), ("new", "nvidia-cuda-cupti"))


def _framework_requirements(report: dict) -> dict[str, tuple[str, list[str]]]:
    """name -> ("name version", the requirements gcexplore must leave alone)."""
    out = {}
    for item in report["install"]:
        m = item["metadata"]
        name = m["name"].lower()
        pinned = [f"{name}=={m['version']}"] if name in ("cupti-python", "nvidia-cuda-cupti") else []
        out[name] = (f"{name} {m['version']}", pinned or _cuda_requirements(m))
    return out


@pytest.fixture(scope="module")
def resolved(tmp_path_factory):
    """{case: (requirements, returncode, report, stderr)}: the wheel built once, three resolves in parallel."""
    why = _reachable()
    if why:
        pytest.skip(why)
    wheels = tmp_path_factory.mktemp("wheel")
    with ThreadPoolExecutor(3) as pool:
        build = pool.submit(_pip, "wheel", "--no-deps", "--quiet", "-w", str(wheels), str(ROOT))
        metas = {k: pool.submit(_dry_run, *v, deps=False) for k, v in FRAMEWORKS.items()}
        rc, _, err = build.result()
        assert rc == 0, f"building the project's wheel failed: {err}"
        found = {}
        for key, fut in metas.items():
            rc, report, err = fut.result()
            assert rc == 0, f"reading {FRAMEWORKS[key]} from {INDEX} failed: {err}"
            found[key] = _framework_requirements(report)
    cases = {" + ".join(found[k][n][0] for k, n in group): [r for k, n in group for r in found[k][n][1]]
             for group in GROUPS}
    wheel = str(next(wheels.glob("gcexplore-*.whl")))
    with ThreadPoolExecutor(len(cases)) as pool:
        futs = {case: pool.submit(_dry_run, wheel, *reqs) for case, reqs in cases.items()}
        return {case: (cases[case], *fut.result()) for case, fut in futs.items()}


def _installed(report: dict) -> dict[str, str]:
    return {i["metadata"]["name"].lower(): i["metadata"]["version"] for i in report["install"]}


@pytest.mark.slow  # among the slowest on a 2-core machine (pytest --durations, 2026-12-02)
def test_every_framework_pin_resolves_beside_gcexplore_and_is_kept(resolved):
    print()
    for case, (reqs, rc, report, err) in sorted(resolved.items()):
        assert rc == 0, f"{case}: gcexplore with {reqs} does not resolve:\n{err}"
        got = _installed(report)
        assert "gcexplore" in got and "cupti-python" in got, f"{case}: {sorted(got)}"
        for text in reqs:
            r = Requirement(text)
            assert r.name in got and r.specifier.contains(got[r.name], prereleases=True), (
                f"{case}: the framework requires {text}, pip would install {r.name} {got.get(r.name)}")
        print(f"{case}: {', '.join(reqs)} -> cupti-python {got['cupti-python']}, nvidia-cuda-cupti "
              f"{got['nvidia-cuda-cupti']}, nvidia-cuda-nvrtc {got['nvidia-cuda-nvrtc']}, cuda-bindings "
              f"{got['cuda-bindings']}")
    names = {part.split()[0] for case in resolved for part in case.split(" + ")}
    assert names == {"torch", "cupy-cuda13x", "cupy-cuda12x", "cupti-python", "nvidia-cuda-cupti"}, names


def test_torch_2_14_keeps_its_cupti_13_0_85_and_nvrtc_13_0_88(resolved):
    case = next(c for c in resolved if c.startswith("torch 2.14."))
    reqs, _, report, _ = resolved[case]
    assert any(r.startswith("cuda-toolkit[") and "cupti" in r for r in reqs), reqs
    got = _installed(report)
    assert got["nvidia-cuda-cupti"].startswith("13.0.85") and got["nvidia-cuda-nvrtc"].startswith("13.0.88"), got
    assert got["cupti-python"].startswith("13.0."), got  # the cupti-python that matches PyTorch's CUPTI
