"""certify serve as a person uses it: a real headless Chromium (Debian's
chromium + chromium-driver, through Selenium) submits a checkpoint, follows the
progress, lands on the certificate page, and re-verifies the downloaded
certificate on the verify page; the server's verify result equals the
command line's on the same JSON. A screenshot is taken and must not be blank
(``CERTIFY_SCREENSHOT_DIR`` keeps a copy, as used for the README)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from service_support import CKPT, ROOT, Server, checkpoint_zip, need_os_package

CHROMIUM, DRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")


@pytest.fixture
def browser(tmp_path):
    need_os_package(CHROMIUM.is_file() and DRIVER.is_file(), "headless Chromium (/usr/bin/chromium, "
                    "/usr/bin/chromedriver)", "chromium chromium-driver")
    os.environ.setdefault("SE_OFFLINE", "true")          # never let Selenium download anything
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = str(CHROMIUM)
    for a in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
              "--disable-component-update", "--no-first-run", "--disable-dev-shm-usage",
              f"--user-data-dir={tmp_path / 'chromium-profile'}", "--window-size=1200,1500"):
        opts.add_argument(a)
    driver = webdriver.Chrome(service=Service(str(DRIVER)), options=opts)
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()


def _wait(cond, timeout: float, what: str):
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        v = cond()
        if v:
            return v
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def _not_blank(png: bytes) -> tuple[int, float]:
    """(distinct colours, pixel standard deviation) of a screenshot."""
    import io

    import numpy as np
    from PIL import Image

    img = np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))
    colours = len(np.unique(img.reshape(-1, 3), axis=0))
    return colours, float(img.std())


def test_submit_progress_certificate_verify_in_chromium(browser, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    zpath = tmp_path / "paper-model.zip"
    zpath.write_bytes(checkpoint_zip())
    with Server(tmp_path / "data") as s:
        # without a token the browser shows the refusal, and nothing is queued
        browser.get(s.url + "/submit")
        browser.find_element(By.ID, "file").send_keys(str(zpath))
        browser.find_element(By.ID, "submit-button").click()
        # the token field is required: the form does not submit without it
        assert "/submit" in browser.current_url
        browser.find_element(By.ID, "token").send_keys("wrong-token-xxxxxxxxxxxx")
        browser.find_element(By.ID, "submit-button").click()
        msg = _wait(lambda: "refused" in (t := browser.find_element(By.ID, "submit-status").text)
                    and t, 20, "refusal")
        assert "refused: the token is missing or wrong" in msg
        assert httpx.get(s.url + "/api/health").json()["queued"] == 0

        # submit with the token
        tok = browser.find_element(By.ID, "token")
        tok.clear()
        tok.send_keys(s.token)
        Select(browser.find_element(By.ID, "command")).select_by_value("checkpoint")
        browser.find_element(By.ID, "submit-button").click()
        _wait(lambda: "/jobs/" in browser.current_url, 30, "the job page")
        seen = set()

        def progressed():
            if "/certificates/" in browser.current_url:
                return True
            try:
                seen.add(browser.find_element(By.ID, "job-status").text)
            except Exception:          # the page is navigating
                pass
            return False
        _wait(progressed, 300, "the certificate page")
        assert seen & {"queued", "running"}, seen          # live progress was shown

        # the certificate page: claims, the server's verification and its meaning
        browser_cert_path = browser.current_url[len(s.url):]
        exit_text = _wait(lambda: browser.find_element(By.ID, "verify-exit").text, 20, "verify")
        page_exit = int(re.search(r"exit (\d+)", exit_text).group(1))
        meaning = browser.find_element(By.ID, "verify-meaning").text
        mode = browser.find_element(By.ID, "verify-mode").text
        assert mode.startswith("sources present")
        assert "on {0,1}^8 (256 x 256) has rank exactly 8 over Q" in browser.page_source
        assert browser.find_element(By.ID, "overall").text == "refuted"
        # a refuted claim reads verdict first: never a mark of approval before a false sentence
        said = [e.text for e in browser.find_elements(By.CSS_SELECTOR, ".statement .said")]
        assert "REFUTED (the sentence is false):" in said and "PROVED:" in said, said
        png = browser.get_screenshot_as_png()
        colours, std = _not_blank(png)
        assert colours > 50 and std > 10, (colours, std)
        shot = tmp_path / "certificate-page.png"
        shot.write_bytes(png)
        if os.environ.get("CERTIFY_SCREENSHOT_DIR"):
            dest = Path(os.environ["CERTIFY_SCREENSHOT_DIR"])
            dest.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(shot, dest / "certificate-page.png")

        # download the JSON (the link on the page) and verify it on the command line
        href = browser.find_element(By.ID, "download-json").get_attribute("href")
        cert_path = tmp_path / "downloaded-certificate.json"
        cert_path.write_bytes(httpx.get(href).content)
        # the user has their checkpoint beside it: the same verification as the server's
        for suffix in (".json", ".safetensors"):
            shutil.copyfile(CKPT.with_suffix(suffix), tmp_path / (CKPT.name + suffix))
        cli = subprocess.run([sys.executable, "-m", "certify", "verify", str(cert_path),
                              "--replay-extraction"],
                             cwd=tmp_path, capture_output=True, text=True,
                             env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert page_exit == cli.returncode == 0, cli.stderr
        assert meaning.startswith("every claim's verdict is re-derived")

        # the verify page, with the downloaded certificate
        browser.get(s.url + "/verify")
        browser.find_element(By.ID, "verify-file").send_keys(str(cert_path))
        browser.find_element(By.ID, "verify-button").click()
        _wait(lambda: "/jobs/" in browser.current_url, 30, "the verify job page")
        res = _wait(lambda: browser.find_element(By.ID, "job-result").text, 240, "verify result")
        # uploaded alone, without the checkpoint: it holds assuming the extraction (exit 4)
        assert "certify verify: exit 4" in res
        assert "certificate only" in res
        assert "verdict re-derived, REFUTED (the sentence is false): the head of" in res
        assert not re.search(r"^ok ", res, re.M)
        # exit 4 names the assumptions it holds under
        named = browser.find_element(By.ID, "verify-assumptions").text
        assert "extraction:" in named, named
        # the certificate page names the server's own upload for what it is
        browser.get(s.url + browser_cert_path)
        inputs = browser.find_element(By.CSS_SELECTOR, "ul.inputs").text
        assert "upload:paper-model.zip: the file submitted to this server" in inputs, inputs
        assert ": absent" not in inputs.split("upload:")[1].split("\n")[0]
        colours, std = _not_blank(browser.get_screenshot_as_png())
        assert colours > 20 and std > 5


def test_job_page_keeps_its_status_through_rate_limited_polls(browser, tmp_path):
    """Polls refused with 429 leave the last status shown and are retried after
    Retry-After; the page never shows a status it was not given."""
    from selenium.webdriver.common.by import By
    with Server(tmp_path / "data", "--read-rate", "3") as s:
        r = httpx.post(s.url + "/api/jobs", headers=s.auth, data={"command": "rank"},
                       files={"file": ("i.json", "[[1,0],[0,1]]", "application/json")})
        job_id = r.json()["id"]
        browser.get(f"{s.url}/jobs/{job_id}")
        stage = _wait(lambda: "status not available (429)" in (t := browser.find_element(
            By.ID, "job-stage").text) and t, 60, "a refused poll")
        assert re.search(r"asking again in \d+ s", stage), stage
        status = browser.find_element(By.ID, "job-status").text
        assert status in ("queued", "running", "done", "failed"), status
        assert "undefined" not in browser.find_element(By.ID, "job").text
        width = browser.find_element(By.ID, "job-bar").get_attribute("style")
        assert "100%" not in width or status in ("done", "failed"), (width, status)
