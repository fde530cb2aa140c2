"""The memory inspector (``/ui``) over plain HTTP: who may see what, CSRF, escaping,
and the security headers. tests/server/test_inspector_browser.py drives it in Chromium."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import markupsafe
import pytest

pytest.importorskip("jinja2", reason="the inspector needs the server extras")

from inspector_fixtures import (  # noqa: E402
    BOB_SECRET,
    HOSTILE,
    Inspected,
    csrf_of,
    logged_in,
    seed,
    start,
)

from anamnesis.server.keys import KeyStore  # noqa: E402


@pytest.fixture(scope="module")
def inspected(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Inspected]:
    running = start(tmp_path_factory.mktemp("inspector"))
    yield running
    running.server.stop()


def test_a_page_without_a_login_goes_to_the_login_form(inspected: Inspected) -> None:
    answer = httpx.get(f"{inspected.server.url}/ui/scope?user=ana")
    assert answer.status_code == 303
    assert answer.headers["location"] == "/ui/login"


def test_a_wrong_key_is_refused_at_the_login(inspected: Inspected) -> None:
    with httpx.Client(base_url=inspected.server.url) as client:
        token = csrf_of(client.get("/ui/login").text)
        answer = client.post("/ui/login", data={"key": "anm_nope_nope", "csrf": token})
        assert answer.status_code == 401
        assert "not valid" in answer.text
        assert "anamnesis_key" not in client.cookies


def test_the_key_cookie_is_http_only_and_same_site_strict(inspected: Inspected) -> None:
    with httpx.Client(base_url=inspected.server.url) as client:
        token = csrf_of(client.get("/ui/login").text)
        answer = client.post("/ui/login", data={"key": inspected.ana, "csrf": token})
        cookie = next(
            v for k, v in answer.headers.multi_items() if k == "set-cookie" and "anamnesis_key" in v
        )
        assert "HttpOnly" in cookie
        assert "SameSite=strict" in cookie or "SameSite=Strict" in cookie
        assert "Path=/ui" in cookie


def test_every_page_forbids_scripts_and_framing(inspected: Inspected) -> None:
    with logged_in(inspected.server.url, inspected.ana) as client:
        for path in ("/ui/login", "/ui/scope", "/ui/static/ui.css", "/ui/nowhere"):
            headers = client.get(path).headers
            policy = headers["content-security-policy"]
            assert "default-src 'self'" in policy
            assert "script-src 'none'" in policy
            assert headers["x-frame-options"] == "DENY"
            assert headers["cache-control"] == "no-store"


def test_a_hostile_memory_is_sent_as_text(inspected: Inspected) -> None:
    with logged_in(inspected.server.url, inspected.ana) as client:
        for path in ("/ui/session?session=move", "/ui/search?q=alert+script+onerror"):
            page = client.get(path).text
            assert str(markupsafe.escape(HOSTILE)) in page
            assert "<script" not in page
            assert "<img src=x" not in page


def test_a_user_key_never_shows_another_users_memory(inspected: Inspected) -> None:
    with logged_in(inspected.server.url, inspected.ana) as client:
        assert client.get("/ui/scope?user=bob").status_code == 403
        assert client.get("/ui/session?user=bob&session=b1").status_code == 403
        search = client.get("/ui/search?q=vault+code")
        assert BOB_SECRET not in search.text
        with inspected.memory() as memory:
            bobs = memory.get_all(user_id="bob").items[0].id
        episode = client.get(f"/ui/episode?id={bobs}")
        assert episode.status_code == 404
        assert BOB_SECRET not in episode.text
        home = client.get("/ui/", follow_redirects=True)
        assert "bob" not in re.sub(r"<[^>]+>", " ", home.text).split()


def test_an_admin_key_reaches_every_user(inspected: Inspected) -> None:
    with logged_in(inspected.server.url, inspected.admin) as client:
        home = client.get("/ui/")
        assert 'href="/ui/scope?user=bob"' in home.text
        assert BOB_SECRET in client.get("/ui/session?user=bob&session=b1").text


def test_a_form_post_without_its_csrf_token_changes_nothing(inspected: Inspected) -> None:
    with inspected.memory() as memory:
        target = memory.get_all(user_id="ana", session_id="trip-2024").items[0]
    with logged_in(inspected.server.url, inspected.ana) as client:
        for token in (None, "0" * 64):
            data = {"id": target.id, "user": "ana", "content": "forged"}
            if token is not None:
                data["csrf"] = token
            answer = client.post("/ui/episode/update", data=data)
            assert answer.status_code == 403
            assert "security token" in answer.text
            confirm = {"id": target.id, "user": "ana", "confirm": "yes", **data}
            assert client.post("/ui/forget", data=confirm).status_code == 403
    # A token from another browser (another nonce) is refused too.
    with logged_in(inspected.server.url, inspected.ana) as other:
        stolen = csrf_of(other.get(f"/ui/episode?id={target.id}").text)
    with logged_in(inspected.server.url, inspected.ana) as client:
        answer = client.post(
            "/ui/episode/update",
            data={"id": target.id, "user": "ana", "content": "forged", "csrf": stolen},
        )
        assert answer.status_code == 403
    with inspected.memory() as memory:
        assert memory.get(target.id, user_id="ana").content == target.content
        assert len(memory.history(target.id, user_id="ana")) == 1


def test_a_revoked_key_stops_at_the_next_page(inspected: Inspected) -> None:
    keys = KeyStore(inspected.server.keys.path)  # type: ignore[union-attr]
    key, secret = keys.create("brief", user_id="ana")
    with logged_in(inspected.server.url, secret) as client:
        assert client.get("/ui/scope").status_code == 200
        keys.revoke(key.id)
        answer = client.get("/ui/scope")
        assert answer.status_code == 303
        assert answer.headers["location"] == "/ui/login"
    keys.close()


def test_forgetting_needs_the_confirmation_box(inspected: Inspected) -> None:
    with inspected.memory() as memory:
        target = memory.get_all(user_id="ana", session_id="trip-2024").items[1]
    with logged_in(inspected.server.url, inspected.ana) as client:
        token = csrf_of(client.get(f"/ui/episode?id={target.id}").text)
        answer = client.post("/ui/forget", data={"id": target.id, "user": "ana", "csrf": token})
        assert answer.status_code == 400
        assert "tick" in answer.text
    with inspected.memory() as memory:
        assert memory.get(target.id, user_id="ana").id == target.id


def test_an_unknown_path_is_an_html_404(inspected: Inspected) -> None:
    with logged_in(inspected.server.url, inspected.ana) as client:
        answer = client.get("/ui/nowhere")
        assert answer.status_code == 404
        assert answer.headers["content-type"].startswith("text/html")


def test_serve_open_logs_a_browser_in_once_through_a_link(tmp_path: Path) -> None:
    seed(tmp_path / "m.db")
    opener = tmp_path / "browser.sh"  # stands in for the browser: notes the URL it got
    opener.write_text(f'#!/bin/sh\necho "$1" > {tmp_path / "opened"}\n')
    opener.chmod(0o755)
    command = [sys.executable, "-m", "anamnesis", "--path", str(tmp_path / "m.db")]
    command += ["--embedder", "edge", "serve", "--open", "--port", "0"]
    command += ["--keys", str(tmp_path / "keys.db")]
    env = {**os.environ, "BROWSER": str(opener), "PYTHONPATH": str(Path.cwd())}
    server = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)
    try:
        link = _link_printed(server)
        assert link.startswith("http://127.0.0.1:") and "/ui/login?once=" in link
        _wait_for(tmp_path / "opened")
        assert (tmp_path / "opened").read_text().strip() == link
        with httpx.Client(follow_redirects=True, timeout=30) as browser:
            home = browser.get(link)
            assert home.status_code == 200
            assert 'href="/ui/scope?user=bob"' not in home.text  # no key file users
            assert "The store" in home.text and "(admin)" in home.text
        with httpx.Client(timeout=30) as stranger:
            assert stranger.get(link).status_code == 401  # the link works once
            base = link.split("/ui/")[0]
            assert stranger.get(f"{base}/ui/scope?user=ana").status_code == 303
            assert stranger.get(f"{base}/v1/stats").status_code == 401
    finally:
        server.terminate()  # the process this test started
        server.wait(timeout=30)


def test_serve_open_refuses_an_address_other_than_loopback(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "anamnesis", "--path", str(tmp_path / "m.db")]
    command += ["serve", "--open", "--host", "0.0.0.0", "--keys", str(tmp_path / "k.db")]
    KeyStore(tmp_path / "k.db").create("someone", user_id="ana")
    env = {**os.environ, "PYTHONPATH": str(Path.cwd())}
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert "loopback" in done.stderr


def _link_printed(server: subprocess.Popen[str]) -> str:
    assert server.stderr is not None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = server.stderr.readline()
        if not line and server.poll() is not None:
            break
        if "logged in once:" in line:
            return line.rsplit(" ", 1)[-1].strip()
    raise AssertionError("serve --open printed no login link")


def _wait_for(path: Path) -> None:
    deadline = time.monotonic() + 30
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.05)


def test_an_agent_key_sees_its_agent_only(inspected: Inspected) -> None:
    keys = KeyStore(inspected.server.keys.path)  # type: ignore[union-attr]
    _, helper = keys.create("helper", user_id="ana", agent_id="helper")
    keys.close()
    with logged_in(inspected.server.url, helper) as client:
        assert "Porto" not in client.get("/ui/session?session=move").text  # ana's, no agent
        assert "Porto" not in client.get("/ui/search?q=where+do+I+live").text
        assert client.get("/ui/scope?agent=other").status_code == 403
        assert client.get("/ui/scope").status_code == 200


def test_the_render_benchmark_times_every_view(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from anamnesis.bench.cli import bench

    data = Path(__file__).parent.parent / "fixtures" / "bench" / "locomo_smoke.json.gz"
    arguments = ["inspector", "--data", str(data), "--store", str(tmp_path / "s.db")]
    arguments += ["--episodes", "120", "--embedder", "edge", "--renders", "2"]
    result = CliRunner().invoke(bench, arguments, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    rows = [line for line in result.output.splitlines() if line.startswith("| ")][1:]
    assert len(rows) == 7
    assert all(float(row.split("|")[2]) > 0 for row in rows)


def test_forgetting_by_text_previews_the_count_then_erases_those(inspected: Inspected) -> None:
    with inspected.memory() as memory:
        memory.add("the parcel code is XK-77", user_id="ana", session_id="errands")
        memory.add("reminder: parcel XK-77 at the desk", user_id="ana", session_id="errands")
    with logged_in(inspected.server.url, inspected.ana) as client:
        token = csrf_of(client.get("/ui/scope").text)
        selection = {"user": "ana", "containing": "XK-77", "csrf": token}
        preview = client.post("/ui/forget/preview", data=selection)
        assert "Forget 2 episodes?" in preview.text
        with inspected.memory() as memory:
            assert len(memory.get_all(user_id="ana", session_id="errands").items) == 2
        done = client.post("/ui/forget", data={**selection, "confirm": "yes"})
        assert "Forgot 2 episodes" in done.text
    with inspected.memory() as memory:
        assert memory.get_all(user_id="ana", session_id="errands").items == []
