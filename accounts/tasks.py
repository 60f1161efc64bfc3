"""Celery tasks of accounts: the directory sweep (beat, LDAP_SWEEP_INTERVAL)."""

import logging

from celery import shared_task
from django.conf import settings

from accounts.sso.config import ldap_enabled
from accounts.sso.directory import DirectoryError, directory_config
from accounts.sso.sweep import directory_sweep

logger = logging.getLogger(__name__)


@shared_task(ignore_result=True)
def sweep_directory() -> None:
    """Disable the portal users the directory no longer has (accounts.sso.sweep)."""
    if not ldap_enabled():
        return
    config = directory_config()
    try:
        directory_sweep(config=config, page_size=settings.LDAP_SWEEP_PAGE_SIZE)
    except DirectoryError as exc:
        # The next run comes at the next interval; nobody is disabled on a failed answer.
        logger.error("directory sweep of %s stopped: %s", config.url, exc)
