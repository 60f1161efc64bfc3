"""Single sign-on (docs/sso.md): OpenID Connect and LDAP, each off until the site sets it.

Read from the environment like every setting; the names of mozilla-django-oidc's own
settings are kept, so that its documentation applies as written.
"""

from urllib.parse import urlsplit

import environ

env = environ.Env()

# --- OpenID Connect (accounts.sso.oidc): on once OIDC_RP_CLIENT_ID is set ----------------
OIDC_RP_CLIENT_ID: str = env("OIDC_RP_CLIENT_ID", default="")
OIDC_RP_CLIENT_SECRET: str = env("OIDC_RP_CLIENT_SECRET", default="")
# The provider's issuer: the `iss` every ID token must carry, and half of each identity.
OIDC_OP_ISSUER: str = env("OIDC_OP_ISSUER", default="")
OIDC_OP_AUTHORIZATION_ENDPOINT: str = env("OIDC_OP_AUTHORIZATION_ENDPOINT", default="")
OIDC_OP_TOKEN_ENDPOINT: str = env("OIDC_OP_TOKEN_ENDPOINT", default="")
OIDC_OP_USER_ENDPOINT: str = env("OIDC_OP_USER_ENDPOINT", default="")
OIDC_OP_JWKS_ENDPOINT: str = env("OIDC_OP_JWKS_ENDPOINT", default="")
# Where log-out sends the browser (the provider's end_session_endpoint); empty: nowhere.
OIDC_OP_END_SESSION_ENDPOINT: str = env("OIDC_OP_END_SESSION_ENDPOINT", default="")
OIDC_RP_SIGN_ALGO: str = env("OIDC_RP_SIGN_ALGO", default="RS256")
OIDC_RP_SCOPES: str = env("OIDC_RP_SCOPES", default="openid email profile")
# The authorization code flow with PKCE (S256), the nonce, and the ID token kept in the
# session for the provider's log-out.
OIDC_USE_PKCE = True
OIDC_USE_NONCE = True
OIDC_STORE_ID_TOKEN = True
OIDC_TIMEOUT: float = env.float("OIDC_TIMEOUT", default=10.0)
# A session that signed in through the provider is checked with it again (prompt=none) at
# its first page after this many seconds; a person it no longer signs in loses the session
# (accounts.sso.refresh, mozilla-django-oidc's SessionRefresh).
OIDC_RENEW_ID_TOKEN_EXPIRY_SECONDS: int = env.int(
    "OIDC_RENEW_ID_TOKEN_EXPIRY_SECONDS", default=15 * 60
)


def _verify_ssl(text: str) -> bool | str:
    lowered = text.lower()
    if lowered in ("true", "1", "yes", "false", "0", "no"):
        return lowered in ("true", "1", "yes")
    return text  # the path of a CA bundle: a provider behind a site's own CA


OIDC_VERIFY_SSL: bool | str = _verify_ssl(env("OIDC_VERIFY_SSL", default="true"))
OIDC_OP_LOGOUT_URL_METHOD = "accounts.sso.oidc.provider_logout_url"
OIDC_AUTHENTICATION_CALLBACK_URL = "oidc_authentication_callback"

# --- LDAP (accounts.sso.directory): on once LDAP_SERVER_URL is set ------------------------
LDAP_SERVER_URL: str = env("LDAP_SERVER_URL", default="")
LDAP_START_TLS: bool = env.bool("LDAP_START_TLS", default=False)
# The account that looks users up (empty: an anonymous search).
LDAP_BIND_DN: str = env("LDAP_BIND_DN", default="")
LDAP_BIND_PASSWORD: str = env("LDAP_BIND_PASSWORD", default="")
LDAP_USER_BASE: str = env("LDAP_USER_BASE", default="")
LDAP_USER_FILTER: str = env("LDAP_USER_FILTER", default="(objectClass=person)")
LDAP_USERNAME_ATTRIBUTE: str = env("LDAP_USERNAME_ATTRIBUTE", default="uid")
# What never changes for a person (OpenLDAP's entryUUID; 389-DS: nsUniqueId).
LDAP_SUBJECT_ATTRIBUTE: str = env("LDAP_SUBJECT_ATTRIBUTE", default="entryUUID")
LDAP_GROUP_BASE: str = env("LDAP_GROUP_BASE", default="")
# {user_dn} and {username} are filled in, escaped.
LDAP_GROUP_FILTER: str = env(
    "LDAP_GROUP_FILTER",
    default="(|(member={user_dn})(uniqueMember={user_dn})(memberUid={username}))",
)
LDAP_TIMEOUT: float = env.float("LDAP_TIMEOUT", default=10.0)
# A person outside this group (its cn, under LDAP_GROUP_BASE) cannot sign in, and the sweep
# disables them; empty: everyone the user filter finds.
LDAP_REQUIRED_GROUP: str = env("LDAP_REQUIRED_GROUP", default="")
# The directory sweep (accounts.sso.sweep): every LDAP user looked up again this often
# (seconds; beat's "sweep-directory"), in pages of this many (one search each).
LDAP_SWEEP_INTERVAL: float = env.float("LDAP_SWEEP_INTERVAL", default=600.0)
LDAP_SWEEP_PAGE_SIZE: int = env.int("LDAP_SWEEP_PAGE_SIZE", default=100)

# --- Both: who a person is in the portal ---------------------------------------------------
# The login page's button: "Sign in with <SSO_SITE_NAME>".
SSO_SITE_NAME: str = env("SSO_SITE_NAME", default="single sign-on")
# The claim that holds the cluster user name (LDAP: LDAP_USERNAME_ATTRIBUTE).
SSO_USERNAME_CLAIM: str = env("SSO_USERNAME_CLAIM", default="preferred_username")
SSO_GROUPS_CLAIM: str = env("SSO_GROUPS_CLAIM", default="groups")
# JSON: group -> {"project": slug, "role": owner|member|viewer} (accounts.sso.claims).
SSO_GROUP_PROJECTS: str = env("SSO_GROUP_PROJECTS", default="")
# Members of this group are staff; empty: staff is set in the admin only.
SSO_STAFF_GROUP: str = env("SSO_STAFF_GROUP", default="")


def _origin(url: str) -> list[str]:
    parts = urlsplit(url)
    return [f"{parts.scheme}://{parts.netloc}"] if parts.scheme and parts.netloc else []


# Log-out is a form whose answer redirects to the provider: the CSP's form-action must let it.
SSO_FORM_ACTION_ORIGINS: list[str] = _origin(OIDC_OP_END_SESSION_ENDPOINT)

# django-axes counts password guesses only, not the OpenID callback's code exchange.
AXES_WHITELIST_CALLABLE = "accounts.sso.oidc.not_a_password_guess"
