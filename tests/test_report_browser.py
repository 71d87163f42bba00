"""report.html and compare.html in a real browser (headless Chromium driven by Playwright).

Two audits of the tiny model are run through the CLI on pairs whose texts, file path, model folder and
comparison labels carry HTML. Each page is opened in Chromium. The test checks that every image loads, that
no console error and no dialog appears, that the hostile strings are shown as text and never become markup,
and it saves a screenshot. Skipped when Playwright or Chromium is missing; `.ci/run` installs both.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = "<script>alert(1)</script>"
IMG = "<img src=x onerror=alert(2)>"
FOLDER = "<img src=x onerror=alert(3)>"  # a folder name: it reaches the report as the data source's path
MODEL_FOLDER = "<svg onload=alert(4)>"  # reaches the report as the model's name

pytestmark = pytest.mark.slow


def _chromium() -> str:
    pytest.importorskip("playwright.sync_api", reason="needs Playwright: pip install playwright")
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        pytest.skip("needs the system Chromium: apt-get install chromium")
    return path


def _lengthwise(*args: str, cwd: Path) -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    run = subprocess.run(
        [sys.executable, "-m", "lengthwise.cli", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )
    assert run.returncode == 0, run.stdout + run.stderr


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory, tiny_model_dir: Path) -> dict[str, Path]:
    """Two audits (m = 3 and m = 2) and their comparison, written by the CLI; hostile text everywhere it can go."""
    _chromium()
    root = tmp_path_factory.mktemp("browser")
    model = root / MODEL_FOLDER
    shutil.copytree(tiny_model_dir, model)
    data = root / FOLDER / "pairs.jsonl"
    data.parent.mkdir()
    rows = [
        {"text1": f"{SCRIPT} The cat sat on the mat.", "text2": f"{IMG} A cat was sitting on a mat.", "score": 4},
        {"text1": "Stocks fell on Monday.", "text2": "Markets dropped sharply at the start of the week.", "score": 3},
        {"text1": "A man plays the guitar.", "text2": "The weather is cold today.", "score": 0},
    ]
    data.write_text("".join(json.dumps({**r, "text1": f"{r['text1']} ({i})"}) + "\n" for i in range(4) for r in rows))
    for name, m in (("a", "3"), ("b", "2")):
        settings = ("-e", m, "--null-permutations", "20")
        _lengthwise("audit", "-m", str(model), "-p", str(data), "-o", name, *settings, cwd=root)
    _lengthwise("report", "a", "b", "-o", "compare", "--label", SCRIPT, "--label", IMG, cwd=root)
    return {"report": root / "a" / "report.html", "compare": root / "compare" / "compare.html"}


@pytest.mark.parametrize(
    ("page_name", "shown"), [("report", [FOLDER, MODEL_FOLDER]), ("compare", [SCRIPT, IMG])], ids=["report", "compare"]
)
def test_page_in_chromium(pages: dict[str, Path], page_name: str, shown: list[str], tmp_path: Path) -> None:
    from playwright.sync_api import sync_playwright

    path = pages[page_name]
    errors: list[str] = []
    dialogs: list[str] = []
    failed: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=_chromium(), args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1200, "height": 900})
        page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
        page.on("requestfailed", lambda request: failed.append(request.url))
        page.goto(path.as_uri(), wait_until="load")

        images = page.eval_on_selector_all(
            "img", "els => els.map(e => ({src: e.src.slice(0, 30), ok: e.complete && e.naturalWidth > 0}))"
        )
        text = page.inner_text("body")
        injected = page.eval_on_selector_all("script, svg, img:not([src^='data:'])", "els => els.length")
        screenshot = tmp_path / f"{page_name}.png"
        page.screenshot(path=str(screenshot), full_page=False)
        browser.close()

    assert images, "the page shows no image"
    assert all(image["ok"] for image in images), images
    assert errors == [] and dialogs == [] and failed == []
    assert injected == 0  # no hostile string became an element
    for hostile in shown:
        assert hostile in text  # shown to the reader as the literal text
    assert screenshot.stat().st_size > 10_000
    if target := os.environ.get("LENGTHWISE_SCREENSHOTS"):  # refresh the docs' pictures: docs/img/
        shutil.copy(screenshot, Path(target) / f"browser_{page_name}.png")
