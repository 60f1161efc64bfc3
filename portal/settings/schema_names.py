"""The API schema's names for choice sets that share a field name (drf-spectacular's
ENUM_NAME_OVERRIDES): each its own name, so the schema has no collision to warn about."""

SCHEMA_ENUM_NAMES = {
    "JobStateEnum": "jobs.models.State",
    # A job may be any template; a sweep's trials only those that end by themselves.
    "JobTemplateEnum": "jobs.enums.Template",
    "TrialTemplateEnum": "jobs.enums.TRIAL_TEMPLATES",
}
