"""The signed-in user of a request, typed: every page and endpoint asks here."""

from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest
from rest_framework.request import Request


def request_user(request: HttpRequest | Request) -> User:
    """The request's user, behind `login_required` or an authenticated-only permission.

    A request without a signed-in user reaching here is refused, never served as nobody.
    """
    user = request.user
    if not isinstance(user, User) or not user.is_authenticated:
        raise PermissionDenied("Sign in to see this page.")
    return user
