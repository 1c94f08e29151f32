#!/bin/sh
# Runs once, on the first start of the postgres container (docker-entrypoint-initdb.d),
# as the container's superuser. It creates the two roles of docs/security.md:
#   fieldops_owner  owns the database and its tables; the "migrate" service connects as it
#   fieldops_app    owns nothing; web, worker and beat connect as it. Its privileges are
#                   granted by `manage.py db_roles` after every migrate.
# Passwords come from the environment (.env), never from this file.
set -eu
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" \
  -v db="$POSTGRES_DB" \
  -v owner_password="$FIELDOPS_OWNER_DB_PASSWORD" \
  -v app_password="$FIELDOPS_APP_DB_PASSWORD" <<'SQL'
CREATE ROLE fieldops_owner LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION
  PASSWORD :'owner_password';
CREATE ROLE fieldops_app LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT NOREPLICATION
  NOBYPASSRLS PASSWORD :'app_password';
ALTER DATABASE :"db" OWNER TO fieldops_owner;
ALTER SCHEMA public OWNER TO fieldops_owner;
REVOKE CREATE ON SCHEMA public FROM PUBLIC;
SQL
