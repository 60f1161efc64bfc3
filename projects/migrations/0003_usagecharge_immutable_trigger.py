"""The ledger refuses UPDATE and DELETE in the database itself, not only through the model."""

from django.db import migrations

CREATE = """
CREATE OR REPLACE FUNCTION projects_usagecharge_immutable() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION 'usage charges are immutable: write a new entry instead';
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER projects_usagecharge_immutable
    BEFORE UPDATE OR DELETE ON projects_usagecharge
    FOR EACH ROW EXECUTE FUNCTION projects_usagecharge_immutable();
"""
DROP = """
DROP TRIGGER IF EXISTS projects_usagecharge_immutable ON projects_usagecharge;
DROP FUNCTION IF EXISTS projects_usagecharge_immutable();
"""


def _create(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(CREATE)


def _drop(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP)


class Migration(migrations.Migration):
    dependencies = [("projects", "0002_quota_scope_reservations_ledger_alerts")]

    operations = [migrations.RunPython(_create, _drop)]
