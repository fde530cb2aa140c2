"""The memory inspector in a real headless Chromium (Debian's ``chromium`` and
``chromium-driver``, driven by selenium; nothing is downloaded): a person logs in with
a key, browses, searches, reads a fact's history, corrects and forgets, and the
change is there through ``Memory``. One browser for the module, the tests in order.

With ``ANAMNESIS_SCREENSHOTS=1`` each view is saved to docs/screenshots/ (the set
committed there was taken so); without it nothing is written.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("jinja2", reason="the inspector needs the server extras")
pytest.importorskip("selenium", reason="the browser tests need the dev extras")

from inspector_fixtures import BOB_SECRET, HOSTILE, Inspected, start  # noqa: E402
from selenium import webdriver  # noqa: E402
from selenium.common.exceptions import (  # noqa: E402
    NoAlertPresentException,
    StaleElementReferenceException,
    WebDriverException,
)
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.remote.webdriver import WebDriver  # noqa: E402
from selenium.webdriver.remote.webelement import WebElement  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

from anamnesis.errors import NotFoundError  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
SCREENSHOTS = Path(__file__).parent.parent.parent / "docs" / "screenshots"

if not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()):
    if os.environ.get("CI"):
        raise RuntimeError("CI runs the browser tests: apt-get install chromium chromium-driver")
    pytest.skip("apt-get install chromium chromium-driver to run these", allow_module_level=True)


@pytest.fixture(scope="module")
def inspected(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Inspected]:
    running = start(tmp_path_factory.mktemp("inspector-browser"))
    yield running
    running.server.stop()


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebDriver]:
    profile = tmp_path_factory.mktemp("chromium-profile")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    for argument in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--window-size=1200,900",
        f"--user-data-dir={profile}",
    ):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.implicitly_wait(5)
    yield driver
    driver.quit()
    shutil.rmtree(profile, ignore_errors=True)


def shoot(browser: WebDriver, name: str) -> None:
    """Save the view as docs/screenshots/<name>.png when asked to."""
    if os.environ.get("ANAMNESIS_SCREENSHOTS"):
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        height = browser.execute_script("return document.body.scrollHeight")
        browser.set_window_size(1200, min(max(int(height) + 200, 600), 2400))
        browser.save_screenshot(str(SCREENSHOTS / f"{name}.png"))
        browser.set_window_size(1200, 900)


def log_in(browser: WebDriver, url: str, key: str) -> None:
    browser.get(f"{url}/ui/login")
    shoot(browser, "login")
    browser.find_element(By.ID, "key").send_keys(key)
    go(browser, browser.find_element(By.ID, "login"))


def go(browser: WebDriver, element: WebElement) -> None:
    """Click ``element`` and wait for the next page to load: the old page gone, the new
    one complete (a form's answer redirects, and the next lookup must not meet the page
    in between)."""
    page = browser.find_element(By.TAG_NAME, "html")
    element.click()
    WebDriverWait(browser, 10).until(lambda _: gone(page))
    WebDriverWait(browser, 10).until(
        lambda b: b.execute_script("return document.readyState") == "complete"
    )


def gone(element: WebElement) -> bool:
    """Whether ``element``'s page has been replaced. Mid-navigation, chromedriver may
    answer for a node of the old page with "does not belong to the document" rather
    than with a stale reference."""
    try:
        element.is_enabled()
    except (StaleElementReferenceException, WebDriverException):
        return True
    return False


def no_alert(browser: WebDriver) -> bool:
    try:
        alert = browser.switch_to.alert
    except NoAlertPresentException:
        return True
    return alert is None


def text(browser: WebDriver) -> str:
    return browser.find_element(By.TAG_NAME, "main").text


def test_logging_in_with_a_user_key_shows_that_users_sessions(
    browser: WebDriver, inspected: Inspected
) -> None:
    log_in(browser, inspected.server.url, inspected.ana)
    assert browser.current_url.endswith("/ui/scope")
    sessions = [a.text for a in browser.find_elements(By.CSS_SELECTOR, "a.session-link")]
    assert sessions == ["trip-2024", "move"]
    assert "User ana" in text(browser)
    shoot(browser, "scope")


def test_a_session_is_a_dated_timeline_of_its_turns(
    browser: WebDriver, inspected: Inspected
) -> None:
    go(browser, browser.find_element(By.LINK_TEXT, "move"))
    days = [h.text for h in browser.find_elements(By.CSS_SELECTOR, ".day h2")]
    assert days == ["Monday 02 September 2024", "Tuesday 03 September 2024"]
    turns = browser.find_elements(By.CSS_SELECTOR, "li.turn .memory-text")
    assert [t.text for t in turns][:2] == [
        "I live in Porto now, I moved last month.",
        "My dog is called Biscuit.",
    ]
    assert "Summary" in text(browser)
    assert "gate: admitted" in text(browser)
    shoot(browser, "session")


def test_a_hostile_memory_renders_as_text(browser: WebDriver, inspected: Inspected) -> None:
    turns = [t.text for t in browser.find_elements(By.CSS_SELECTOR, "li.turn .memory-text")]
    assert HOSTILE in turns
    assert no_alert(browser)
    assert browser.find_elements(By.CSS_SELECTOR, "main img") == []
    assert browser.find_elements(By.CSS_SELECTOR, "main script") == []


def test_search_draws_which_channels_found_each_hit(
    browser: WebDriver, inspected: Inspected
) -> None:
    go(browser, browser.find_element(By.LINK_TEXT, "Search"))
    browser.find_element(By.ID, "q").send_keys("what is the dog called?")
    go(browser, browser.find_element(By.ID, "go"))
    first = browser.find_element(By.ID, "hit-1")
    assert "My dog is called Biscuit." in first.text
    found = first.find_elements(By.CSS_SELECTOR, "table.channels tr.found")
    assert {row.get_attribute("data-channel") for row in found} >= {"lexical", "dense"}
    assert "Found by" in first.find_element(By.CLASS_NAME, "found-by").text
    analysis = browser.find_element(By.ID, "analysis").text
    assert "terms" in analysis and "dog" in analysis
    shoot(browser, "search")


def test_a_facts_history_shows_the_replaced_value_and_both_times(
    browser: WebDriver, inspected: Inspected
) -> None:
    go(browser, browser.find_element(By.LINK_TEXT, "Facts"))
    shoot(browser, "facts")
    go(browser, browser.find_element(By.CSS_SELECTOR, "a.fact-link"))
    rows = browser.find_elements(By.CSS_SELECTOR, "#history tbody tr")
    assert [r.get_attribute("class") for r in rows] == ["replaced", "current"]
    assert rows[0].find_element(By.TAG_NAME, "del").text == "Lisbon"
    assert "superseded" in rows[0].text and "Porto" in rows[1].text
    assert "2024-03-01" in rows[0].text  # when it became true, beside when we learned it
    go(browser, rows[0].find_element(By.CSS_SELECTOR, "a.episode-link"))
    assert "I live in Lisbon" in browser.find_element(By.ID, "content").text
    browser.back()
    assert browser.find_elements(By.CSS_SELECTOR, "figure.axis svg rect.held")
    shoot(browser, "fact-history")


def test_summaries_and_profiles_link_to_their_turns(
    browser: WebDriver, inspected: Inspected
) -> None:
    go(browser, browser.find_element(By.LINK_TEXT, "Summaries & profiles"))
    assert "lives in Porto" in text(browser)
    shoot(browser, "derived")
    go(browser, browser.find_element(By.CSS_SELECTOR, ".summary a.episode-link"))
    assert browser.find_element(By.ID, "content").text


def test_correcting_a_memory_keeps_the_old_version(
    browser: WebDriver, inspected: Inspected
) -> None:
    with inspected.memory() as memory:
        dog = next(e for e in memory.get_all(user_id="ana").items if "Biscuit" in e.content)
    browser.get(f"{inspected.server.url}/ui/episode?id={dog.id}")
    editor = browser.find_element(By.ID, "new-content")
    editor.clear()
    editor.send_keys("My dog is called Pretzel.")
    go(browser, browser.find_element(By.ID, "save"))
    versions = browser.find_elements(By.CSS_SELECTOR, "#versions li")
    assert [v.get_attribute("class") for v in versions] == ["replaced", "current"]
    assert versions[0].find_element(By.TAG_NAME, "del").text == "My dog is called Biscuit."
    shoot(browser, "episode")
    with inspected.memory() as memory:
        assert memory.get(dog.id, user_id="ana").content == "My dog is called Pretzel."
        assert [v.content for v in memory.history(dog.id, user_id="ana")] == [
            "My dog is called Biscuit.",
            "My dog is called Pretzel.",
        ]


def test_archiving_and_restoring_a_memory(browser: WebDriver, inspected: Inspected) -> None:
    go(browser, browser.find_element(By.ID, "archive"))
    assert browser.find_element(By.ID, "outcome").text == "Archived 1 episode"
    with inspected.memory() as memory:
        hot = [e.content for e in memory.get_all(user_id="ana").items]
        assert "My dog is called Pretzel." not in hot
    go(browser, browser.find_element(By.ID, "restore"))
    assert browser.find_element(By.ID, "outcome").text == "Restored 1 episode"
    with inspected.memory() as memory:
        hot = [e.content for e in memory.get_all(user_id="ana").items]
        assert "My dog is called Pretzel." in hot


def test_forgetting_shows_a_preview_then_erases_on_confirmation(
    browser: WebDriver, inspected: Inspected
) -> None:
    with inspected.memory() as memory:
        hostile = next(e for e in memory.get_all(user_id="ana").items if e.content == HOSTILE)
    browser.get(f"{inspected.server.url}/ui/episode?id={hostile.id}")
    go(browser, browser.find_element(By.ID, "forget"))
    assert browser.find_element(By.ID, "outcome").text == "Forget 1 episode?"
    assert hostile.id in text(browser)
    shoot(browser, "forget-preview")
    with inspected.memory() as memory:
        assert memory.get(hostile.id, user_id="ana").id == hostile.id  # a preview only
    browser.find_element(By.ID, "confirm").click()
    go(browser, browser.find_element(By.ID, "forget-now"))
    assert browser.find_element(By.ID, "outcome").text == "Forgot 1 episode"
    with inspected.memory() as memory, pytest.raises(NotFoundError):
        memory.get(hostile.id, user_id="ana")


def test_health_shows_the_capabilities(browser: WebDriver, inspected: Inspected) -> None:
    go(browser, browser.find_element(By.LINK_TEXT, "Health"))
    assert browser.find_element(By.ID, "store-health").text == "Store health: ok"
    assert "search_channels" in text(browser)
    shoot(browser, "health")


def test_another_users_key_never_sees_the_first_users_memory(
    browser: WebDriver, inspected: Inspected
) -> None:
    go(browser, browser.find_element(By.CSS_SELECTOR, "form.logout button"))
    assert browser.current_url.endswith("/ui/login")
    log_in(browser, inspected.server.url, inspected.bob)
    assert [a.text for a in browser.find_elements(By.CSS_SELECTOR, "a.session-link")] == ["b1"]
    browser.get(f"{inspected.server.url}/ui/session?user=ana&session=move")
    assert "PermissionDeniedError" in text(browser)
    assert "Porto" not in browser.page_source
    browser.get(f"{inspected.server.url}/ui/search?q=where+does+she+live")
    assert "Porto" not in browser.page_source and "Lisbon" not in browser.page_source
    browser.get(f"{inspected.server.url}/ui/session?session=b1")
    assert BOB_SECRET in text(browser)


def test_no_page_broke_the_content_security_policy(browser: WebDriver) -> None:
    logged = [entry["message"] for entry in browser.get_log("browser")]  # type: ignore[attr-defined]
    assert [m for m in logged if "Content Security Policy" in m] == []
