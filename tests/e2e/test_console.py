"""The web console at ``/console`` in a real headless browser (Debian's chromium, driven by
Playwright with ``executable_path``), against one local stack started as `memvault run`.

Memories are written through the HTTP API; then a person, in the page, signs in with a
dev token, reads the list with every field, recalls with the reasons, corrects one (and
sees a stale version's conflict), deletes one and watches each copy reach COMPLETED,
downloads the export and forgets the subject until nothing is left. Stored text is shown
as text and never runs; errors show the API's code and message; the page works from the
keyboard and at a phone's width. Screenshots go to ``build/console-screenshots/``.

Without chromium (``scripts/chromium.sh`` installs it) these tests skip, except under CI
(``CI`` set), where a missing browser fails the run.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memvault_local.client import ApiClient
from memvault_local.process import RunningStack, start_stack

REPO = Path(__file__).resolve().parents[2]
SHOTS = REPO / "build" / "console-screenshots"
CHROMIUM = os.environ.get("MEMVAULT_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
ALL_SCOPES = "memory:read memory:write memory:delete sessions:write runs:write"


def _browser_missing() -> str | None:
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "Playwright for Python is not installed (it is in the dev extra: make install)"
    if not Path(CHROMIUM).exists():
        return f"no chromium at {CHROMIUM}: run scripts/chromium.sh (apt-get install chromium)"
    return None


MISSING = _browser_missing()
if MISSING is not None:
    if os.environ.get("CI"):
        pytest.fail(f"the console's browser tests cannot run under CI: {MISSING}", pytrace=False)
    pytest.skip(MISSING, allow_module_level=True)

from playwright.sync_api import Browser, Page, expect, sync_playwright  # noqa: E402


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    running = start_stack(tmp_path_factory.mktemp("console-home"), MEMVAULT_EMBED_WORKER="off")
    yield running
    running.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as pw:
        launched = pw.chromium.launch(executable_path=CHROMIUM)
        yield launched
        launched.close()


class Console:
    """One browser tab on the console, recording what the page logged as errors."""

    def __init__(self, page: Page, stack: RunningStack) -> None:
        self.page = page
        self.stack = stack
        self.errors: list[str] = []
        page.on("pageerror", lambda err: self.errors.append(str(err)))
        page.on("console", self._logged)

    def _logged(self, message: Any) -> None:
        # The browser logs each refused request itself; the API's refusals are expected.
        if message.type == "error" and not message.text.startswith("Failed to load resource"):
            self.errors.append(message.text)

    @property
    def url(self) -> str:
        line = next(ln for ln in self.stack.banner.splitlines() if ln.strip().startswith("console"))
        return line.split()[-1]

    def open(self, url: str | None = None) -> None:
        self.page.goto(url or self.url)
        expect(self.page.locator("body[data-ready=true]")).to_have_count(1)

    def dev_sign_in(self, subject: str, scopes: str = ALL_SCOPES) -> None:
        self.open()
        form = self.page.locator("#dev-form")
        form.locator("input[name=subject]").fill(subject)
        for box in form.locator("input[name=scopes]").all():
            box.set_checked(box.get_attribute("value") in scopes.split())
        form.locator("#dev-sign-in").click()
        expect(self.page.locator("#app")).to_be_visible()
        expect(self.page.locator("#subject")).to_have_value(subject)

    def assert_clean(self) -> None:
        """Nothing went wrong in the page itself (the page turns its own faults into a
        ``console_error`` alert, so that is checked as well as the browser's log)."""
        assert self.errors == []
        assert self.page.locator("#alert").get_attribute("data-code") != "console_error"

    def row(self, text: str) -> Any:
        return self.page.locator("#memories tbody tr", has_text=text)

    def cell(self, row: Any, label: str) -> Any:
        return row.locator(f'td[data-label="{label}"]')

    def shot(self, name: str) -> Path:
        path = SHOTS / name
        self.page.screenshot(path=str(path), full_page=True)
        return path

    def alert(self) -> Any:
        return self.page.locator("#alert")


@pytest.fixture
def console(browser: Browser, stack: RunningStack) -> Iterator[Console]:
    context = browser.new_context(viewport={"width": 1280, "height": 900}, accept_downloads=True)
    yield Console(context.new_page(), stack)
    context.close()


def write(api: ApiClient, subject: str, request_id: str, **fields: Any) -> dict[str, Any]:
    body = {
        "request_id": request_id,
        "kind": "semantic",
        "source": {"type": "user_statement"},
        "consent": True,
        **fields,
    }
    answer = api.call("POST", f"/v1/subjects/{subject}/memories", body=body)
    assert answer.status == 201, answer.body
    memory: dict[str, Any] = answer.body
    return memory


def until_indexed(api: ApiClient, subject: str, count: int, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        items = api.call("GET", f"/v1/subjects/{subject}/memories").body["items"]
        if len(items) == count and all(m["index_status"] == "indexed" for m in items):
            return
        time.sleep(0.5)
    raise AssertionError(f"{subject}'s memories were not indexed in {timeout} s")


def watch_deletion(page: Page) -> None:
    """Record every status the deletion panel shows, in order (window.__statuses)."""
    page.evaluate(
        """() => {
          window.__statuses = [];
          const summary = document.getElementById('deletion-summary');
          const seen = () => {
            const s = summary.dataset.status;
            const all = window.__statuses;
            if (s && all[all.length - 1] !== s) all.push(s);
          };
          new MutationObserver(seen).observe(summary, {attributes: true, childList: true});
        }"""
    )


def until_completed(console: Console, before: str | None = None) -> list[str]:
    """Wait until the panel shows a deletion other than ``before`` as COMPLETED."""
    summary = console.page.locator("#deletion-summary")
    if before is not None:
        expect(summary).not_to_have_attribute("data-deletion-id", before)
    expect(summary).to_have_attribute("data-status", "COMPLETED", timeout=30_000)
    copies = console.page.locator("#deletion-copies tbody tr")
    statuses = {
        str(row.get_attribute("data-copy")): str(row.get_attribute("data-status"))
        for row in copies.all()
    }
    assert statuses and set(statuses.values()) <= {"DONE", "NOT_APPLICABLE"}, statuses
    assert statuses["primary"] == "DONE" and statuses["index"] == "DONE", statuses
    seen: list[str] = console.page.evaluate("window.__statuses")
    return seen


def test_a_person_corrects_deletes_exports_and_forgets_in_the_console(
    console: Console, stack: RunningStack
) -> None:
    subject = "console-1"
    api = stack.client(subject=subject)
    language = write(
        api,
        subject,
        "c1-lang",
        canonical_key="doc-language",
        content="Prefers Chinese for internal docs",
        tags=["preference"],
        source={"type": "user_statement", "ref": "chat:42"},
    )
    tea = write(api, subject, "c1-tea", canonical_key="drink", content="Drinks green tea at 4pm")
    write(api, subject, "c1-editor", kind="procedural", content="Uses vim keybindings")
    until_indexed(api, subject, 3)

    console.dev_sign_in(subject)
    page = console.page
    expect(page.locator("#memories tbody tr")).to_have_count(3)
    row = console.row("Prefers Chinese for internal docs")
    for label, shown in {
        "Kind": "semantic",
        "Canonical key": "doc-language",
        "Source": "user_statement · chat:42",
        "Consent": "yes",
        "Sensitivity": "internal",
        "Version": "1",
        "Status": "active",
        "Index": "indexed",
        "Expires": language["expires_at"][:10],
    }.items():
        expect(console.cell(row, label)).to_contain_text(shown)
    console.shot("01-memories.png")

    # Search goes through recall and says why each item matched.
    page.locator("#query").fill("which language for internal docs?")
    page.locator("#recall").click()
    hit = console.row("Prefers Chinese for internal docs")
    expect(console.cell(hit, "Why it matched")).to_contain_text("matched by")
    expect(console.cell(hit, "Why it matched")).to_contain_text("relevance")
    expect(page.locator("#list-note")).to_contain_text("recalled")
    console.shot("02-recall.png")
    page.locator("#apply-filters").click()
    expect(page.locator("#memories tbody tr")).to_have_count(3)

    # One memory's details and history; a correction at the expected version.
    console.row("Prefers Chinese").locator("button.open").click()
    expect(page.locator("#detail")).to_be_visible()
    expect(page.locator("#history tbody tr")).to_have_count(1)
    expect(page.locator("#expected-version")).to_have_value("1")
    page.locator("#correct-content").fill("Prefers English for internal docs")
    page.locator("#save-correction").click()
    expect(console.alert()).to_contain_text("Corrected: version 2")
    expect(page.locator("#history tbody tr")).to_have_count(2)
    expect(page.locator("#history")).to_contain_text("superseded")
    expect(console.cell(console.row("Prefers English"), "Version")).to_have_text("2")
    console.shot("03-corrected.png")

    # A stale expected version is shown as the API's conflict, and nothing changes.
    page.locator("#expected-version").fill("1")
    page.locator("#correct-content").fill("Prefers French for internal docs")
    page.locator("#save-correction").click()
    expect(console.alert()).to_have_attribute("data-code", "version_conflict")
    stale = api.call(
        "PATCH",
        f"/v1/subjects/{subject}/memories/{language['memory_id']}",
        body={"expected_version": 1, "content": "Prefers French for internal docs"},
    )
    expect(console.alert()).to_contain_text(f"version_conflict: {stale.body['error']['message']}")
    expect(console.alert()).to_contain_text("HTTP 409")
    current = api.call("GET", f"/v1/subjects/{subject}/memories/{language['memory_id']}").body
    assert (current["version"], current["content"]) == (2, "Prefers English for internal docs")
    console.shot("04-conflict.png")

    # Delete one memory, then watch each copy's status until the job is COMPLETED.
    watch_deletion(page)
    tea_row = console.row("Drinks green tea")
    tea_row.locator("button.delete").click()
    tea_row.locator("button.confirm-delete").click()
    seen = until_completed(console)
    assert seen[0] in ("REQUESTED", "BLOCKED", "PURGING") and seen[-1] == "COMPLETED", seen
    expect(page.locator("#memories tbody tr")).to_have_count(2)
    expect(console.row("Drinks green tea")).to_have_count(0)
    gone = api.call("GET", f"/v1/subjects/{subject}/memories/{tea['memory_id']}")
    assert (gone.status, gone.body["error"]["code"]) == (404, "not_found")
    console.shot("05-deleted.png")

    # The export is a file download with what the subject still has.
    with page.expect_download() as download_info:
        page.locator("#export").click()
    download = download_info.value
    assert re.fullmatch(r"memvault-export-console-1-\w+\.json", download.suggested_filename)
    saved = SHOTS / "export.json"
    download.save_as(saved)
    exported = json.loads(saved.read_text(encoding="utf-8"))
    assert exported["subject_id"] == subject
    # Every version held (the superseded one too), and nothing of the deleted memory.
    assert sorted((m["content"], m["version"]) for m in exported["memories"]) == [
        ("Prefers Chinese for internal docs", 1),
        ("Prefers English for internal docs", 2),
        ("Uses vim keybindings", 1),
    ]

    # Forget the subject: the job reaches COMPLETED and nothing is left.
    deleted_id = page.locator("#deletion-summary").get_attribute("data-deletion-id")
    watch_deletion(page)
    page.locator("#forget").click()
    page.locator("#forget-yes").click()
    seen = until_completed(console, before=deleted_id)
    assert seen[-1] == "COMPLETED", seen
    expect(page.locator("#deletion-summary")).to_contain_text("Forget")
    expect(page.locator("#memories tbody tr")).to_have_count(0)
    expect(page.locator("#list-note")).to_have_text(f"{subject} has no current memories.")
    assert api.call("GET", f"/v1/subjects/{subject}/memories").body["items"] == []
    assert api.call("GET", f"/v1/subjects/{subject}/export").body["memories"] == []
    console.shot("06-forgotten.png")
    console.assert_clean()


def test_stored_text_is_shown_as_text_and_never_runs(console: Console, stack: RunningStack) -> None:
    subject = "console-xss"
    api = stack.client(subject=subject)
    hostile = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>'
    write(
        api,
        subject,
        "xss-1",
        canonical_key="bio",
        content=f"Bio: {hostile}",
        source={"type": "user_statement", "ref": '<b onmouseover="window.__pwned=3">x</b>'},
    )
    console.dev_sign_in(subject)
    page = console.page
    row = console.row("Bio:")
    expect(row).to_have_count(1)
    expect(console.cell(row, "Content")).to_have_text(f"Bio: {hostile}")
    row.locator("button.open").click()
    expect(page.locator("#detail-fields")).to_contain_text(hostile)
    expect(page.locator("#history tbody tr")).to_have_count(1)
    page.locator("#query").fill("bio")
    page.locator("#recall").click()
    page.wait_for_timeout(500)
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert page.locator("main img, main script, main b").count() == 0
    console.shot("07-hostile-text.png")


def test_every_error_shows_the_api_code_and_message(console: Console, stack: RunningStack) -> None:
    page = console.page
    # A token the API refuses: the page shows the API's code and message.
    console.open()
    page.locator("#token").fill("not-a-token")
    page.locator("#token-sign-in").click()
    page.locator("#subject").fill("console-err")
    page.locator("#subject").press("Enter")
    refused = ApiClient(stack.url, "not-a-token").call("GET", "/v1/subjects/x/memories")
    assert refused.status == 401
    error = refused.body["error"]
    expect(console.alert()).to_have_attribute("data-code", error["code"])
    expect(console.alert()).to_contain_text(f"{error['code']}: {error['message']}")
    page.locator("#sign-out").click()

    # A token without the delete scope: forgetting is the API's forbidden, with its words.
    console.dev_sign_in("console-err", scopes="memory:read")
    page.locator("#forget").click()
    page.locator("#forget-yes").click()
    expect(console.alert()).to_have_attribute("data-code", "forbidden")
    expect(console.alert()).to_contain_text("this operation needs the scope 'memory:delete'")
    console.shot("08-error.png")

    # The dev sign-in without the key the stack printed is refused, clearly.
    context = page.context
    fresh = context.new_page()
    other = Console(fresh, stack)
    other.open(console.url.split("#", 1)[0])
    expect(fresh.locator("#dev-note")).to_contain_text("sign-in key")
    fresh.locator("#dev-sign-in").click()
    expect(other.alert()).to_contain_text("forbidden: the sign-in key is missing or wrong")
    for text in (page.content(), fresh.content()):
        assert "Traceback" not in text and "at async" not in text
    console.assert_clean()
    other.assert_clean()


def test_keyboard_only_at_a_phone_width(browser: Browser, stack: RunningStack) -> None:
    subject = "console-phone"
    write(
        stack.client(subject=subject),
        subject,
        "phone-1",
        canonical_key="units",
        content="Uses metric units for everything, including recipes and cycling distances",
        tags=["preference"],
    )
    context = browser.new_context(viewport={"width": 390, "height": 844}, has_touch=True)
    console = Console(context.new_page(), stack)
    page = console.page
    console.open()
    page.locator("#dev-form input[name=subject]").fill(subject)
    page.keyboard.press("Enter")  # submits the sign-in form
    expect(page.locator("#app")).to_be_visible()
    expect(page.locator("#memories tbody tr")).to_have_count(1)

    # Tab through the page to the row's Details button and open it with Enter.
    for _ in range(80):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.classList.contains('open')"):
            break
    else:
        raise AssertionError("Tab never reached the Details button")
    page.keyboard.press("Enter")
    expect(page.locator("#detail")).to_be_visible()
    expect(page.locator("#history tbody tr")).to_have_count(1)
    width = page.evaluate("document.documentElement.scrollWidth")
    wider = page.evaluate(
        """() => [...document.querySelectorAll('body *')]
          .filter(e => e.getBoundingClientRect().right > 390)
          .map(e => `${e.tagName}#${e.id}.${e.className}`)"""
    )
    assert width <= 390, f"the page is {width}px wide at a 390px viewport: {wider}"
    console.shot("09-phone.png")
    console.assert_clean()
    context.close()


def test_operators_read_a_session_and_a_run(console: Console, stack: RunningStack) -> None:
    subject = "console-ops"
    api = stack.client(subject=subject, scope=ALL_SCOPES)
    base = f"/v1/subjects/{subject}/sessions/s-1/messages"
    for n, (role, text) in enumerate([("user", "Book a table for two"), ("assistant", "Done")]):
        sent = api.call("POST", base, body={"request_id": f"m-{n}", "role": role, "content": text})
        assert sent.status == 201, sent.body
    created = api.call("PUT", "/v1/runs/r-1", body={"subject_id": subject, "plan_version": "p1"})
    assert created.status == 201, created.body
    for version, status in ((1, "RUNNING"), (2, "WAITING_APPROVAL")):
        advanced = api.call(
            "POST",
            "/v1/runs/r-1/checkpoints",
            body={
                "expected_version": version,
                "status": status,
                "step": "book",
                "state": {"table": 2},
                "pending_approvals": ["ap-1"] if status == "WAITING_APPROVAL" else [],
            },
        )
        assert advanced.status == 200, advanced.body
    op = api.call(
        "PUT",
        "/v1/runs/r-1/operations/op-1",
        body={"status": "COMMITTED", "result_ref": "booking:77"},
    )
    assert op.status == 200, op.body
    event = api.call(
        "POST",
        "/v1/runs/r-1/events",
        body={"event_id": "ev-1", "type": "approval.granted", "approval_id": "ap-1"},
    )
    assert event.status == 200 and event.body["applied"], event.body
    # An event that changes nothing; its id is hostile text, its payload never stored.
    hostile_id = '<img src=x onerror="window.__pwned=5">'
    noted = api.call(
        "POST",
        "/v1/runs/r-1/events",
        body={"event_id": hostile_id, "type": "crm.note", "payload": {"secret": "zqpayload"}},
    )
    assert noted.status == 200 and not noted.body["applied"], noted.body

    console.dev_sign_in(subject)
    page = console.page
    page.get_by_role("button", name="Sessions").click()
    page.locator("#session-id").fill("s-1")
    page.locator("#session-id").press("Enter")
    expect(page.locator("#session tbody tr")).to_have_count(2)
    expect(page.locator("#session")).to_contain_text("Book a table for two")
    expect(page.locator("#session-clocks")).to_contain_text("Idle expiry")
    console.shot("10-session.png")

    page.get_by_role("button", name="Runs").click()
    page.locator("#run-id").fill("r-1")
    page.locator("#run-id").press("Enter")
    expect(page.locator("#run-head")).to_contain_text("RUNNING")
    history = page.locator("#run-history tbody tr")
    expect(history).to_have_count(4)
    expect(page.locator("#run tr[data-version='3']")).to_contain_text("WAITING_APPROVAL")
    expect(page.locator("#run tr[data-version='4']")).to_contain_text("RUNNING")
    expect(page.locator("#run")).to_contain_text("booking:77")
    # The run's events, by event id: id, type, received time and effect, as text only.
    events = page.locator("#run-events tbody tr")
    expect(events).to_have_count(2)
    assert [r.get_attribute("data-event-id") for r in events.all()] == [hostile_id, "ev-1"]
    first, approval = events.nth(0), events.nth(1)
    expect(console.cell(first, "Event")).to_have_text(hostile_id)
    expect(console.cell(first, "Type")).to_have_text("crm.note")
    expect(console.cell(first, "Effect")).to_have_text("recorded, changed nothing (at version 4)")
    expect(console.cell(approval, "Type")).to_have_text("approval.granted")
    expect(console.cell(approval, "Effect")).to_have_text("applied: wrote version 4")
    expect(console.cell(approval, "Received")).to_contain_text("Z")
    expect(page.locator("#run-events-more")).to_be_hidden()
    expect(page.locator("#run")).not_to_contain_text("zqpayload")
    expect(page.locator("#run")).not_to_contain_text("does not list")
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert page.locator("#run img").count() == 0
    console.shot("11-run.png")
    console.assert_clean()


def test_a_runs_events_page_on_in_the_console(console: Console, stack: RunningStack) -> None:
    subject = "console-events"
    api = stack.client(subject=subject, scope=ALL_SCOPES)
    created = api.call("PUT", "/v1/runs/r-2", body={"subject_id": subject, "plan_version": "p1"})
    assert created.status == 201, created.body
    for n in range(27):
        sent = api.call(
            "POST", "/v1/runs/r-2/events", body={"event_id": f"ev-{n:02d}", "type": "ci.passed"}
        )
        assert sent.status == 200, sent.body

    console.dev_sign_in(subject)
    page = console.page
    page.get_by_role("button", name="Runs").click()
    page.locator("#run-id").fill("r-2")
    page.locator("#run-id").press("Enter")
    rows = page.locator("#run-events tbody tr")
    expect(rows).to_have_count(25)
    expect(page.locator("#run-events-note")).to_contain_text("25 event(s) so far")
    page.locator("#run-events-more").click()
    expect(rows).to_have_count(27)
    expect(page.locator("#run-events-more")).to_be_hidden()
    expect(page.locator("#run-events-note")).to_contain_text("27 event(s), by event id")
    expect(rows.last).to_have_attribute("data-event-id", "ev-26")
    console.shot("12-run-events-paged.png")
    console.assert_clean()


def test_the_console_is_served_with_a_strict_content_security_policy(stack: RunningStack) -> None:
    import urllib.request

    with urllib.request.urlopen(f"{stack.url}/console/", timeout=10) as answer:
        csp = answer.headers["Content-Security-Policy"]
        page = answer.read().decode()
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp and "unsafe-eval" not in csp
    assert "frame-ancestors 'none'" in csp
    # No inline script or handler for the policy to have to allow.
    assert not re.search(r"<script(?![^>]*\bsrc=)[^>]*>", page)
    assert not re.search(r"\son[a-z]+\s*=", page)
