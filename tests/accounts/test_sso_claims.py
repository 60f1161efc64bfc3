"""The claim mapping (accounts.sso.claims): who a provider's user is, and what groups give."""

import pytest

from accounts.sso.claims import (
    MappingError,
    ProjectGrant,
    cluster_username_of,
    group_projects_parse,
    mapped_projects,
    memberships_wanted,
    profile_from_claims,
    staff_wanted,
)

ISSUER = "https://idp.example.org/realms/hpc"

# An ID token's claims merged with userinfo's, as Keycloak gives them with a groups mapper.
KEYCLOAK = {
    "iss": ISSUER,
    "sub": "f3b9e8a2-7c41-4f0e-9d1a-2b6c5e8f0a13",
    "aud": "portal",
    "preferred_username": "alice",
    "email": "alice@example.org",
    "given_name": "Alice",
    "family_name": "Liddell",
    "groups": ["/ml-team", "/gpu-users"],
}


def test_a_profile_is_its_issuer_and_subject_with_the_cluster_name_from_the_claim() -> None:
    profile = profile_from_claims(
        KEYCLOAK, issuer=ISSUER, username_claim="preferred_username", groups_claim="groups"
    )
    assert (profile.issuer, profile.subject) == (ISSUER, KEYCLOAK["sub"])
    assert profile.cluster_username == "alice" and profile.username == "alice"
    assert (profile.email, profile.first_name, profile.last_name) == (
        "alice@example.org",
        "Alice",
        "Liddell",
    )
    # Keycloak's group paths lose their leading slash.
    assert profile.groups == {"ml-team", "gpu-users"}


def test_the_cluster_name_comes_from_the_configured_claim() -> None:
    claims = {**KEYCLOAK, "uid": "al1ce"}
    profile = profile_from_claims(claims, issuer=ISSUER, username_claim="uid", groups_claim="x")
    assert profile.cluster_username == "al1ce"
    assert profile.groups == frozenset()  # no such claim: no groups


@pytest.mark.parametrize(
    "value",
    ["Alice", "alice@example.org", "al ice", "-alice", "a" * 33, "", None, 42, ["alice"]],
)
def test_a_name_no_cluster_would_take_is_no_cluster_name(value: object) -> None:
    assert cluster_username_of(value) is None
    claims = {**KEYCLOAK, "preferred_username": value}
    profile = profile_from_claims(
        claims, issuer=ISSUER, username_claim="preferred_username", groups_claim="groups"
    )
    assert profile.cluster_username is None
    assert profile.username  # the portal user still gets a name (e-mail's local part)


def test_claims_without_a_subject_are_refused() -> None:
    claims = {key: value for key, value in KEYCLOAK.items() if key != "sub"}
    with pytest.raises(ValueError, match="subject"):
        profile_from_claims(claims, issuer=ISSUER, username_claim="sub", groups_claim="groups")


def test_a_groups_claim_of_one_string_or_junk() -> None:
    one = profile_from_claims(
        {**KEYCLOAK, "groups": "ml-team"}, issuer=ISSUER, username_claim="x", groups_claim="groups"
    )
    assert one.groups == {"ml-team"}
    junk = profile_from_claims(
        {**KEYCLOAK, "groups": [1, None, "", "ok"]},
        issuer=ISSUER,
        username_claim="x",
        groups_claim="groups",
    )
    assert junk.groups == {"ok"}


MAPPING = """{
  "ml-team": {"project": "vision", "role": "member"},
  "ml-leads": [{"project": "vision", "role": "owner"}, {"project": "nlp"}],
  "auditors": {"project": "nlp", "role": "viewer"}
}"""


def test_the_group_mapping_reads_json_and_the_strongest_role_wins() -> None:
    mapping = group_projects_parse(MAPPING)
    assert mapping["ml-leads"] == (
        ProjectGrant(project="vision", role="owner"),
        ProjectGrant(project="nlp", role="member"),  # role defaults to member
    )
    assert mapped_projects(mapping) == {"vision", "nlp"}
    assert memberships_wanted({"ml-team"}, mapping) == {"vision": "member"}
    assert memberships_wanted({"ml-team", "ml-leads", "auditors"}, mapping) == {
        "vision": "owner",
        "nlp": "member",
    }
    assert memberships_wanted({"auditors", "unmapped"}, mapping) == {"nlp": "viewer"}
    assert memberships_wanted(set(), mapping) == {}
    assert group_projects_parse("") == {}
    # A test or a site's settings module may give the dict itself.
    assert group_projects_parse({"g": {"project": "p"}}) == {"g": (ProjectGrant("p", "member"),)}


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        ("{not json", "is not JSON"),
        ('["vision"]', "must be a JSON object"),
        ('{"ml-team": "vision"}', 'SSO_GROUP_PROJECTS["ml-team"]: give {"project"'),
        ('{"ml-team": {"project": "vision", "role": "admin"}}', 'role "admin" is not one of'),
    ],
)
def test_a_bad_mapping_names_what_to_change(raw: str, words: str) -> None:
    with pytest.raises(MappingError, match=words.replace("[", r"\[").replace("{", r"\{")):
        group_projects_parse(raw)


def test_staff_follows_the_staff_group_only_when_one_is_set() -> None:
    assert staff_wanted({"hpc-admins", "ml-team"}, "hpc-admins") is True
    assert staff_wanted({"ml-team"}, "hpc-admins") is False
    assert staff_wanted({"hpc-admins"}, "") is None
