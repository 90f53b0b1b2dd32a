"""Headless Chromium for the tests, driven over the DevTools protocol (websocket-client): open a page, collect what
a person would see in the console (console errors, uncaught exceptions, the browser's own errors such as a refused or
failed load) and every request the page makes, read the DOM as Chromium built it, take a screenshot.

Chromium is required, never optional: without it :func:`chromium_binary` fails the test with how to install it
(``.ci/run`` installs Debian's ``chromium``)."""

from __future__ import annotations

import base64
import itertools
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
INSTALL = ("Chromium is not installed, and the report's browser test needs it: on Debian or Ubuntu run `sudo apt-get "
           "install --no-install-recommends chromium` (.ci/run installs it when missing), or point the CHROMIUM "
           "environment variable at a Chromium or Chrome binary")


def chromium_binary() -> str:
    """The Chromium to run: ``$CHROMIUM``, else the first of :data:`CANDIDATES` on the PATH; fails the test (never
    skips it) when there is none."""
    given = os.environ.get("CHROMIUM")
    if given:
        if shutil.which(given) is None:
            pytest.fail(f"CHROMIUM={given} is not an executable; {INSTALL}")
        return given
    for name in CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    pytest.fail(INSTALL)


@dataclass
class PageLoad:
    """What opening one page gave: the DOM Chromium built, its problems and the requests it made."""

    url: str
    dom: str
    errors: list[str] = field(default_factory=list)  # console errors, exceptions, the browser's own error entries
    warnings: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)


class Chromium:
    """One headless Chromium; pages open in one tab, one after another."""

    def __init__(self, binary: str, timeout: float = 60.0) -> None:
        import websocket  # websocket-client

        self.timeout = timeout
        self._profile = tempfile.mkdtemp(prefix="blueprint-chromium-")
        args = [binary, "--headless=new", "--disable-gpu", "--no-first-run", "--no-default-browser-check",
                "--disable-extensions", "--disable-background-networking", "--disable-sync",
                "--disable-component-update", "--hide-scrollbars", "--remote-debugging-port=0",
                f"--user-data-dir={self._profile}", "--window-size=1400,1000", "about:blank"]
        if os.geteuid() == 0:
            args.insert(1, "--no-sandbox")  # Chromium refuses to run as root with its sandbox
        self._proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        url, seen = self._devtools_url()
        if url is None:
            self.close()
            pytest.fail(f"{binary} started but gave no DevTools address within {timeout:g} s; its output:\n"
                        + "".join(seen)[-2000:])
        # Keep reading Chromium's log, or it blocks once the pipe is full.
        self._drain = threading.Thread(target=self._proc.stderr.read if self._proc.stderr else None, daemon=True)
        self._drain.start()
        self._ws = websocket.create_connection(url, timeout=timeout, suppress_origin=True)
        self._ids = itertools.count(1)
        self._events: list[dict[str, Any]] = []
        target = self._call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self._session = self._call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self._call(f"{domain}.enable", session=True)

    def _devtools_url(self) -> tuple[str | None, list[str]]:
        assert self._proc.stderr is not None
        seen: list[str] = []
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            line = self._proc.stderr.readline()
            if not line:
                if self._proc.poll() is not None:
                    return None, seen
                continue
            seen.append(line)
            found = re.search(r"DevTools listening on (ws://\S+)", line)
            if found:
                return found.group(1), seen
        return None, seen

    def _call(self, method: str, params: dict[str, Any] | None = None, session: bool = False) -> dict[str, Any]:
        """Send one command and wait for its answer, keeping the events that arrive meanwhile."""
        call_id = next(self._ids)
        message: dict[str, Any] = {"id": call_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = self._session
        self._ws.send(json.dumps(message))
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            answer = json.loads(self._ws.recv())
            if answer.get("id") == call_id:
                if "error" in answer:
                    raise RuntimeError(f"{method}: {answer['error']}")
                result = answer.get("result", {})
                assert isinstance(result, dict)
                return result
            self._events.append(answer)
        raise TimeoutError(f"{method}: no answer in {self.timeout:g} s")

    def _wait_for(self, method: str) -> None:
        deadline = time.monotonic() + self.timeout
        while not any(e.get("method") == method for e in self._events):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{method} never came")
            self._events.append(json.loads(self._ws.recv()))

    def evaluate(self, expression: str, wait: bool = False) -> Any:
        """A JavaScript expression's value in the page (run by the test, not by the page: the report has none);
        ``wait``: the value a promise resolves to."""
        result = self._call("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                 "awaitPromise": wait}, session=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression[:80]}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def open(self, url: str, settle: float = 0.5) -> PageLoad:
        """Load ``url`` and wait for its load event (and a short settle for late errors)."""
        import websocket

        self._events.clear()
        self._call("Page.navigate", {"url": url}, session=True)
        self._wait_for("Page.loadEventFired")
        end = time.monotonic() + settle
        self._ws.settimeout(0.1)
        try:
            while time.monotonic() < end:
                try:
                    self._events.append(json.loads(self._ws.recv()))
                except websocket.WebSocketTimeoutException:  # nothing more came
                    continue
        finally:
            self._ws.settimeout(self.timeout)
        load = PageLoad(url=url, dom=str(self.evaluate("document.documentElement.outerHTML")))
        for event in self._events:
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                load.errors.append("console: " + " ".join(str(a.get("value", a.get("description")))
                                                         for a in params.get("args", [])))
            elif method == "Runtime.consoleAPICalled" and params.get("type") == "warning":
                load.warnings.append("console: " + " ".join(str(a.get("value")) for a in params.get("args", [])))
            elif method == "Runtime.exceptionThrown":
                details = params.get("exceptionDetails", {})
                load.errors.append("exception: " + str(details.get("exception", {}).get("description")
                                                       or details.get("text")))
            elif method == "Log.entryAdded":
                entry = params.get("entry", {})
                text = f"{entry.get('source')}: {entry.get('text')} {entry.get('url', '')}".strip()
                (load.errors if entry.get("level") == "error" else load.warnings).append(text)
            elif method == "Network.requestWillBeSent":
                load.requests.append(str(params.get("request", {}).get("url")))
            elif method == "Network.loadingFailed":
                load.errors.append(f"network: {params.get('errorText')} ({params.get('blockedReason', '')})")
        return load

    def screenshot(self, width: int = 1400, height: int | None = None) -> bytes:
        """A PNG of the page at ``width`` CSS pixels: its whole height, or the top ``height`` pixels."""
        metrics = self._call("Page.getLayoutMetrics", session=True)
        full = int(metrics.get("cssContentSize", metrics.get("contentSize", {})).get("height", 1000))
        shown = min(full, height) if height else full
        self._call("Emulation.setDeviceMetricsOverride", {"width": width, "height": shown, "deviceScaleFactor": 1,
                                                          "mobile": False}, session=True)
        data = self._call("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": False}, session=True)
        return base64.b64decode(data["data"])

    def close(self) -> None:
        """Close the browser and remove its profile."""
        try:
            if getattr(self, "_ws", None) is not None:
                self._ws.close()
        finally:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(timeout=10)
            if getattr(self, "_drain", None) is not None:
                self._drain.join(timeout=10)
            if self._proc.stderr is not None:
                self._proc.stderr.close()
            shutil.rmtree(self._profile, ignore_errors=True)


def file_url(path: Path) -> str:
    return path.resolve().as_uri()
