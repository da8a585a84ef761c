"""The built documentation site in a real browser (headless Chromium through Playwright).

Opens the site that ``python -m sphinx -W -b html docs docs/_build/html`` built (served on
127.0.0.1 by a thread of this process): the index, an API page, every gallery and course page
with its figures loaded (no broken image), and the search page finding a public name.

Skipped with the reason while Chromium or Playwright is absent, or while the site has not
been built; ``.ci/run`` builds it first and sets ``GCEXPLORE_REQUIRE_SITE=1`` (and
``GCEXPLORE_REQUIRE_BROWSER=1``), so there it runs.
"""

from __future__ import annotations

import functools
import http.server
import os
import threading
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser

SITE = Path(__file__).resolve().parents[1] / "docs" / "_build" / "html"
CHROMIUM = os.environ.get("GCEXPLORE_CHROMIUM", "/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
BROKEN_IMAGES = "Array.from(document.images).filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.src)"


@pytest.fixture(scope="module")
def site():
    """The base URL of the built site, served on loopback for the module's tests."""
    if not (SITE / "index.html").is_file():
        absent = pytest.fail if os.environ.get("GCEXPLORE_REQUIRE_SITE") == "1" else pytest.skip
        absent(f"the site is not built ({SITE}): python -m sphinx -W -b html docs docs/_build/html")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(SITE))
    handler.log_message = lambda *a, **k: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def page(site):
    absent = pytest.fail if os.environ.get("GCEXPLORE_REQUIRE_BROWSER") == "1" else pytest.skip
    if not Path(CHROMIUM).exists():
        absent(f"no Chromium at {CHROMIUM} (Debian: apt-get install -y chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as exc:
        absent(f"{exc.name} is not installed (pip install .[browser])")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page()
        yield page
        browser.close()


def _pages(folder: str) -> list[str]:
    return sorted(str(p.relative_to(SITE)) for p in (SITE / folder).rglob("*.html") if p.name != "index.html")


def test_the_index_links_every_part(site, page):
    page.goto(f"{site}/index.html")
    assert "gcexplore" in page.title()
    hrefs = page.eval_on_selector_all("article a", "els => els.map(e => e.getAttribute('href'))")
    for part in ("guide.html", "course/index.html", "gallery/index.html", "api/index.html", "facts.html"):
        assert part in hrefs, (part, hrefs)


def test_an_api_page_documents_its_names(site, page):
    import gcexplore

    page.goto(f"{site}/api/index.html")
    links = page.eval_on_selector_all("article a.reference.internal",
                                      "els => els.map(e => e.getAttribute('href'))")
    assert "gcexplore.html" in links
    page.goto(f"{site}/api/gcexplore.html")
    listed = page.eval_on_selector_all("article table code", "els => els.map(e => e.textContent)")
    assert set(gcexplore.__all__) <= set(listed)
    page.goto(f"{site}/api/gcexplore_device.html")
    assert page.locator("[id='gcexplore.device.plan_split']").count() == 1
    text = page.inner_text("[id='gcexplore.device.plan_split'] + dd")
    for section in ("parameters", "returns", "raises", "sm_counts", "rounding"):  # the theme capitalises
        assert section in text.lower(), section


@pytest.mark.parametrize("folder", ["gallery", "course"])
def test_every_page_shows_its_figures(site, page, folder):
    pages = _pages(folder)
    assert pages, f"no pages under {folder}/"
    shown = 0
    for rel in pages:
        page.goto(f"{site}/{rel}")
        page.wait_for_load_state("load")
        assert page.evaluate(BROKEN_IMAGES) == [], rel
        shown += page.evaluate("document.images.length") > 0
    # every notebook draws; the course pages but the one on sizes do
    assert shown >= (len(pages) if folder == "gallery" else len(pages) - 1), (folder, shown, len(pages))


def test_search_finds_a_public_name(site, page):
    page.goto(f"{site}/search.html?q=best_split")
    page.wait_for_selector("#search-results li", timeout=30_000)
    hits = page.eval_on_selector_all("#search-results li a", "els => els.map(e => e.getAttribute('href'))")
    assert any("api/" in h for h in hits), hits
