"""certify serve as a person uses it: a real headless Chromium (Debian's
chromium + chromium-driver, through Selenium) submits a checkpoint, follows the
progress, lands on the certificate page, and re-verifies the downloaded
certificate on the verify page; the server's verify result equals the
command line's on the same JSON. A screenshot is taken and must not be blank
(``CERTIFY_SCREENSHOT_DIR`` keeps a copy, as used for docs/service.md)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from service_support import CKPT, ROOT, Server, checkpoint_zip, need_os_package
from waits import polls, wait_until

CHROMIUM, DRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")


def _chromium(tmp_path, *, javascript: bool = True, size: str = "1200,1500"):
    need_os_package(CHROMIUM.is_file() and DRIVER.is_file(), "headless Chromium (/usr/bin/chromium, "
                    "/usr/bin/chromedriver)", "chromium chromium-driver")
    os.environ.setdefault("SE_OFFLINE", "true")          # never let Selenium download anything
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = str(CHROMIUM)
    for a in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
              "--disable-component-update", "--no-first-run", "--disable-dev-shm-usage",
              f"--user-data-dir={tmp_path / 'chromium-profile'}", f"--window-size={size}"):
        opts.add_argument(a)
    if not javascript:
        opts.add_experimental_option("prefs", {"profile.managed_default_content_settings.javascript": 2})
    driver = webdriver.Chrome(service=Service(str(DRIVER)), options=opts)
    driver.set_page_load_timeout(60)
    return driver


@pytest.fixture
def browser(tmp_path):
    driver = _chromium(tmp_path)
    yield driver
    driver.quit()


@pytest.fixture
def browser_without_js(tmp_path):
    driver = _chromium(tmp_path, javascript=False, size="1000,820")
    yield driver
    driver.quit()


def _descendant(pid: int, needle: str) -> int | None:
    """The pid of a process below ``pid`` whose command line contains ``needle``."""
    children: dict[int, list[int]] = {}
    cmdlines: dict[int, str] = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            cmdlines[int(d.name)] = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(d.name))
    todo = list(children.get(pid, []))
    while todo:
        q = todo.pop()
        if needle in cmdlines.get(q, ""):
            return q
        todo += children.get(q, [])
    return None


def _field(src: str, id_: str) -> str | None:
    """The text of element ``id_`` in a page's source (None when absent)."""
    import html
    m = re.search(rf'id="{id_}"[^>]*>(.*?)</(dd|span|p|div|a)>', src, re.S)
    return html.unescape(re.sub(r"<[^>]+>", "", m.group(1))).strip() if m else None


def _keep_screenshot(png: bytes, name: str) -> None:
    """Keep a copy in ``CERTIFY_SCREENSHOT_DIR`` (how reports/service/ is made)."""
    if os.environ.get("CERTIFY_SCREENSHOT_DIR"):
        import io

        from PIL import Image
        dest = Path(os.environ["CERTIFY_SCREENSHOT_DIR"])
        dest.mkdir(parents=True, exist_ok=True)
        img = Image.open(io.BytesIO(png)).convert("RGB").quantize(colors=96)   # a small PNG
        img.save(dest / name, optimize=True)


def _wait(cond, what: str, server: Server):
    """``cond()`` once it is true (polled); an element not there yet (a page
    still loading) counts as false; fails at once when the server has exited."""
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
    return wait_until(cond, what, proc=server.proc, output=server.log_path, pause=0.2,
                      absent=(NoSuchElementException, StaleElementReferenceException))


def _not_blank(png: bytes) -> tuple[int, float]:
    """(distinct colours, pixel standard deviation) of a screenshot."""
    import io

    import numpy as np
    from PIL import Image

    img = np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))
    # a colour as one 24-bit integer: np.unique of a flat array (unique rows of a 1.8 M x 3
    # array sort lexicographically: seconds)
    rgb = img.astype(np.uint32)
    colours = len(np.unique((rgb[..., 0] << 16) | (rgb[..., 1] << 8) | rgb[..., 2]))
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
                    and t, "refusal", s)
        assert "refused: the token is missing or wrong" in msg
        assert httpx.get(s.url + "/api/health").json()["queued"] == 0

        # submit with the token
        tok = browser.find_element(By.ID, "token")
        tok.clear()
        tok.send_keys(s.token)
        Select(browser.find_element(By.ID, "command")).select_by_value("checkpoint")
        browser.find_element(By.ID, "submit-button").click()
        _wait(lambda: "/jobs/" in browser.current_url, "the job page", s)
        seen = set()

        def progressed():
            if "/certificates/" in browser.current_url:
                return True
            try:
                seen.add(browser.find_element(By.ID, "job-status").text)
            except Exception:          # the page is navigating
                pass
            return False
        _wait(progressed, "the certificate page", s)
        assert seen & {"queued", "running"}, seen          # live progress was shown

        # the certificate page: claims, the server's verification and its meaning
        browser_cert_path = browser.current_url[len(s.url):]
        exit_text = _wait(lambda: browser.find_element(By.ID, "verify-exit").text, "verify", s)
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
        # two labelled facts: what the claims say, and whether the certificate checks out
        assert browser.find_element(By.ID, "fact-check").text == "checks out"
        assert "a refutation that checks out is itself proved" in \
            browser.find_element(By.ID, "facts-explained").text
        heads = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "article.claim h3")]
        assert any("claim: refuted" in h and "check: re-derived" in h for h in heads), heads
        assert not any("verified" in h for h in heads), heads
        _keep_screenshot(png, "certificate-page.png")

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
        _wait(lambda: "/jobs/" in browser.current_url, "the verify job page", s)
        res = _wait(lambda: browser.find_element(By.ID, "job-result").text, "verify result", s)
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
        assert "the upload paper-model.zip: the file submitted to this server" in inputs, inputs
        assert "not found" not in inputs.split("the upload ")[1].split("\n")[0]
        colours, std = _not_blank(browser.get_screenshot_as_png())
        assert colours > 20 and std > 5


@pytest.mark.slow  # a second server and browser (6 s)
def test_job_page_keeps_its_status_through_rate_limited_polls(browser, tmp_path):
    """Polls refused with 429 leave the last status shown and are retried after
    Retry-After; the page never shows a status it was not given.

    The job must still be live when its polls are refused, whatever the load:
    the server's job launcher is stopped (SIGSTOP) before the job is submitted,
    so the job cannot end while the page polls; it is continued at the end."""
    from selenium.webdriver.common.by import By
    with Server(tmp_path / "data", "--read-rate", "3") as s:
        launcher = _wait(lambda: _descendant(s.proc.pid, "certify.service.launcher"),
                         "the server's job launcher", s)
        os.kill(launcher, signal.SIGSTOP)
        try:
            r = httpx.post(s.url + "/api/jobs", headers=s.auth, data={"command": "rank"},
                           files={"file": ("i.json", "[[1,0],[0,1]]", "application/json")})
            job_id = r.json()["id"]
            browser.get(f"{s.url}/jobs/{job_id}")
            stage = _wait(lambda: "status not available (429)" in (t := browser.find_element(
                By.ID, "job-poll").text) and t, "a refused poll", s)
            assert re.search(r"asking again in \d+ s", stage), stage
            status = browser.find_element(By.ID, "job-status").text
            assert status in ("queued", "running"), status          # it cannot have ended
            assert "undefined" not in browser.find_element(By.ID, "job").text
            width = browser.find_element(By.ID, "job-bar").get_attribute("style")
            assert "100%" not in width, (width, status)
        finally:
            os.kill(launcher, signal.SIGCONT)


#: the stages of a feasibility job (certify.service.worker)
STAGES = ("computing the claims (certify feasibility)", "verifying the claims (exact arithmetic)",
          "building the report")


@pytest.mark.slow             # a server, a browser and a feasibility job (about 25 s)
def test_without_javascript_a_job_page_follows_the_job_to_its_certificate(browser_without_js, tmp_path):
    """JavaScript off: the job page is the server's rendering of the job's real
    state (stage, claims, start, time since the start) and reloads itself
    while the job lives; when it is done it links to the certificate, which
    opens with its two facts."""
    from selenium.webdriver.common.by import By
    b = browser_without_js
    with Server(tmp_path / "data", "--read-rate", "0") as s, httpx.Client(timeout=60) as c:
        r = c.post(s.url + "/api/jobs", headers=s.auth, data={
            "command": "feasibility", "family": "paper-5.1", "rank": "12", "time_limit": "3"})
        job = r.json()["id"]
        b.get(f"{s.url}/jobs/{job}")
        # JavaScript is off: the page's <noscript> is parsed, and its refresh is what reloads it
        assert len(b.find_elements(By.CSS_SELECTOR, 'noscript > meta[http-equiv="refresh"]')) == 1
        states = []
        shot = False
        for _ in polls(0.2):                          # until the job ends (polls: the hang guard)
            assert s.proc.poll() is None, s.output()[-2000:]
            src = b.page_source                       # one snapshot: the page reloads itself
            status = _field(src, "job-status")
            if status is None:                        # between two loads
                time.sleep(0.2)
                continue
            api = c.get(f"{s.url}/api/jobs/{job}").json()
            states.append(status)
            if status == "running":
                stage = _field(src, "job-stage")
                # the worker's own stages, numbered as it goes through them (or "starting its process":
                # claimed, no stage recorded yet); the page was rendered at its last reload
                if stage != "starting its process":
                    m = re.fullmatch(r"step ([1-3]) of 3: (.+)", stage)
                    assert m and STAGES[int(m.group(1)) - 1] == m.group(2), stage
                    states.append(stage)
                    if not shot:
                        _keep_screenshot(b.get_screenshot_as_png(), "job-running.png")
                        shot = True
                started = _field(src, "job-started")
                assert started == api["started_at"][:19].replace("T", " ") + " UTC", started
                shown = int(re.fullmatch(r"(\d+) s since it started", _field(src, "job-elapsed")).group(1))
                # the time since the job's start, when the server rendered the page
                import datetime as dt
                as_of = _field(src, "job-asof")[:19]
                since = (dt.datetime.fromisoformat(as_of) - dt.datetime.fromisoformat(
                    api["started_at"][:19])).total_seconds()
                assert abs(shown - since) <= 1, (shown, as_of, api["started_at"])
                claims = _field(src, "job-claims")
                assert claims == "not known until the computation ends" or \
                    re.fullmatch(r"[01] of 1 verified", claims), claims
            if status in ("done", "failed"):
                break
            time.sleep(0.5)
        text = b.find_element(By.ID, "job").text
        assert status == "done", (states, text)
        assert "running" in states, states                   # seen live, by reloads alone
        assert "step 1 of 3: computing the claims (certify feasibility)" in states, states
        # the finished page: 100 %, the outcome, and the link
        assert "width: 100%" in b.find_element(By.ID, "job-bar").get_attribute("style")
        assert b.find_element(By.ID, "job-exit").text.startswith(str(api["exit_code"]))
        link = b.find_element(By.ID, "job-certificate")
        _keep_screenshot(b.get_screenshot_as_png(), "job-finished.png")
        sha = c.get(f"{s.url}/api/jobs/{job}").json()["cert_sha256"]
        assert link.get_attribute("href") == f"{s.url}/certificates/{sha}"
        link.click()
        _wait(lambda: b.current_url.endswith(f"/certificates/{sha}"), "the certificate page", s)
        facts = b.find_element(By.ID, "facts").text
        assert facts.startswith("claims: ") and "certificate: checks out" in facts, facts
        assert b.find_element(By.ID, "verify-exit").text == "certify verify: exit 0"
