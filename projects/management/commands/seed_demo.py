import os
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from projects.services import demo_data_create


class Command(BaseCommand):
    help = "Create the demo users (admin, alice, bob) and the demo project; idempotent."

    def handle(self, *args: Any, **options: Any) -> None:
        password = os.environ.get("DEMO_PASSWORD", "")
        if not password:
            raise CommandError("Set DEMO_PASSWORD (make run writes one into .env).")
        project = demo_data_create(password=password)
        self.stdout.write(f"Demo project {project.slug!r} with users admin, alice, bob.")
