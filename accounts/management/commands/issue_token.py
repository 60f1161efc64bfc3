"""`manage.py issue_token USER --scope submit`: a personal token for an operator to hand over."""

from argparse import ArgumentParser
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from accounts.models import PersonalToken
from accounts.services import DEFAULT_TOKEN_DAYS, TokenError, token_issue


class Command(BaseCommand):
    help = "Issue a personal API token for a user and print it (it is shown only this once)."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("username")
        parser.add_argument(
            "--scope", choices=PersonalToken.Scope.values, default=PersonalToken.Scope.READ
        )
        parser.add_argument("--name", default="issued by an operator")
        parser.add_argument("--days", type=int, default=DEFAULT_TOKEN_DAYS)

    def handle(self, *args: Any, **options: Any) -> None:
        user = get_user_model().objects.filter(username=options["username"]).first()
        if user is None:
            raise CommandError(f"No user {options['username']!r}; check the user name.")
        try:
            issued = token_issue(
                user=user, name=options["name"], scope=options["scope"], days=options["days"]
            )
        except TokenError as exc:
            raise CommandError(str(exc)) from None
        self.stderr.write(
            f"Token {issued.token.prefix} for {user.get_username()} ({issued.token.scope}), "
            f"expires {issued.token.expires_at:%Y-%m-%d}. It is not shown again:"
        )
        self.stdout.write(issued.text)
