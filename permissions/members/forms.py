"""The forms of the setup, invite and members pages: they check what was typed; services do the writing."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib.auth.forms import SetPasswordMixin
from django.contrib.auth.validators import UnicodeUsernameValidator

from permissions.models import TeamRole, User


class AccountForm(SetPasswordMixin, forms.Form):
    """A new account's name and password, the password checked by AUTH_PASSWORD_VALIDATORS."""

    username = forms.CharField(
        max_length=150,
        validators=[UnicodeUsernameValidator()],
        help_text="Letters, digits and @ . + - _ only; you sign in with it.",
        widget=forms.TextInput(attrs={"autocomplete": "username", "autocapitalize": "none"}),
    )
    email = forms.EmailField(required=False, widget=forms.EmailInput(attrs={"autocomplete": "email"}))
    password1, password2 = SetPasswordMixin.create_password_fields(label2="Password again")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Django's help lists every validator in HTML; their errors say the same when one is not met.
        self.fields["password1"].help_text = "At least 8 characters, not a common password, not only digits."
        self.fields["password2"].help_text = ""

    def clean_username(self) -> str:
        username = self.cleaned_data["username"]
        if User.objects.filter(username__iexact=username).exists():
            raise forms.ValidationError("That username is taken.")
        return username

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        self.validate_passwords()
        # The similarity check compares the password with the account it is for.
        self.validate_password_for_user(User(username=cleaned.get("username", ""), email=cleaned.get("email", "")))
        return cleaned


class SetupForm(AccountForm):
    team_name = forms.CharField(max_length=200, label="Team name", help_text="Your organisation, as your people know it.")

    field_order = ["team_name", "username", "email", "password1", "password2"]


class InviteForm(forms.Form):
    email = forms.EmailField(required=False, help_text="Whom the link is for (a note: Cairn sends no email).")
    role = forms.ChoiceField(choices=TeamRole.choices, initial=TeamRole.MEMBER)


class RoleForm(forms.Form):
    role = forms.ChoiceField(choices=TeamRole.choices)
