"""A job's checkpoints: the index, its rule and the rule's preview, deletion; page and API."""
