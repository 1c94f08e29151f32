"""Every documented way of starting the web process reads ``gunicorn.conf.py``, whatever
directory it is started from.

gunicorn reads ``./gunicorn.conf.py`` only when nothing names a config: a web process
started from another directory (a systemd unit, a supervisor, a shell elsewhere) silently
ran without it, and took 3-7 s to stop on SIGTERM instead of about one
(tests/deploy/test_gunicorn_shutdown.py). The documented commands now name the file
(``-c``); a path that does not exist makes gunicorn refuse to start instead.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy.servers import PRODUCTION, ROOT, WebProcess, shared_database_url

# How --print-config shows the hook gunicorn.conf.py defines (gunicorn's own default
# shows as <PostWorkerInit.post_worker_init()>).
OUR_HOOK = re.compile(r"^post_worker_init\s+= <post_worker_init\(\)>$", re.M)


def _compose_web() -> list[str]:
    """The gunicorn command of docker-compose.yml's web service, the image's /app being
    this checkout."""
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    command = compose["services"]["web"]["command"]
    found = re.search(r"gunicorn [^\"&]*", command)
    assert found, command
    return shlex.split(found.group(0).replace("/app/", f"{ROOT}/"))


def _readme_commands() -> list[list[str]]:
    """Every gunicorn command line in README.md's shell blocks (the words from gunicorn on)."""
    commands = []
    for block in re.findall(r"```sh\n(.*?)```", (ROOT / "README.md").read_text(), re.S):
        for line in block.splitlines():
            words = shlex.split(line.split("#", 1)[0]) if "gunicorn" in line else []
            at = next((i for i, w in enumerate(words) if w.endswith("gunicorn")), None)
            if at is not None:
                commands.append(["gunicorn", *words[at + 1 :]])
    return commands


def _runnable(words: list[str]) -> list[str]:
    """A documented gunicorn command as this test runs it: this virtualenv's gunicorn, the
    image's /app being this checkout."""
    return [sys.executable, "-m", "gunicorn"] + [w.replace("/app/", f"{ROOT}/") for w in words[1:]]


def test_the_documented_commands_name_the_config_file() -> None:
    commands = [_compose_web(), *_readme_commands()]
    assert len(commands) >= 3, commands  # compose's web, the README's two
    for words in commands:
        assert "-c" in words, f"{shlex.join(words)} does not name gunicorn.conf.py"
        assert words[words.index("-c") + 1].endswith("gunicorn.conf.py"), words


def test_the_documented_commands_read_the_config_from_another_directory(
    tmp_path: Path, collected_static: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {
        **os.environ,
        **PRODUCTION,
        "DATABASE_URL": "postgres://nobody@127.0.0.1:1/none",
        "PYTHONPATH": str(ROOT),  # the project importable from anywhere, as in the image
        "FIELDOPS_STATIC_ROOT": str(collected_static),  # --print-config loads the application
    }
    for words in [_compose_web(), *_readme_commands()]:
        # The README's development command is run from the repository's root (its
        # .venv/bin/gunicorn says so); the deployment's from anywhere.
        config = words[words.index("-c") + 1] if "-c" in words else ""
        cwd = ROOT if config == "gunicorn.conf.py" else elsewhere
        done = subprocess.run(
            [*_runnable(words), "--print-config"],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, (words, done.stderr[-2000:])
        assert OUR_HOOK.search(done.stdout), (words, done.stdout[-3000:])


@pytest.mark.postgres
def test_the_compose_web_command_started_elsewhere_freezes_and_exits_cleanly(
    transactional_db: Any, tmp_path: Path, collected_static: Path
) -> None:
    """The web service's command, started outside the repository: its workers run
    gunicorn.conf.py's hook (they log it) and SIGTERM stops it cleanly."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    argv = _runnable(_compose_web())
    argv[argv.index("--bind") + 1] = "127.0.0.1:{port}"
    argv[argv.index("--workers") + 1] = "2"
    web = WebProcess(
        argv,
        {
            **PRODUCTION,
            "DATABASE_URL": shared_database_url(),
            "PYTHONPATH": str(ROOT),
            "FIELDOPS_STATIC_ROOT": str(collected_static),
        },
        tmp_path / "web.log",
        cwd=elsewhere,
    ).start(ready="/healthz")
    assert web.process is not None
    try:
        os.kill(web.process.pid, signal.SIGTERM)
        web.process.wait(timeout=40)
    finally:
        web.stop()
    assert web.process.returncode == 0, web.log()[-3000:]
    assert web.log().count("froze the project's objects") == 2, web.log()[-3000:]


@pytest.mark.postgres
def test_the_web_process_opens_no_control_socket(
    transactional_db: Any, tmp_path: Path, collected_static: Path
) -> None:
    """gunicorn 24+ opens a control socket by default, at one path per user
    (``$XDG_RUNTIME_DIR/gunicorn.ctl`` or ``~/.gunicorn/gunicorn.ctl``): every web process
    of that user on the machine binds the same path, the last one started takes it from
    the others, and whoever can reach it can stop or reload that server's workers.
    FieldOps has no use for it; gunicorn.conf.py turns it off."""
    home = tmp_path / "home"
    home.mkdir()
    argv = _runnable(_compose_web())
    argv[argv.index("--bind") + 1] = "127.0.0.1:{port}"
    argv[argv.index("--workers") + 1] = "1"
    env = {
        **PRODUCTION,
        "DATABASE_URL": shared_database_url(),
        "PYTHONPATH": str(ROOT),
        "FIELDOPS_STATIC_ROOT": str(collected_static),
        "HOME": str(home),
        "XDG_RUNTIME_DIR": str(home / "run"),
    }
    (home / "run").mkdir()
    web = WebProcess(argv, env, tmp_path / "web.log", cwd=tmp_path).start(ready="/healthz")
    try:
        sockets = [str(p) for p in home.rglob("*") if p.is_socket()]
    finally:
        web.stop()
    assert sockets == [], web.log()[-3000:]


def _printed_workers(extra: list[str], env: dict[str, str], cwd: Path) -> str:
    """The worker count gunicorn would start the README's web command with."""
    words = _runnable(_readme_commands()[-1]) + extra + ["--print-config"]
    done = subprocess.run(
        words, cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    found = re.search(r"^workers\s+= (\S+)$", done.stdout, re.M)
    return found.group(1) if found else f"(exit {done.returncode}) {done.stderr[-500:]}"


def test_the_web_process_starts_several_workers_unless_told_otherwise(
    collected_static: Path,
) -> None:
    """gunicorn alone starts one sync worker, and one request waiting on a row lock then
    stalls every user: gunicorn.conf.py starts two per CPU and one (at most 9), or
    ``WEB_CONCURRENCY``; ``--workers`` still wins."""
    env = {
        **os.environ,
        **PRODUCTION,
        "DATABASE_URL": "postgres://nobody@127.0.0.1:1/none",
        "FIELDOPS_STATIC_ROOT": str(collected_static),
    }
    env.pop("WEB_CONCURRENCY", None)
    expected = min(2 * (os.cpu_count() or 1) + 1, 9)
    assert _printed_workers([], env, ROOT) == str(expected)
    assert _printed_workers([], {**env, "WEB_CONCURRENCY": "4"}, ROOT) == "4"
    assert _printed_workers(["--workers", "2"], {**env, "WEB_CONCURRENCY": "4"}, ROOT) == "2"
