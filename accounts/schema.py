"""The bearer-token scheme in the OpenAPI schema."""

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension


class PersonalTokenScheme(OpenApiAuthenticationExtension):
    target_class = "accounts.authentication.PersonalTokenAuthentication"
    name = "personalToken"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {
            "type": "http",
            "scheme": "bearer",
            "bearerFormat": "ptk_<prefix>_<secret>",
            "description": "A personal access token from /account/tokens/.",
        }


_DETAIL: dict[str, Any] = {
    "type": "object",
    "properties": {"detail": {"type": "string"}},
    "required": ["detail"],
}
# A 400 names each bad field (or non_field_errors) with its messages; a body that
# cannot be parsed at all gets a `detail`.
_FIELD_ERRORS: dict[str, Any] = {
    "type": "object",
    "additionalProperties": {
        "anyOf": [
            {"type": "array", "items": {"type": "string"}},
            {"type": "object"},
            {"type": "string"},
        ]
    },
}
_ERRORS: dict[str, tuple[str, dict[str, Any]]] = {
    "400": ("A parameter or field to change, with what to change.", _FIELD_ERRORS),
    "401": ("No valid credentials: a missing, unknown, expired or revoked token.", _DETAIL),
    "403": ("Not allowed: the role, or a read-only token on a write.", _DETAIL),
    "404": ("Missing, or not in one of your projects (the same answer).", _DETAIL),
    "429": ("Too many requests with this token; see Retry-After.", _DETAIL),
}
# Only an operation that reads a body can be sent one of a type it does not read.
_UNSUPPORTED_BODY = (
    "The body's Content-Type is not one the endpoint reads (see its request body), or a "
    "multipart body whose parts cannot be read.",
    _DETAIL,
)


def add_error_responses(result: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """Document the refusals every endpoint can give (drf-spectacular postprocessing hook)."""
    for path in result.get("paths", {}).values():
        for operation in path.values():
            responses = operation.setdefault("responses", {})
            errors = dict(_ERRORS)
            if "requestBody" in operation:
                errors["415"] = _UNSUPPORTED_BODY
            for code, (description, schema) in errors.items():
                responses.setdefault(
                    code,
                    {
                        "description": description,
                        "content": {"application/json": {"schema": schema}},
                    },
                )
    return result
