"""Memberships that follow a directory's groups (single sign-on, SSO_GROUP_PROJECTS).

For each project the group mapping names, the directory decides who is in it and with
what role: at every sign-in the person is added, given the role their groups give, or
removed. Projects the mapping does not name keep the memberships the admin gave.
"""

import logging
from collections.abc import Collection, Mapping

from django.contrib.auth.models import User
from django.db import transaction

from projects.models import Membership, Project

logger = logging.getLogger(__name__)


@transaction.atomic
def memberships_follow_groups(
    *, user: User, wanted: Mapping[str, str], managed: Collection[str]
) -> None:
    """Make the user's memberships of the `managed` projects (slugs) exactly `wanted`
    (slug -> role); a slug that names no project is logged and skipped."""
    projects = {p.slug: p for p in Project.objects.filter(slug__in=managed)}
    for slug in sorted(set(managed) - projects.keys()):
        logger.warning("SSO_GROUP_PROJECTS names the project %r, which does not exist", slug)
    held = {
        m.project.slug: m
        for m in Membership.objects.select_related("project").filter(
            user=user, project__slug__in=projects.keys()
        )
    }
    for slug, membership in held.items():
        if slug not in wanted:
            # One at a time: each deletion tells the person's live streams (post_delete).
            membership.delete()
        elif membership.role != wanted[slug]:
            membership.role = wanted[slug]
            membership.save(update_fields=["role"])
    for slug, role in wanted.items():
        if slug in projects and slug not in held:
            Membership.objects.create(user=user, project=projects[slug], role=role)
