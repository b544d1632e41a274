"""The admin tools' forms: weights (by hand or from an importance file), which version is
active, how fallbacks score, freezing a board. Each says what is wrong with what was posted;
none changes anything (the services do)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from django import forms

from leaderboard import tiers
from leaderboard.scoring import WeightError
from submissions.forms import NO_NUL

WEIGHT_PREFIX = "w_"  # one field per operator: w_<operator>


class WeightsForm(forms.Form):
    """A new weight version entered by hand: one number per operator (blank: 0)."""

    note = forms.CharField(required=False, max_length=300, error_messages=NO_NUL)

    def __init__(self, *args: Any, operators: Iterable[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for name in operators:
            self.fields[f"{WEIGHT_PREFIX}{name}"] = forms.FloatField(
                required=False, error_messages={"invalid": f"{name}: expected a number"})

    def weights(self) -> dict[str, float]:
        """The numbers entered (validated); a blank one is left out (it weighs 0)."""
        return {key[len(WEIGHT_PREFIX):]: value for key, value in self.cleaned_data.items()
                if key.startswith(WEIGHT_PREFIX) and value is not None}


class ImportanceFileForm(forms.Form):
    """A new weight version from an operator_importance.json (the release format's)."""

    importance = forms.FileField()

    def clean_importance(self) -> dict[str, float]:
        upload = self.cleaned_data["importance"]
        try:
            doc = json.loads(upload.read().decode("utf-8"))
            return {op: float(e["importance_score"]) for op, e in doc["operators"].items()}
        except (UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError, AttributeError,
                ValueError) as exc:
            raise forms.ValidationError("the file is not an operator_importance.json "
                                        f"({type(exc).__name__}: {exc})") from None


class ActivateForm(forms.Form):
    activate = forms.IntegerField(min_value=1, max_value=2**31 - 1)


class FallbackPolicyForm(forms.Form):
    fallback_scores_zero = forms.ChoiceField(choices=[("1", "fallbacks score 0"),
                                                      ("0", "fallbacks score their attainment")])

    @property
    def scores_zero(self) -> bool:
        return bool(self.cleaned_data["fallback_scores_zero"] == "1")


class RankedTierForm(forms.Form):
    ranked_tier = forms.ChoiceField(choices=tiers.CHOICES)


class BoardFreezeForm(forms.Form):
    action = forms.ChoiceField(choices=[("freeze", "freeze"), ("unfreeze", "unfreeze")])


def first_problem(form: forms.Form) -> WeightError:
    """The weights page shows one message: the first problem of the form posted."""
    for name, errors in form.errors.items():
        message = str(errors[0])
        return WeightError(message if ":" in message or name == "__all__" else f"{name}: {message}")
    return WeightError("the form is empty")
