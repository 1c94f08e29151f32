"""docker-compose.yml deploys the production settings: secrets from .env only (the
repository ships .env.example), no demo users, the web port on 127.0.0.1 unless changed,
and the two database roles (migrations as the owner, everything else as the app role).

The file is parsed as Compose would read it, with ``${VAR:-default}`` and
``${VAR:?error}`` interpolated from an environment."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
COMPOSE_TEXT = (ROOT / "docker-compose.yml").read_text()
COMPOSE = yaml.safe_load(COMPOSE_TEXT)
SERVICES: dict[str, Any] = COMPOSE["services"]
APP_SERVICES = sorted(name for name, s in SERVICES.items() if s.get("build"))
EXAMPLE = dict(
    line.split("=", 1)
    for line in (ROOT / ".env.example").read_text().splitlines()
    if line.strip() and not line.lstrip().startswith("#")
)
VARIABLE = re.compile(r"\$\{(\w+)(?::([-?])([^}]*))?\}")
SECRETS = (
    "DJANGO_SECRET_KEY",
    "FIELDOPS_CALLBACK_KEY",
    "FIELDOPS_OPS_TOKEN",
    "POSTGRES_SUPERUSER_PASSWORD",
    "FIELDOPS_OWNER_DB_PASSWORD",
    "FIELDOPS_APP_DB_PASSWORD",
)


class Missing(KeyError):
    pass


def interpolate(value: str, env: dict[str, str]) -> str:
    """Compose's interpolation: ``${X}``, ``${X:-default}``, ``${X:?error}``."""

    def one(match: re.Match[str]) -> str:
        name, kind, arg = match.group(1), match.group(2), match.group(3)
        if env.get(name):
            return env[name]
        if kind == "-":
            return arg
        if kind == "?":
            raise Missing(f"{name}: {arg}")
        return ""

    return VARIABLE.sub(one, value)


def environment(service: str) -> dict[str, str]:
    env = SERVICES[service].get("environment") or {}
    return {k: str(v) for k, v in env.items()}


def test_the_app_services_run_the_production_settings_with_secrets_from_the_env_file():
    assert APP_SERVICES == ["beat", "migrate", "web", "worker"]
    for name in APP_SERVICES:
        service = SERVICES[name]
        assert service["env_file"] == [".env"], name
        env = environment(name)
        assert env["DJANGO_SETTINGS_MODULE"] == "fieldops.settings_production", name
        assert not set(env) & set(SECRETS), f"{name} sets a secret in the compose file"
        assert env.get("DJANGO_DEBUG", "false").lower() == "false"
        assert "FIELDOPS_ALLOW_DEMO_USERS" not in env


def test_no_secret_value_and_no_demo_user_is_in_the_compose_file():
    for constant in ("change-me", "fieldops:fieldops@", "embedded-demo", "fieldops-demo"):
        assert constant not in COMPOSE_TEXT, constant
    for name, service in SERVICES.items():
        command = (
            " ".join(service.get("command") or [])
            if isinstance(service.get("command"), list)
            else str(service.get("command") or "")
        )
        assert "seed_demo" not in command, name
        for key, value in environment(name).items():
            if "PASSWORD" in key or key.endswith(("_KEY", "_TOKEN")):
                assert VARIABLE.fullmatch(value), f"{name}.{key} is not read from .env"
            # A database URL carries its password from .env too.
            for password in re.findall(r"://[^:/@]+:([^@]+)@", value):
                assert VARIABLE.fullmatch(password), f"{name}.{key} has a literal password"


def test_the_web_port_is_published_on_loopback_unless_changed():
    [port] = SERVICES["web"]["ports"]
    assert interpolate(port, {"FIELDOPS_APP_DB_PASSWORD": "x"}) == "127.0.0.1:8000:8000"
    assert interpolate(port, EXAMPLE).startswith("127.0.0.1:")
    assert interpolate(port, {"FIELDOPS_BIND_ADDRESS": "0.0.0.0"}).startswith("0.0.0.0:")  # noqa: S104
    for name in set(SERVICES) - {"web"}:
        assert "ports" not in SERVICES[name], f"{name} publishes a port"


def test_migrations_run_as_the_owner_and_everything_else_as_the_app_role():
    def role(service: str) -> str:
        url = interpolate(environment(service)["DATABASE_URL"], EXAMPLE)
        return url.split("://", 1)[1].split(":", 1)[0]

    assert role("migrate") == "fieldops_owner"
    command = SERVICES["migrate"]["command"]
    # Migrations, then the catalog and world every run needs (no demo users), then grants.
    assert (
        command.index("migrate --noinput")
        < command.index("manage.py seed &&")
        < command.index("db_roles --app-role fieldops_app")
    )
    for name in ("web", "worker", "beat"):
        assert role(name) == "fieldops_app", name
        assert SERVICES[name]["depends_on"]["migrate"] == {
            "condition": "service_completed_successfully"
        }
        assert "migrate" not in str(SERVICES[name]["command"]), name
    init = SERVICES["postgres"]["volumes"][1].split(":")[0]
    script = (ROOT / init).read_text()
    assert "CREATE ROLE fieldops_owner" in script and "CREATE ROLE fieldops_app" in script
    assert "OWNER TO fieldops_owner" in script and "PASSWORD :'app_password'" in script


def test_every_required_variable_is_in_the_example_with_a_placeholder_only():
    required = {m.group(1) for m in VARIABLE.finditer(COMPOSE_TEXT) if m.group(2) == "?"}
    assert required <= set(EXAMPLE), required - set(EXAMPLE)
    for name in SECRETS:
        assert EXAMPLE[name].startswith("replace-with-"), name
    with pytest.raises(Missing, match="FIELDOPS_APP_DB_PASSWORD"):
        interpolate(environment("web")["DATABASE_URL"], {})
    assert ".env" in (ROOT / ".gitignore").read_text().splitlines()  # never committed


def test_the_production_settings_load_from_the_example_and_refuse_demo_users():
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "FIELDOPS_"))}
    env.update(EXAMPLE)
    env.update({k: interpolate(v, EXAMPLE) for k, v in environment("web").items()})
    code = (
        "import fieldops.settings_production as s; "
        "print(s.DEBUG, s.FIELDOPS_ALLOW_DEMO_USERS, s.FIELDOPS_EXECUTION, "
        "s.DATABASES['default']['USER'], s.WHITENOISE_USE_FINDERS, s.FIELDOPS_TRUSTED_PROXIES)"
    )
    shown = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    ).stdout.split()
    # One trusted proxy (the TLS-terminating one): the sign-in throttle's client address.
    assert shown == ["False", "False", "celery", "fieldops_app", "False", "1"]


def test_the_image_never_holds_the_env_file_or_the_host_s_files():
    """``COPY . .`` in the Dockerfile copies the whole build context: without a
    .dockerignore the image held ``.env`` (every secret, in a layer anyone who pulls the
    image can read), the host's virtualenv and its databases."""
    ignored = {
        line.strip().rstrip("/")
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    assert {".env", ".venv", ".git", "var", "staticfiles", "*.sqlite3"} <= ignored
    assert "COPY . ." in (ROOT / "Dockerfile").read_text()


def test_the_readme_s_production_block_collects_static_files_before_gunicorn():
    """The production settings serve hashed files from collectstatic's manifest: a web
    process started without it answered 500 on every page ("Missing staticfiles manifest
    entry"). docker-compose's web service runs it; the README's by-hand steps must too."""
    readme = (ROOT / "README.md").read_text()
    block = readme.split("### Two database roles in production", 1)[1].split("```sh", 1)[1]
    block = block.split("```", 1)[0]
    assert "collectstatic" in block
    assert block.index("collectstatic") < block.index("gunicorn")


def test_make_worker_consumes_the_queue_the_web_process_sends_to():
    """The web process sends its kicks to ``FIELDOPS_QUEUE`` (README): ``make worker`` with
    ``-Q fieldops`` written out read another queue whenever that variable was set, and every
    run waited forever for a worker."""
    env = {**os.environ, "FIELDOPS_QUEUE": "north_queue"}
    shown = subprocess.run(
        ["make", "-n", "worker"], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    ).stdout
    assert "-Q north_queue" in shown, shown
    env.pop("FIELDOPS_QUEUE")
    shown = subprocess.run(
        ["make", "-n", "worker"], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    ).stdout
    assert "-Q fieldops" in shown, shown


def test_every_long_running_service_is_restarted_when_it_exits():
    """A Celery worker exits ("Unrecoverable error") when Redis restarts under it or its
    pool cannot start, and beat or a worker killed by the OOM killer exits too. Without a
    restart policy Compose left them down: no worker read the queue and no sweeper ran,
    so every run waited forever (seen in scripts/production_chaos.py). Only the one-shot
    ``migrate`` service stays down after it ran."""
    for name, service in SERVICES.items():
        if name == "migrate":
            assert service.get("restart") == "no"
        else:
            assert service.get("restart") == "unless-stopped", name


def dockerfile_instructions() -> list[tuple[str, str]]:
    """The Dockerfile's instructions as (INSTRUCTION, arguments), continuations joined."""
    text = re.sub(r"\\\n", " ", (ROOT / "Dockerfile").read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            instruction, _, rest = line.partition(" ")
            out.append((instruction.upper(), " ".join(rest.split())))
    return out


# What the app processes write inside the image (fieldops/settings.py): collectstatic's
# STATIC_ROOT at the web's start, and VAR_DIR (email files, beat's schedule file).
WRITTEN_PATHS = ("/app/staticfiles", "/app/var")


def test_the_image_runs_as_an_unprivileged_user_that_owns_only_what_it_writes():
    """The Dockerfile had no USER line: web, worker and beat ran as root, so a flaw in any
    of them could rewrite the code it runs. Now the last USER is a created, non-root user,
    who owns the paths the processes write and nothing else (the code stays root's)."""
    steps = dockerfile_instructions()
    users = [args for instruction, args in steps if instruction == "USER"]
    assert users, "the image runs as root (no USER line)"
    user = users[-1].split(":")[0]
    assert user not in ("root", "0"), users[-1]
    last_user = max(i for i, (instruction, _) in enumerate(steps) if instruction == "USER")
    assert not [s for s in steps[last_user:] if s[0] in ("RUN", "COPY", "ADD")], (
        "every build step runs before the USER line (as root, writing root-owned files)"
    )
    runs = " && ".join(args for instruction, args in steps if instruction == "RUN")
    useradd = re.search(r"useradd ([^&]+)", runs)
    assert useradd is not None, "the user is not created in the image"
    uid = re.search(r"--uid (\d+)", useradd.group(1))
    created = {useradd.group(1).split()[-1], uid.group(1) if uid else ""}
    assert user in created, (user, created)
    chowned = re.findall(r"chown (?:-R )?(\S+) ((?:/\S+ ?)+)", runs)
    owned = {path for owner, paths in chowned for path in paths.split()}
    assert all(owner.split(":")[0] in created for owner, _ in chowned), chowned
    assert owned == set(WRITTEN_PATHS), owned
    for instruction, args in steps:
        if instruction in ("COPY", "ADD"):
            assert "--chown" not in args, f"{instruction} {args}: the code must stay root's"


def test_beat_writes_its_schedule_where_the_unprivileged_user_may_write():
    """``celery beat`` writes ``celerybeat-schedule`` into its working directory (/app,
    root's): as the unprivileged user it must write it under var/ instead."""
    command = str(SERVICES["beat"]["command"])
    schedule = re.search(r"(?:--schedule|-s)[ =](\S+)", command)
    assert schedule is not None, command
    assert schedule.group(1).startswith(tuple(f"{path}/" for path in WRITTEN_PATHS)), command


def test_the_production_settings_require_the_broker_they_send_runs_to():
    """The production settings read ``CELERY_BROKER_URL`` with the embedded default
    (``redis://127.0.0.1:6379/7``): a process started by hand without it (beat, say, while
    web and workers had it) sent its kicks to another Redis database that no worker reads,
    and nothing said so. Like every other setting it names, it is now required."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "FIELDOPS_"))}
    env.update(EXAMPLE)
    env.update({k: interpolate(v, EXAMPLE) for k, v in environment("web").items()})
    env.pop("CELERY_BROKER_URL")
    code = "import fieldops.settings_production"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert done.returncode != 0
    assert "CELERY_BROKER_URL must be set in production" in done.stderr
