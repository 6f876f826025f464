"""Which passwords an account may have (docs/accounts.md#registration): long enough, not among
the most common, not mostly the account's own address or name."""

from __future__ import annotations

import pytest

from openkb.accounts.users import check_password
from openkb.errors import ValidationError

EMAIL, NAME = "jane.doe@example.com", "Jane Doe"


@pytest.mark.parametrize(
    "password",
    [
        "password",
        "Password1",
        "12345678",
        "qwertyuiop",
        "iloveyou",
        "abcdefgh",
        "x" * 200,  # past zxcvbn's 72 characters: its start is what it scores
        "janedoe2024",  # the address, and a year
        "jane.doe@example.com",
        "Jane Doe x7qp",
        "openkb2026",  # the product's own name
    ],
)
def test_refused(password):
    with pytest.raises(ValidationError) as exc:
        check_password(password, EMAIL, NAME)
    assert exc.value.extra == {"field": "password", "reason": "too_guessable"}
    assert exc.value.detail.startswith("password is too easy to guess (")


@pytest.mark.parametrize(
    "password",
    ["correct horse battery staple", "long enough pw", "Tr0ub4dor&3", "janedoe and 3 ferns", "pw-123456"],
)
def test_accepted(password):
    check_password(password, EMAIL, NAME)


def test_length_comes_first():
    with pytest.raises(ValidationError, match="at least 8 characters"):
        check_password("Zq9!", EMAIL)
    with pytest.raises(ValidationError, match="too long"):
        check_password("horse " * 200)
