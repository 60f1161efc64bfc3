from django import forms

from accounts.models import PersonalToken
from accounts.services import DEFAULT_TOKEN_DAYS, MAX_TOKEN_DAYS


class TokenForm(forms.Form):
    name = forms.CharField(
        max_length=100, help_text="What the token is for, e.g. 'laptop notebook'."
    )
    scope = forms.ChoiceField(
        choices=PersonalToken.Scope.choices,
        initial=PersonalToken.Scope.READ,
        help_text="Read: look at projects and jobs. Read and submit: also submit and cancel jobs.",
    )
    days = forms.IntegerField(
        min_value=1,
        max_value=MAX_TOKEN_DAYS,
        initial=DEFAULT_TOKEN_DAYS,
        label="Expires in (days)",
    )
