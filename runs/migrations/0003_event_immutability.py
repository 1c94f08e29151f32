"""Events are immutable in PostgreSQL: a trigger refuses every UPDATE and DELETE.

The hash chain detects any change made behind the application's back; this trigger stops
the application's own database role from making one in the first place.
"""

from django.db import migrations

FORWARD = """
CREATE OR REPLACE FUNCTION fieldops_event_immutable() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION USING
        MESSAGE = 'runs_event is append-only: ' || TG_OP || ' refused',
        ERRCODE = 'insufficient_privilege';
END;
$$ LANGUAGE plpgsql;
DROP TRIGGER IF EXISTS runs_event_immutable ON runs_event;
CREATE TRIGGER runs_event_immutable BEFORE UPDATE OR DELETE ON runs_event
    FOR EACH ROW EXECUTE FUNCTION fieldops_event_immutable();
"""

BACKWARD = """
DROP TRIGGER IF EXISTS runs_event_immutable ON runs_event;
DROP FUNCTION IF EXISTS fieldops_event_immutable();
"""


def forward(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(FORWARD)


def backward(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(BACKWARD)


class Migration(migrations.Migration):
    dependencies = [("runs", "0002_faultlab_result")]
    operations = [migrations.RunPython(forward, backward)]
