"""The management commands operators and scripts rely on."""

from __future__ import annotations

import io
import json
import re

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from runs.models import Event, Run
from tests.helpers import manage_refused


def _call(*args):
    out, err = io.StringIO(), io.StringIO()
    call_command(*args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_start_run_prints_the_run_id_and_stops_at_the_first_wait(world, operator):
    out, err = _call("start_run", "--scenario", "reservation", "--namespace", "faultlab")
    run = Run.objects.get(pk=out.strip())
    assert run.state == "WAITING_HUMAN"
    assert json.loads(err)["state"] == "WAITING_HUMAN"


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--fault", "meteor_strike"], "fault_plan"),
        (["--fault", "stale_read:check_inventory:x"], "must be a whole number"),
        (["--fault", "stale_read:check_inventory:\u00b2"], "must be a whole number"),
        (["--principal", ""], "principal_ref: a run needs a principal"),
        (["--principal", "user:" + "x" * 60], "may be at most 64"),
        (["--location", "LOC-S1"], "location_id: unknown location 'LOC-S1'"),
        # another tenant's equipment: the world denied the run every read of it (escalated)
        (["--equipment", "EQ-31"], "equipment_id: unknown equipment 'EQ-31'"),
        # isdecimal() digits int() reads: they started runs with a fault on call 3
        (["--fault", "stale_read:check_inventory:\u0663"], "must be a whole number"),
        (["--fault", "stale_read:check_inventory:\uff13"], "must be a whole number"),
        (["--fault", "stale_read:check_inventory:" + "9" * 30], "must be a whole number"),
        (["--fault", "stale_read:check_inventory:" + "9" * 5000], "must be a whole number"),
        # a world nobody stocked (the run escalated), or a name too long for its column
        (["--namespace", "faultlb"], "invalid choice: 'faultlb'"),
        (["--namespace", "n" * 100], "invalid choice"),
        # An empty location was read as "the default" (an empty equipment was refused).
        (["--location", ""], "location_id: unknown location ''"),
        # A principal that is no user reference: the context a model reads is redacted of
        # it by replacing it in every text, so "-1" made EQ-17 "EQ[principal]7" and the
        # run failed on schema_invalid reads; "0" and "{" started runs under no user.
        (["--principal", "-1"], "principal_ref: a run's principal is a user reference"),
        (["--principal", "0"], "principal_ref: a run's principal is a user reference"),
        (["--principal", "{"], "principal_ref: a run's principal is a user reference"),
        (["--principal", "user:"], "principal_ref: a run's principal is a user reference"),
        (["--principal", "user: operator"], "principal_ref: a run's principal is a user"),
    ],
)
def test_start_run_refuses_bad_input_without_writing(world, operator, arguments, message):
    with pytest.raises(CommandError, match=message):
        _call("start_run", "--scenario", "reservation", *arguments)
    assert not Run.objects.exists()


def test_start_run_refuses_a_principal_of_another_tenant(world):
    """A north run requested by south's operator started: the requester of a run is who
    its clarifications ask and who may not approve it, across the tenant boundary."""
    from tests.conftest import make_user

    make_user("operator-south", "south", "operator")
    with pytest.raises(CommandError, match="principal_ref: user 'operator-south' acts for"):
        _call("start_run", "--scenario", "reservation", "--principal", "user:operator-south")
    assert not Run.objects.exists()
    out, _ = _call(
        "start_run", "--scenario", "abstain", "--tenant", "south",
        "--principal", "user:operator-south",
    )  # fmt: skip
    assert Run.objects.get(pk=out.strip()).principal_ref == "user:operator-south"


@pytest.mark.parametrize("name", ["nobody", "Operator", "n" * 59])
def test_start_run_refuses_a_principal_that_names_no_user(world, operator, name):
    """``--principal user:nobody`` started a run requested by nobody: no one to answer its
    clarifications, no one the self-approval rule could recognise. The name is looked up
    exactly (user names are case-sensitive) and quoted shortly."""
    with pytest.raises(CommandError) as refused:
        _call("start_run", "--scenario", "reservation", "--principal", f"user:{name}")
    assert str(refused.value) == (
        f"principal_ref: no user is named {name[:64]!r}; a run's principal is an existing, "
        "active user of its tenant (create one with set_user)"
    )
    assert not Run.objects.exists()


def test_start_run_refuses_an_inactive_principal(world, operator):
    operator.is_active = False
    operator.save(update_fields=["is_active"])
    with pytest.raises(CommandError, match="principal_ref: user 'operator' is inactive"):
        _call("start_run", "--scenario", "reservation")
    assert not Run.objects.exists()


def test_a_run_started_without_equipment_names_its_tenants_own(world):
    """The run's equipment defaults to its tenant's first (a south run named north's EQ-17,
    which the world denied it, and escalated)."""
    from tests.conftest import make_user

    make_user("operator-south", "south", "operator")
    out, _ = _call(
        "start_run", "--scenario", "abstain", "--tenant", "south",
        "--principal", "user:operator-south",
    )  # fmt: skip
    run = Run.objects.get(pk=out.strip())
    request = run.evidence.get(pk=f"rq-{run.pk.hex[:20]}").content["data"]
    assert (run.tenant, request["equipment_id"]) == ("south", "EQ-31")


def test_timeline_prints_one_line_per_event(world, operator):
    out, _ = _call("start_run", "--scenario", "abstain", "--namespace", "faultlab")
    run_id = out.strip()
    timeline, _ = _call("timeline", run_id)
    lines = timeline.strip().splitlines()
    assert len(lines) == 1 + Event.objects.filter(run_id=run_id).count()
    assert "escalation.admitted" in lines[-1]


def test_timeline_of_an_unknown_run_is_a_clear_error(world):
    with pytest.raises(CommandError, match="no run"):
        _call("timeline", "not-a-run")


def test_replay_exits_zero_when_clean_and_non_zero_on_findings(world, operator):
    out, _ = _call("start_run", "--scenario", "reservation", "--namespace", "faultlab")
    run_id = out.strip()
    report, _ = _call("replay", run_id)
    assert "no findings" in report
    run = Run.objects.get(pk=run_id)
    Run.objects.filter(pk=run_id).update(state="COMPLETED")  # the row lies about the events
    with pytest.raises(SystemExit) as exc:
        _call("replay", run_id)
    assert exc.value.code == 1
    assert run.state == "WAITING_HUMAN"


def test_replay_of_several_runs_audits_each_and_fails_when_any_has_findings(world, operator):
    ids = [
        _call("start_run", "--scenario", s, "--namespace", "faultlab")[0].strip()
        for s in ("reservation", "abstain")
    ]
    report, _ = _call("replay", *ids)
    assert report.count("no findings") == 2
    assert report.strip().endswith("2 runs replayed, 0 with findings")
    everything, _ = _call("replay", "--all", "--json")
    assert [r["run_id"] for r in json.loads(everything)] == ids  # oldest first
    Run.objects.filter(pk=ids[1]).update(state="COMPLETED")  # the row lies about the events
    with pytest.raises(SystemExit) as exc:
        _call("replay", "--all")
    assert exc.value.code == 1


@pytest.mark.parametrize("mode", ["audit", "decision", "simulation"])
@pytest.mark.parametrize("candidate", ["", "  "])
def test_replay_with_an_empty_candidate_is_refused_and_writes_nothing(
    world, operator, mode, candidate
):
    """An empty --candidate was read as none given: the simulation then ran (and wrote a
    run) as the recorded scenario, the decision replay against the recording."""
    run_id = _call("start_run", "--scenario", "abstain", "--namespace", "faultlab")[0].strip()
    before = (Run.objects.count(), Event.objects.count())
    with pytest.raises(CommandError, match="--candidate is empty"):
        _call("replay", run_id, "--mode", mode, "--candidate", candidate)
    assert (Run.objects.count(), Event.objects.count()) == before


def test_replay_of_several_runs_refuses_bad_input(world, operator):
    run_id = _call("start_run", "--scenario", "abstain", "--namespace", "faultlab")[0].strip()
    with pytest.raises(CommandError, match="no run"):
        _call("replay", run_id, "not-a-run")
    with pytest.raises(CommandError, match="exactly one run"):
        _call("replay", run_id, run_id, "--mode", "decision")
    with pytest.raises(CommandError, match="not both"):
        _call("replay", run_id, "--all")
    with pytest.raises(CommandError, match="give a run id"):
        _call("replay")


def test_faultlab_prints_expected_and_actual_and_fails_on_mismatch(world, monkeypatch):
    from sim import faultlab

    out, _ = _call("faultlab", "abstain", "unavailable_tool_loop")
    assert out.count("PASS ") == 2 and "expected ESCALATED no_applicable_tool" in out
    broken = faultlab.Fixture(
        "abstain", "x", "COMPLETED", "all_predicates_pass", faultlab.fx_abstain
    )
    monkeypatch.setitem(faultlab.BY_NAME, "abstain", broken)
    with pytest.raises(SystemExit):
        _call("faultlab", "abstain")


def test_render_docs_check_detects_stale_docs(settings, tmp_path):
    settings.BASE_DIR = tmp_path
    with pytest.raises(SystemExit):
        _call("render_docs", "--check")
    _call("render_docs")
    _call("render_docs", "--check")


def test_faultlab_list_takes_no_fixture_names(world):
    with pytest.raises(CommandError, match="give no fixture names"):
        _call("faultlab", "--list", "abstain")


@pytest.mark.parametrize(
    "addrport",
    ["notaport", "127.0.0.1:99999", "127.0.0.1:0", "127.0.0.1:\u0668\u0667\u0660\u0660", ""],
)
def test_serve_embedded_refuses_an_address_it_cannot_listen_on(addrport, settings):
    with pytest.raises(CommandError, match="is not \\[host:\\]port with a port from 1 to 65535"):
        call_command("serve_embedded", addrport)


def test_the_run_commands_refuse_with_one_line_in_a_real_process():
    """Before: a traceback (OverflowError from bind(), ValueError from int()), or a run."""
    assert manage_refused("serve_embedded", "127.0.0.1:99999") == (
        "CommandError: '127.0.0.1:99999' is not [host:]port with a port from 1 to 65535 "
        "(e.g. 127.0.0.1:8000)"
    )
    line = manage_refused(
        "start_run",
        "--scenario",
        "reservation",
        "--fault",
        "stale_read:check_inventory:" + "9" * 5000,
    )
    assert line.startswith(
        "CommandError: --fault 'stale_read:check_inventory:999"
    ) and line.endswith(
        "the call number must be a whole number (at most 18 of the digits 0-9; 0: every call)"
    ), line
    assert manage_refused(
        "start_run", "--scenario", "reservation", "--namespace", "x" * 100
    ).startswith("manage.py start_run: error: argument --namespace: invalid choice: 'xxx")
    assert manage_refused("faultlab", "--list", "abstain") == (
        "CommandError: --list lists every fixture: give no fixture names with it"
    )


def test_render_docs_help_names_every_file_it_writes():
    from catalog import docs as catalog_docs
    from runs import docs as run_docs
    from sim import docs as sim_docs
    from sim.management.commands.render_docs import Command

    written = {
        **run_docs.generated_files(),
        **sim_docs.generated_files(),
        **catalog_docs.generated_files(),
    }
    assert sorted(written) == sorted(re.findall(r"docs/[\w.-]+\.(?:md|svg)", Command.help))


LONG = "x" * 5000


@pytest.mark.parametrize(
    "arguments",
    [
        ["timeline", LONG],
        ["replay", LONG],
        ["start_run", "--scenario", "reservation", "--location", LONG],
        ["start_run", "--scenario", "reservation", "--fault", LONG],
        ["approvals_policy", "--tenant", LONG, "--name", "p"],
        ["approvals_policy", "--tenant", "north", "--name", "p", "--capability", LONG],
        ["approvals_policy", "--tenant", "north", "--name", "p", "--effect-class", LONG],
        ["approvals_policy", "--tenant", "north", "--name", "p", "--group", LONG],
        ["approvals_policy", "--tenant", "north", "--name", "p", "--user", LONG],
        ["approvals_policy", "--tenant", "north", "--name", "p", "--quorum-part", LONG],
        ["approvals_policy", "--tenant", "north", "--name", LONG, "--delete"],
        ["approvals_webhook", "--tenant", "north", "--name", LONG, "--disable"],
        ["catalog_discover", LONG],
        ["routing_eval", "--scenario", LONG],
        ["faultlab", LONG],
    ],
)
def test_a_refused_huge_value_is_named_shortly(world, operator, arguments):
    """A 5,000-character id or name was echoed whole: the one line of the refusal was
    5,000 characters long. It is named by its start and length now."""
    with pytest.raises(CommandError) as refused:
        _call(*arguments)
    message = str(refused.value)
    assert len(message) < 400 and "\n" not in message, (len(message), message[:200])
    assert not Run.objects.exists()


def _fieldops_commands() -> list[str]:
    """The names of the project's own management commands (not Django's, not a library's)."""
    from django.conf import settings
    from django.core.management import get_commands

    root = str(settings.BASE_DIR)
    names = []
    for name, app in get_commands().items():
        if app.startswith("django."):
            continue
        module = __import__(f"{app}.management.commands.{name}", fromlist=["Command"])
        if str(module.__file__).startswith(root) and ".venv" not in str(module.__file__):
            names.append(name)
    return sorted(names)


def test_every_fieldops_command_shares_the_short_refusal_parser():
    """One mechanism, not a fix per command: a new command that subclasses Django's
    BaseCommand directly would echo argparse's huge values again."""
    from django.core.management import get_commands, load_command_class

    from fieldops.commands import FieldOpsCommand

    names = _fieldops_commands()
    assert {"start_run", "set_user", "approvals_policy", "seed_demo"} <= set(names)
    plain = [
        n
        for n in names
        if not isinstance(load_command_class(get_commands()[n], n), FieldOpsCommand)
    ]
    assert not plain, f"commands not built on fieldops.commands.FieldOpsCommand: {plain}"


@pytest.mark.parametrize("name", _fieldops_commands())
def test_argparses_own_refusal_quotes_a_huge_value_shortly(name):
    """argparse's errors quoted the value whole: ``--verbosity`` (every command has it)
    given 100,000 characters was a 100 kB refusal. The value is cut to 80 characters and
    an ellipsis; the message is otherwise argparse's."""
    with pytest.raises(CommandError) as refused:
        call_command(name, "--verbosity", "x" * 100_000)
    assert str(refused.value) == (
        "Error: argument -v/--verbosity: invalid int value: '" + "x" * 80 + "…'"
    )


def test_a_huge_invalid_choice_is_quoted_shortly_in_a_real_process():
    """``start_run --scenario $(python -c 'print("x"*100000)')`` printed the 100,000
    characters in its one error line; the choices and the usage line stay as they were."""
    from runs.policies import scenario_names

    line = manage_refused("start_run", "--scenario", "x" * 100_000)
    choices = ", ".join(repr(c) for c in scenario_names())
    assert line == (
        "manage.py start_run: error: argument --scenario: invalid choice: '"
        + "x" * 80
        + f"…' (choose from {choices})"
    )
    assert manage_refused("timeline", "run-1", "--" + "y" * 5000) == (
        "manage.py timeline: error: unrecognized arguments: --" + "y" * 78 + "…"
    )
    # A value that holds a quote is quoted by repr with the other quote, and cut the same.
    assert manage_refused("start_run", "--scenario", "it's " + "z" * 200).endswith(
        "invalid choice: \"it's " + "z" * 75 + '…" (choose from ' + choices + ")"
    )


@pytest.mark.parametrize(
    ("message", "shown"),
    [
        ("argument --x: invalid choice: 'a' (choose from 'a b', 'c')", None),
        ("don't cut an apostrophe: it's " + "w" * 60 + " or the rest of the line", None),
        ("argument --x: 'y' is not a whole number", None),
        (
            "invalid choice: '" + "a\\'b" * 40 + "'",
            "invalid choice: '" + ("a\\'b" * 40)[:80] + "…'",
        ),
        (
            "unrecognized arguments: " + "q" * 90 + " r",
            "unrecognized arguments: " + "q" * 80 + "… r",
        ),
    ],
)
def test_only_long_quoted_values_and_words_are_cut(message, shown):
    from fieldops.commands import shortened

    assert shortened(message) == (shown or message)
