"""The team side's forms: what a page or the API may post, parsed in one place.

`SubmissionForm` is the one parser of an upload's fields for the upload page and the API
(its OpenAPI description is built from it: portal/api_schema.form_schema). The rest are the
team page's small forms. Messages name the field and say what is allowed; nothing that
PostgreSQL would refuse (NUL in text, a number beyond a bigint) gets past them.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.core.exceptions import BadRequest

from portal.accounts.models import MAX_INVITE_USES, TokenScope
from portal.forms import first_error
from submissions.models import MODE_RANKED, Submission
from submissions.services import (
    MAX_BIG_INTEGER,
    MAX_METADATA_CHARS,
    MAX_NOTES_CHARS,
    text_problems,
    whole_number_problem,
)

NO_NUL = {"null_characters_not_allowed": "text may not contain NUL characters"}


def _text(max_length: int | None = None, *, required: bool = False,
          widget: type[forms.Widget] | None = None) -> forms.CharField:
    field = forms.CharField(required=required, max_length=max_length,
                            widget=widget or forms.TextInput)
    # The service's rules and messages in place of Django's validators of the same limits
    # (max_length stays: the API's schema reads it).
    field.validators = [lambda value: _refuse(text_problems(value, max_length))]
    return field


def _whole_number(*, required: bool) -> forms.IntegerField:
    message = f"expected a whole number from 0 to {MAX_BIG_INTEGER}"
    field = forms.IntegerField(required=required, min_value=0, max_value=MAX_BIG_INTEGER,
                               error_messages={"invalid": message})
    field.validators = [lambda value: _refuse([p for p in [whole_number_problem(value)] if p])]
    return field


def _refuse(problems: list[str]) -> None:
    if problems:
        raise forms.ValidationError(problems)


class SubmissionForm(forms.Form):
    # An empty file is the upload reader's to refuse, with the reason it gives any file.
    file = forms.FileField(allow_empty_file=True, error_messages={
        "required": "choose a .py, .zip or .tar.gz file to upload"})
    release = _whole_number(required=True)
    hardware = _text(required=True)
    operator = _text()  # for a single .py not named after its operator
    dsl = _text(1000)  # "cute" for every file, or "rms_norm=cute,silu_and_mul=triton"
    agent = _text(MAX_METADATA_CHARS)
    model = _text(MAX_METADATA_CHARS)
    output_tokens = _whole_number(required=False)
    input_tokens = _whole_number(required=False)  # what the agent read
    harness = _text(MAX_METADATA_CHARS)  # the agent harness: claude-code, codex, atrex-loop
    notes = _text(MAX_NOTES_CHARS, widget=forms.Textarea)
    mode = forms.ChoiceField(choices=Submission.Mode.choices, required=False, help_text=(
        "ranked (default): enters the boards, uses the daily submission quota; check: "
        "evaluated the same way, never ranked, uses the daily check quota"))

    def clean_mode(self) -> str:
        return str(self.cleaned_data.get("mode") or MODE_RANKED)

    def errors_by_field(self) -> dict[str, list[str]]:
        """The problems as the API answers them: {field: [messages]} (DRF's shape)."""
        return {name: [str(e) for e in errors] for name, errors in self.errors.items()}


class TokenCreateForm(forms.Form):
    token_name = _text(100, required=True)
    # Left out (older scripts post the name only): full, what every token could do before.
    token_scope = forms.ChoiceField(choices=TokenScope.choices, required=False)

    def clean_token_scope(self) -> str:
        return str(self.cleaned_data.get("token_scope") or TokenScope.FULL)


class TokenRevokeForm(forms.Form):
    revoke = _whole_number(required=True)


class InviteCreateForm(forms.Form):
    invite_uses = forms.IntegerField(required=False, min_value=1, max_value=MAX_INVITE_USES,
                                     error_messages={"invalid": "expected a whole number"})


class InviteRevokeForm(forms.Form):
    invite_revoke = _whole_number(required=True)


class ShareLinksForm(forms.Form):
    share_links = forms.ChoiceField(choices=[("on", "on"), ("off", "off")])

    @property
    def enabled(self) -> bool:
        return bool(self.cleaned_data["share_links"] == "on")


class WebhookForm(forms.Form):
    # Length, scheme and address are checked by submissions.webhooks, which says why it
    # refuses; here only what no text field may hold.
    webhook_url = _text()


class SubmissionShareForm(forms.Form):
    share = forms.ChoiceField(choices=[("create", "create"), ("revoke", "revoke")],
                              error_messages={"invalid_choice": "expected create or revoke",
                                              "required": "expected create or revoke"})


class ResultReviewForm(forms.Form):
    result = _whole_number(required=True)
    decision = forms.ChoiceField(choices=[("accept", "accept"), ("reject", "reject")])


def form_or_400(form: forms.Form) -> dict[str, Any]:
    """A small form's cleaned data, or a 400 naming the first problem (these forms come from
    the portal's own pages: a bad one is a hand-made request)."""
    if not form.is_valid():
        raise BadRequest(first_error(form))
    return form.cleaned_data
