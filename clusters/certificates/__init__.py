"""Cluster identities without stored private keys.

`signing` makes keys and short-lived SSH user certificates (pure, cryptography only);
`authorities` holds the portal's CAs (create, rotate, retire, the trusted keys' lines);
`logins` turns an account into how the gateway logs in (a certificate per new connection,
an installed key, a stored key) and refuses revoked users; `trust_file` writes a
TrustedUserCAKeys file; `installed` is the self-service key a user adds to their
authorized_keys.
"""
