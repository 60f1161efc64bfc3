"""Single sign-on: OpenID Connect and LDAP users as portal users (docs/sso.md)."""
