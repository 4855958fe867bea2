"""Headless Chromium for the HTML view's tests and bench: Debian's ``chromium`` and
``chromium-driver`` (``make setup`` installs them) driven by ``selenium`` (the ``[test]`` extra).

:func:`missing` says what is absent (tests skip with it); :func:`chromium_driver` starts the
browser with the console log kept, so a test can assert that a page logged no error.
Selenium is given the driver's and the browser's paths: it never downloads one.
"""

from __future__ import annotations

import contextlib
import shutil
import time
from collections.abc import Iterator
from typing import Any

BROWSERS = ("chromium", "chromium-browser", "google-chrome")


def missing() -> str | None:
    """Why the browser tests cannot run here, or None when they can."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -e '.[relay,test]')"
    if _browser() is None:
        return "no chromium here (apt-get install chromium chromium-driver; make setup does)"
    if shutil.which("chromedriver") is None:
        return "no chromedriver here (apt-get install chromium-driver; make setup does)"
    return None


def _browser() -> str | None:
    return next((path for path in map(shutil.which, BROWSERS) if path), None)


@contextlib.contextmanager
def chromium_driver(width: int = 1400, height: int = 900) -> Iterator[Any]:
    """A headless Chromium WebDriver that keeps the browser console log; quit on exit."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = _browser() or "chromium"
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                 f"--window-size={width},{height}", "--no-first-run",
                 "--disable-background-networking", "--allow-file-access-from-files"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=shutil.which("chromedriver")),
                              options=options)
    try:
        yield driver
    finally:
        driver.quit()


def wait_ready(driver: Any, timeout: float = 30.0) -> None:
    """Wait until the view has drawn itself (``<body data-ready="true">``)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if driver.execute_script("return document.body && document.body.dataset.ready"):
            return
        time.sleep(0.05)
    raise TimeoutError(f"the page did not draw within {timeout} s; console: "
                       f"{console_errors(driver)}")


def console_errors(driver: Any) -> list[str]:
    """Console messages at error level (uncaught exceptions, CSP violations, failed loads)."""
    return [entry["message"] for entry in driver.get_log("browser")
            if entry.get("level") == "SEVERE"]
