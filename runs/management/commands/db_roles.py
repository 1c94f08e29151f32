"""db_roles --app-role NAME [--create] [--print]: the production database roles.

Run as the owner role (the role that ran ``migrate``), after every ``migrate``: it grants
the application role what the console and workers need and nothing more on the event
table (``runs/db_roles.py`` says what and why). ``--create`` also creates the application
role when it is missing (needs CREATEROLE; set its password with psql's ``\\password``, which
sends it hashed); ``--print`` writes the SQL for a DBA to run with psql, touching nothing.
"""

from __future__ import annotations

from django.core.management.base import CommandError, CommandParser
from django.db import connection, transaction

from fieldops.commands import FieldOpsCommand
from runs import db_roles


class Command(FieldOpsCommand):
    help = "Grant the application's database role its privileges (run as the owner role)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--app-role", required=True, help="the role the app connects as")
        parser.add_argument("--create", action="store_true", help="create the role if missing")
        parser.add_argument("--print", action="store_true", help="print the SQL, run nothing")

    def handle(self, *args: object, **options: object) -> None:
        if connection.vendor != "postgresql":
            raise CommandError("database roles exist on PostgreSQL only (DATABASE_URL)")
        app_role = str(options["app_role"])
        owner_role = str(connection.settings_dict["USER"])
        database = str(connection.settings_dict["NAME"])
        try:
            statements = db_roles.grant_statements(
                app_role=app_role, owner_role=owner_role, database=database
            )
        except db_roles.RoleNameError as exc:
            raise CommandError(str(exc)) from exc
        if options["print"]:
            self.stdout.write(
                db_roles.script(app_role=app_role, owner_role=owner_role, database=database),
                ending="",
            )
            return
        if app_role == owner_role:
            raise CommandError("the application role must not be the owner role")
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(
                "SELECT pg_get_userbyid(relowner) FROM pg_class "
                "WHERE relname = %s AND relkind = 'r'",
                [db_roles.EVENT_TABLE],
            )
            row = cursor.fetchone()
            if row is None:
                raise CommandError("runs_event does not exist: run `manage.py migrate` first")
            if row[0] != owner_role:
                raise CommandError(
                    f"connected as {owner_role!r}, but {row[0]!r} owns the tables: run this "
                    "as the owner role (the role that ran migrate)"
                )
            cursor.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [app_role])
            exists = cursor.fetchone() is not None
            if not exists:
                if not options["create"]:
                    raise CommandError(
                        f"role {app_role!r} does not exist: pass --create (needs CREATEROLE) "
                        "or run the --print script as a superuser"
                    )
                cursor.execute(db_roles.create_role_statement(app_role))
            for statement in statements:
                cursor.execute(statement)
        self.stdout.write(
            f"granted {app_role} the application privileges on {database} "
            f"({'created' if not exists else 'existing'} role; owner {owner_role})"
        )
