"""A real browser: JupyterLab serves the quickstart notebook, headless Chromium runs it.

The test starts JupyterLab on localhost, opens ``notebooks/01_quickstart.ipynb`` in
Debian's Chromium driven by Playwright (``executable_path``; no browser download),
runs all cells over the recorded results, and checks what a user would see: the
explorer's sliders and its plot image, and that moving the split slider redraws the
plot. A screenshot is saved to ``tmp_path``, or to ``docs/screenshot.png`` (the README's
picture, with the place of each plot in it in ``docs/screenshot.json``) when
``GCEXPLORE_UPDATE_SCREENSHOT=1``. Otherwise the committed picture must still show what
the explorer draws: each plot, cropped from both pictures, downscaled and in gray (so
fonts and antialiasing average out), may differ in no cell by more than a set number of
gray levels.

Skipped with the reason when Chromium, Playwright or JupyterLab is absent, or while
the recorded results the notebook needs have not been recorded yet. CI installs all
of them (``.ci/browser-setup``) and sets ``GCEXPLORE_REQUIRE_BROWSER=1``, so there it
runs.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from gcexplore.explorers._base import CSS

from _nbsupport import NOTEBOOK_DIR, REPO_ROOT, missing_recorded, read_notebook

pytestmark = pytest.mark.browser

NOTEBOOK = NOTEBOOK_DIR / "01_quickstart.ipynb"
CHROMIUM = os.environ.get("GCEXPLORE_CHROMIUM", "/usr/bin/chromium")
# Flags the machine notes require: headless as root, and no background connections,
# which this closed network refuses many at a time.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SCREENSHOT = REPO_ROOT / "docs" / "screenshot.png"
SCREENSHOT_BOXES = REPO_ROOT / "docs" / "screenshot.json"
# Plots are compared as a grid of cells (each the mean gray of its pixels): a bar added,
# removed or resized changes the cells it covers by around a hundred levels, while a shift
# by a pixel, a blur or other antialiasing spreads over a cell and moves it by about ten.
MATCH_SIZE = (32, 20)
MATCH_TOLERANCE = 40.0  # the largest difference of one cell, in gray levels of 255
SERVER_START_S = 90
RUN_ALL_S = 240
REDRAW_S = 60


@pytest.fixture
def sync_api():
    """Playwright's sync API; skips (with the reason) when something the test needs is absent.

    With ``GCEXPLORE_REQUIRE_BROWSER=1`` (set by .ci/run, which installs them) a missing
    Chromium, Playwright or JupyterLab fails the test instead, so CI cannot pass by
    skipping it.
    """
    absent = pytest.fail if os.environ.get("GCEXPLORE_REQUIRE_BROWSER") == "1" else pytest.skip
    if not Path(CHROMIUM).exists():
        absent(f"no Chromium at {CHROMIUM} (Debian: apt-get install -y chromium)")
    try:
        import jupyterlab  # noqa: F401
        from playwright import sync_api
    except ImportError as exc:
        absent(f"{exc.name} is not installed (pip install .[browser])")
    missing = missing_recorded(read_notebook(NOTEBOOK))
    if missing:
        pytest.skip(f"recorded results not in gcexplore/data yet: {', '.join(missing)}")
    return sync_api


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _write_lab_settings(settings_dir: Path) -> None:
    """User settings of the test's JupyterLab.

    Windowing off: JupyterLab 4 otherwise renders only the cells in view, and the test
    reads every cell's prompt. No news fetching: the network is closed.
    """
    files = {
        "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
        "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {"fetchNews": "false"},
    }
    for rel, value in files.items():
        path = settings_dir / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(value))


@pytest.fixture
def lab(sync_api, tmp_path):
    """A JupyterLab server on localhost over a copy of the notebook; yields (base_url, token)."""
    root = tmp_path / "lab"
    root.mkdir()
    # A copy, so the browser's autosave never touches the committed notebook.
    shutil.copy(NOTEBOOK, root / NOTEBOOK.name)
    port, token = _free_port(), secrets.token_hex(16)
    # Private Jupyter/IPython dirs: no user settings, kernels or workspaces leak in.
    env = dict(
        os.environ,
        GCEXPLORE_QUICK="1",
        GCEXPLORE_RECORDED="1",  # the notebook uses the recorded results, GPU or not
        JUPYTER_CONFIG_DIR=str(tmp_path / "jconfig"),
        JUPYTER_DATA_DIR=str(tmp_path / "jdata"),
        JUPYTER_RUNTIME_DIR=str(tmp_path / "jruntime"),
        JUPYTERLAB_WORKSPACES_DIR=str(tmp_path / "jworkspaces"),
        JUPYTERLAB_SETTINGS_DIR=str(tmp_path / "jsettings"),
        IPYTHONDIR=str(tmp_path / "ipython"),
    )
    cmd = [
        sys.executable, "-m", "jupyterlab",
        "--no-browser",
        "--ip=127.0.0.1",
        f"--port={port}",
        "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={root}",
        # No news or update checks: the network is closed and the toasts cover the page.
        "--LabApp.news_url=",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
    ]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")  # CI runs as root
    _write_lab_settings(tmp_path / "jsettings")
    log_path = tmp_path / "jupyterlab.log"
    log = open(log_path, "wb")
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=root)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + SERVER_START_S
        while True:
            if proc.poll() is not None:
                pytest.fail(f"JupyterLab exited ({proc.returncode}):\n{log_path.read_text()[-4000:]}")
            try:
                with urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"JupyterLab did not answer in {SERVER_START_S} s:\n"
                            f"{log_path.read_text()[-4000:]}")
            time.sleep(0.5)
        yield base, token, log_path
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def _updating_screenshot() -> bool:
    return os.environ.get("GCEXPLORE_UPDATE_SCREENSHOT") == "1"


def _gray_crop(path: Path, box: dict):
    """The part of a picture inside ``box`` (x, y, width, height), downscaled, in gray."""
    import numpy as np
    from PIL import Image

    with Image.open(path) as im:
        crop = im.convert("L").crop((round(box["x"]), round(box["y"]), round(box["x"] + box["width"]),
                                     round(box["y"] + box["height"])))
        return np.asarray(crop.resize(MATCH_SIZE, Image.Resampling.BOX), dtype=float)


def screenshot_differences(shot: Path, boxes: dict, committed: Path, committed_boxes: dict) -> dict:
    """Per plot: the largest gray-level difference of one cell between the two pictures' crops of it, or a
    sentence where the plot is missing from one of them or changed size."""
    out = {}
    for name, box in boxes.items():
        old = committed_boxes.get(name)
        if old is None:
            out[name] = "not in the committed screenshot"
            continue
        if abs(old["width"] - box["width"]) > 0.1 * box["width"] or abs(old["height"] - box["height"]) > 0.1 * box["height"]:
            out[name] = f"drawn {box['width']:.0f}x{box['height']:.0f} px, committed {old['width']:.0f}x{old['height']:.0f}"
            continue
        out[name] = float(abs(_gray_crop(shot, box) - _gray_crop(committed, old)).max())
    return out


def _check_or_update_screenshot(shot: Path, boxes: dict) -> None:
    if _updating_screenshot():
        shutil.copy(shot, SCREENSHOT)
        SCREENSHOT_BOXES.write_text(json.dumps(boxes, indent=1, sort_keys=True) + "\n")
        return
    redo = "regenerate it: GCEXPLORE_UPDATE_SCREENSHOT=1 python -m pytest -m browser tests/test_browser.py"
    assert SCREENSHOT_BOXES.exists(), f"{SCREENSHOT_BOXES.name} (where the plots are in the screenshot) is missing; {redo}"
    diffs = screenshot_differences(shot, boxes, SCREENSHOT, json.loads(SCREENSHOT_BOXES.read_text()))
    bad = {k: v for k, v in diffs.items() if isinstance(v, str) or v > MATCH_TOLERANCE}
    assert not bad, (f"docs/screenshot.png no longer shows what the explorer draws (largest gray-level difference "
                     f"of a cell per plot, tolerance {MATCH_TOLERANCE}): {bad}; {redo}")


def _dismiss_news(page):
    """Answer JupyterLab's one-time "official Jupyter news?" toast, so it covers nothing."""
    no = page.locator(".jp-Notification-Toast-Button, .jp-toast-button", has_text=re.compile(r"^No$"))
    if no.count():
        no.first.click()


def _run_all_cells(page):
    """Run > Run All Cells, through the menu bar as a user would."""
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Run All Cells$")).click()


def _tracebacks(page) -> list[str]:
    # IPython's error output always carries "Traceback (most recent call last)".
    return [t for t in page.locator(".jp-OutputArea").all_inner_texts() if "Traceback" in t]


def _wait_all_executed(page, n_code_cells: int, timeout_s: float):
    """Wait until every code cell shows an execution count ("[n]:", not "[*]:" or "[ ]:").

    Fails at once with the traceback when a cell raises (Run All stops there).
    """
    deadline = time.monotonic() + timeout_s
    prompts = []
    while time.monotonic() < deadline:
        failed = _tracebacks(page)
        assert not failed, f"a cell failed in the browser:\n{failed[0][-3000:]}"
        prompts = page.locator(".jp-CodeCell .jp-InputArea-prompt").all_inner_texts()
        done = [p for p in prompts if re.fullmatch(r"\s*\[\d+\]:\s*", p)]
        if len(prompts) == n_code_cells and len(done) == n_code_cells:
            return
        page.wait_for_timeout(500)
    pytest.fail(f"cells did not all run in {timeout_s} s; prompts: {prompts}")


def _image_fingerprint(img) -> bytes:
    # The pixels as shown, so a redraw counts whichever way the widget ships the PNG
    # (a data: URI in an Output, or a blob: URL of an Image widget).
    return img.screenshot(timeout=5_000)


def _wait_for_change(page, img, before: bytes, timeout_s: float) -> bytes:
    """The image's pixels once they differ from ``before`` (or the last seen at timeout)."""
    deadline = time.monotonic() + timeout_s
    after = before
    while time.monotonic() < deadline:
        page.wait_for_timeout(250)
        try:
            after = _image_fingerprint(img)
        except Exception:  # the old image left the DOM while being read: look again
            continue
        if after != before:
            break
    return after


def test_quickstart_explorer_in_chromium(sync_api, lab, tmp_path):
    base, token, log_path = lab
    nb = read_notebook(NOTEBOOK)
    n_code = sum(c.cell_type == "code" for c in nb.cells)

    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS,
                                    headless=True)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1400})
            console_errors = []
            page.on("pageerror", lambda e: console_errors.append(str(e)))
            page.goto(f"{base}/lab/tree/{NOTEBOOK.name}?token={token}&reset")
            page.locator(".jp-NotebookPanel").wait_for(timeout=60_000)
            # The kernel has started once the status bar says "Python 3 (ipykernel) | Idle".
            page.locator(".jp-StatusBar-TextItem", has_text=re.compile(r"\|\s*Idle")
                         ).first.wait_for(timeout=90_000)
            _dismiss_news(page)

            _run_all_cells(page)
            _wait_all_executed(page, n_code, RUN_ALL_S)

            failed = _tracebacks(page)
            assert not failed, f"a cell failed in the browser:\n{failed[0][-3000:]}"

            # The explorer: the widget output that holds sliders. ipywidgets renders
            # IntSlider and SelectionSlider as .widget-slider with a noUiSlider handle.
            # The explorer and its parts carry the CSS classes of gcexplore.widgets.CSS.
            explorer = page.locator(f".{CSS['root']}").first
            explorer.wait_for(timeout=30_000)
            sliders = explorer.locator(f".{CSS['split']}")
            assert sliders.count() >= 1, "the explorer shows no split slider"
            # ipywidgets renders a SelectionSlider as a noUiSlider with a readout.
            slider = sliders.first
            handle = slider.locator(".noUi-handle").first
            readout = slider.locator(".widget-readout")
            handle.wait_for(timeout=30_000)
            plot = explorer.locator(f".{CSS['throughput']} img").first
            plot.wait_for(timeout=30_000)
            box = plot.bounding_box()
            assert box and box["width"] > 100 and box["height"] > 100, f"plot image too small: {box}"

            before = _image_fingerprint(plot)
            value_before = readout.inner_text()
            # A user keys (or drags) the handle; noUiSlider moves one step per arrow key.
            handle.focus()
            handle.press("ArrowRight")
            if readout.inner_text() == value_before:  # already at the right end
                handle.press("ArrowLeft")
                handle.press("ArrowLeft")
            assert readout.inner_text() != value_before, "the slider did not move"
            after = _wait_for_change(page, plot, before, REDRAW_S)
            assert after != before, (
                f"moving the slider from {value_before} to {readout.inner_text()} "
                "did not redraw the plot")
            # Redrawn in place: one plot, not the new one stacked under the old.
            assert explorer.locator(f".{CSS['throughput']} img").count() == 1

            # Choose the split the SM occupancy was recorded at (the widget names it):
            # the occupancy picture appears next to the throughput plot.
            occupancy = explorer.locator(f".{CSS['occupancy']}")
            note = re.search(r"choose (\d+)\+", occupancy.inner_text())
            if note:
                target = int(note.group(1))
                for _ in range(64):
                    current = int(readout.inner_text())
                    if current == target:
                        break
                    handle.press("ArrowRight" if current < target else "ArrowLeft")
                assert int(readout.inner_text()) == target
            occupancy.locator("img").first.wait_for(timeout=REDRAW_S * 1000)
            assert occupancy.locator("img").count() == 1
            assert explorer.locator(f".{CSS['throughput']} img").count() == 1

            # Every table of the explorer fits the output area it is drawn in (no 1,771 px table
            # in a 944 px area, cut at the right edge of the screenshot).
            tables = explorer.locator("table.gcexplore-table")
            assert tables.count() >= 1, "the explorer shows no table"
            area = explorer.bounding_box()
            for i in range(tables.count()):
                tb = tables.nth(i).bounding_box()
                assert tb["x"] >= area["x"] - 1 and tb["x"] + tb["width"] <= area["x"] + area["width"] + 1, (
                    f"table {i} spans x {tb['x']:.0f}..{tb['x'] + tb['width']:.0f} px, its explorer "
                    f"{area['x']:.0f}..{area['x'] + area['width']:.0f} px")

            # Fold the file browser away and put the explorer at the top for the picture.
            current_left = page.locator(".jp-SideBar.jp-mod-left .lm-TabBar-tab.lm-mod-current")
            if current_left.count():
                current_left.first.click()
            explorer.evaluate("e => e.scrollIntoView({block: 'start'})")
            page.wait_for_timeout(500)
            shot = tmp_path / "screenshot.png"
            page.screenshot(path=str(shot))
            assert shot.stat().st_size > 10_000
            assert not console_errors, f"JavaScript errors in the page: {console_errors}"
            boxes = {"throughput": explorer.locator(f".{CSS['throughput']} img").first.bounding_box(),
                     "occupancy": occupancy.locator("img").first.bounding_box()}
            _check_or_update_screenshot(shot, boxes)
        except BaseException:
            # What the page looked like when it failed, next to the server log.
            page.screenshot(path=str(tmp_path / "failure.png"))
            raise
        finally:
            browser.close()


def test_screenshot_check_ignores_rasterising_and_catches_a_changed_plot(tmp_path):
    """The comparison itself, on the committed picture: a one-pixel shift and a blur (another
    font rasteriser, other antialiasing) stay within the tolerance; a bar drawn where there was
    none (the plain-streams bar the explorer no longer draws) does not, nor does the picture
    the README showed before (the 1,652 GB/s plain-streams bar), kept here as a reference."""
    from PIL import Image, ImageDraw, ImageFilter

    boxes = json.loads(SCREENSHOT_BOXES.read_text())
    with Image.open(SCREENSHOT) as im:
        im = im.convert("RGB")
        soft = tmp_path / "soft.png"
        im.transform(im.size, Image.Transform.AFFINE, (1, 0, 1, 0, 1, 1)).filter(
            ImageFilter.GaussianBlur(0.8)).save(soft)
        bar = tmp_path / "bar.png"
        t = boxes["throughput"]
        drawn = im.copy()
        # a bar as wide as one of the panel's bars, half as tall as the plot, in its right panel
        x0, y0 = t["x"] + 0.86 * t["width"], t["y"] + 0.4 * t["height"]
        ImageDraw.Draw(drawn).rectangle([x0, y0, x0 + 0.065 * t["width"], t["y"] + 0.85 * t["height"]],
                                        fill=(255, 127, 14))
        drawn.save(bar)
    same = screenshot_differences(soft, boxes, SCREENSHOT, boxes)
    assert all(v <= MATCH_TOLERANCE for v in same.values()), same
    changed = screenshot_differences(bar, boxes, SCREENSHOT, boxes)
    assert changed["throughput"] > MATCH_TOLERANCE and changed["occupancy"] <= MATCH_TOLERANCE, changed
    before = Path(__file__).parent / "data" / "screenshot-plain-streams-bar.png"
    at_origin = {"throughput": {**boxes["throughput"], "x": 0, "y": 0}}  # the file is that plot's crop
    assert screenshot_differences(before, at_origin, SCREENSHOT, boxes)["throughput"] > MATCH_TOLERANCE
    moved = {**boxes, "throughput": {**boxes["throughput"], "width": boxes["throughput"]["width"] * 1.3}}
    assert isinstance(screenshot_differences(SCREENSHOT, moved, SCREENSHOT, boxes)["throughput"], str)
