"""Error answers in the OpenAPI schema: one body shape, named per status code.

Views list the errors they raise themselves (`errors(400, 404)`); the answers every operation
can give because every request goes through the team-token authentication (401 for a bad
token, 429 for too many bad tokens from one address) are added by a post-processing hook.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, cast

from drf_spectacular.utils import OpenApiResponse

ERROR = {"type": "object", "properties": {"detail": {"type": "string"}}, "required": ["detail"]}
# DRF's validation errors name the fields: {"file": ["..."], "release": ["..."]}.
VALIDATION_ERROR = {"type": "object", "properties": {"detail": {"type": "string"}},
                    "additionalProperties": {"type": "array", "items": {"type": "string"}}}
WHY = {
    400: "The request is malformed or the upload is rejected; the body says why.",
    401: "No credentials, or an invalid or revoked team token.",
    403: "Signed in, but not a member of any team; or a team token whose scope (read-only, "
         "checks only) does not allow this.",
    404: "No such object, or not yours to see.",
    409: "The Idempotency-Key was used for a different upload.",
    429: "Over a rate limit or quota; Retry-After says when to try again.",
}


def errors(*codes: int) -> dict[int, OpenApiResponse]:
    return {code: OpenApiResponse(VALIDATION_ERROR if code == 400 else ERROR, description=WHY[code])
            for code in codes}


def add_token_errors(result: dict[str, Any], generator: Any, request: Any,
                     public: bool) -> dict[str, Any]:
    """drf-spectacular post-processing hook: 401 and 429 on every operation."""
    for item in result.get("paths", {}).values():
        for operation in item.values():
            responses = operation.setdefault("responses", {})
            for code in (401, 429):
                responses.setdefault(str(code), {
                    "description": WHY[code],
                    "content": {"application/json": {"schema": ERROR}}})
    return result


def form_schema(form_class: type[Any]) -> dict[str, Any]:
    """An OpenAPI object schema of a Django form's fields, for the API views that parse their
    body with the same form as a page does (one parser, one description)."""
    from django import forms

    properties: dict[str, Any] = {}
    required = []
    for name, field in form_class.base_fields.items():
        if isinstance(field, forms.FileField):
            prop: dict[str, Any] = {"type": "string", "format": "binary"}
        elif isinstance(field, forms.IntegerField):
            prop = {"type": "integer"}
            for key, value in (("minimum", field.min_value), ("maximum", field.max_value)):
                if value is not None:
                    prop[key] = value
        elif isinstance(field, forms.ChoiceField):
            choices = cast("Iterable[tuple[object, object]]", field.choices)
            prop = {"type": "string", "enum": [str(value) for value, _ in choices]}
        else:
            prop = {"type": "string"}
            if getattr(field, "max_length", None) is not None:
                prop["maxLength"] = field.max_length
        if field.help_text:
            prop["description"] = str(field.help_text)
        properties[name] = prop
        if field.required:
            required.append(name)
    return {"type": "object", "properties": properties, "required": required}



def with_fields(**extra: Any) -> Any:
    """Class decorator: adds to a serializer fields its class body cannot name (a keyword, a
    name DRF's Field already uses); a trailing underscore is dropped (`from_` is "from")."""
    def add(cls: Any) -> Any:
        cls._declared_fields = {**cls._declared_fields,
                                **{name.rstrip("_"): field for name, field in extra.items()}}
        return cls
    return add
