"""What every page and 400 says of a form that did not validate."""

from __future__ import annotations

from django import forms


def first_error(form: forms.Form) -> str:
    """The first problem of an invalid form: "field: message", or the message alone for a
    problem of the whole form; "" when there is none."""
    for name, errors in form.errors.items():
        return f"{name}: {errors[0]}" if name != "__all__" else str(errors[0])
    return ""
