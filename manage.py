#!/usr/bin/env python
"""Django's command-line utility for FieldOps."""

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "fieldops.settings")
    from django.core.management import execute_from_command_line
    from django.db import DatabaseError, connection

    try:
        execute_from_command_line(sys.argv)
    except DatabaseError as exc:
        # A set-up step not done yet (migrate, db_roles, createdb) or a database that does
        # not answer: one line saying so, like a CommandError, instead of a traceback.
        from fieldops.db import setup_problem

        problem = setup_problem(exc, str(connection.settings_dict.get("USER") or ""))
        if problem is None:
            raise
        sys.stderr.write(f"CommandError: {problem}\n")
        sys.exit(1)


if __name__ == "__main__":
    main()
