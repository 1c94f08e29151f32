"""approvals_policy: create or replace a tenant's approval policy (docs/approvals.md)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser

from approvals import configuration
from approvals.models import ApprovalPolicy
from fieldops.arguments import whole_number
from fieldops.commands import FieldOpsCommand
from runs.console.filters import WORLDS

# What a policy is made of: --delete takes none of these (it names the policy only).
POLICY_OPTIONS = {
    "capability": "--capability",
    "effect_class": "--effect-class",
    "world": "--world",
    "group": "--group",
    "users": "--user",
    "quorum": "--quorum",
    "quorum_min_quantity": "--quorum-min-quantity",
    "parts": "--quorum-part",
}


class Command(FieldOpsCommand):
    help = "Create or replace an approval policy: who may decide, and how many must agree."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--tenant", required=True)
        parser.add_argument("--name", required=True)
        parser.add_argument("--capability", default="reserve_part", help="default reserve_part")
        parser.add_argument("--effect-class", default="", help="only this effect class")
        parser.add_argument(
            "--world",
            default="",
            choices=["", *[w for w in WORLDS if w != "all"]],
            help="only runs in this world (default: any)",
        )
        parser.add_argument(
            "--group", default="", help="only this group's members may decide (approvers too)"
        )
        parser.add_argument(
            "--user",
            action="append",
            default=[],
            dest="users",
            help="only these users may decide (repeat for several)",
        )
        parser.add_argument(
            "--quorum", type=whole_number, default=1, help="distinct approvals needed (1-9)"
        )
        parser.add_argument(
            "--quorum-min-quantity",
            type=whole_number,
            default=None,
            help="the quorum applies from this quantity on (1-50)",
        )
        parser.add_argument(
            "--quorum-part",
            action="append",
            default=[],
            dest="parts",
            help="the quorum applies for this part (repeat for several)",
        )
        parser.add_argument(
            "--delete",
            action="store_true",
            help="delete the policy (with --tenant and --name only)",
        )
        self.defaults = {dest: parser.get_default(dest) for dest in POLICY_OPTIONS}

    def handle(self, *args: Any, **o: Any) -> None:
        if o["delete"]:
            given = [
                flag for dest, flag in POLICY_OPTIONS.items() if o[dest] != self.defaults[dest]
            ]
            if given:
                raise CommandError(
                    f"--delete names a policy by --tenant and --name only, not {', '.join(given)}"
                )
            deleted, _ = ApprovalPolicy.objects.filter(tenant=o["tenant"], name=o["name"]).delete()
            if not deleted:
                raise CommandError(f"no policy {o['tenant'][:40]}/{o['name'][:80]} to delete")
            self.stdout.write(f"deleted policy {o['tenant']}/{o['name']}")
            return
        usernames = sorted(set(o["users"]))
        part_ids = sorted({p.strip().upper() for p in o["parts"]})
        problem = (
            configuration.tenant_problem(o["tenant"])
            or configuration.name_problem(o["name"])
            or configuration.policy_problem(
                tenant=o["tenant"],
                capability=o["capability"],
                effect_class=o["effect_class"],
                group=o["group"],
                usernames=usernames,
                quorum=o["quorum"],
                quorum_min_quantity=o["quorum_min_quantity"],
                part_ids=part_ids,
            )
        )
        if problem:
            raise CommandError(problem)
        policy, created = ApprovalPolicy.objects.update_or_create(
            tenant=o["tenant"],
            name=o["name"],
            defaults={
                "capability": o["capability"],
                "effect_class": o["effect_class"],
                "world": o["world"],
                "group": o["group"],
                "usernames": usernames,
                "quorum": o["quorum"],
                "quorum_min_quantity": o["quorum_min_quantity"],
                "quorum_part_ids": part_ids,
            },
        )
        self.stdout.write(
            f"{'created' if created else 'replaced'} {policy}: "
            f"for {policy.capability} "
            f"(new checkpoints only; open ones keep what they recorded)"
        )
