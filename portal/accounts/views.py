"""The sign-up page (portal/accounts/signup.py does the work)."""

from __future__ import annotations

from django import forms
from django.contrib.auth import login
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from portal.accounts.signup import MAX_TEAM_NAME, SignupRefused, signup, signup_mode
from portal.forms import first_error


class SignupForm(forms.Form):
    username = forms.CharField(max_length=150)
    password = forms.CharField(widget=forms.PasswordInput, max_length=200)
    team_name = forms.CharField(max_length=MAX_TEAM_NAME, required=False)
    invite_code = forms.CharField(max_length=40, required=False)


@require_http_methods(["GET", "POST"])
def signup_page(request: HttpRequest) -> HttpResponse:
    mode = signup_mode()
    form = SignupForm(request.POST or None,
                      initial={"invite_code": request.GET.get("invite", "")})
    context = {"form": form, "mode": mode, "error": None,
               "invite": request.GET.get("invite", "")}
    if request.method == "POST":
        if not form.is_valid():
            context["error"] = first_error(form)
            return render(request, "registration/signup.html", context, status=400)
        try:
            made = signup(**form.cleaned_data)
        except SignupRefused as exc:
            context["error"] = str(exc)
            return render(request, "registration/signup.html", context, status=400)
        if not made.active:
            return render(request, "registration/signup_waiting.html", {"made": made})
        login(request, made.user, backend="django.contrib.auth.backends.ModelBackend")
        return redirect("team")
    return render(request, "registration/signup.html", context)
