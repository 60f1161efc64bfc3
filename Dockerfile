# The production image: one image, three roles (web, worker, beat) chosen by command.
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 DJANGO_SETTINGS_MODULE=portal.settings.production
WORKDIR /app

# Production's pins only (no test or lint tools), each file checked against its hash.
COPY requirements/prod.txt requirements/
RUN pip install --no-cache-dir --require-hashes -r requirements/prod.txt

COPY . .
# Static files with the shared settings and throwaway values: production's refuse to
# load without real secrets, which a build must never see.
RUN DJANGO_SETTINGS_MODULE=portal.settings.base DJANGO_SECRET_KEY=build-only \
    FIELD_ENCRYPTION_KEYS=cGNVZ3h2dGJoWk5yWHRsR0NxbW5mV2lLb2Z5Y1l6cDc= \
    DATABASE_URL=sqlite:////tmp/build.sqlite3 python manage.py collectstatic --noinput \
 && rm -f /tmp/build.sqlite3 \
 && python -m compileall -q /app \
 && useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin portal \
 && install -d -o portal -m 700 /var/lib/portal/code
# The code stays root's (read-only to the portal, so its bytecode is compiled above);
# the portal runs as its own user, and owns only the code snapshots' directory (a volume
# web and worker share: web stores uploads, the worker sends them to the cluster).
USER portal

EXPOSE 8000
CMD ["daphne", "-b", "0.0.0.0", "-p", "8000", "portal.asgi:application"]
