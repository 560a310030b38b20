"""prefixsum.check.reflector: a correct Householder reflector passes, typical mistakes fail."""

import math

import numpy as np
import pytest

from prefixsum import check


def seed_reflector(x):
    """The handwritten notes' formulas (tred2's): h = |x|^2, g = -sign(f) sqrt(h), u = x - g e, H = h - f g."""
    h = float(np.dot(x, x))
    f = float(x[-1])
    g = -math.sqrt(h) if f >= 0 else math.sqrt(h)
    u = np.array(x, dtype=x.dtype)
    u[-1] = f - g
    return u, h - f * g


def wrong_sign(x):
    u, _ = seed_reflector(x)
    h, f = float(np.dot(x, x)), float(x[-1])
    g = math.sqrt(h) if f >= 0 else -math.sqrt(h)
    u[-1] = f - g
    return u, h - f * g


def numpy_sign(x):
    h, f = float(np.dot(x, x)), float(x[-1])
    g = -np.sign(f) * math.sqrt(h)
    u = x.copy()
    u[-1] = f - g
    return u, h - f * g


def forgot_fg(x):
    u, _ = seed_reflector(x)
    return u, float(np.dot(x, x))


def unchanged_u(x):
    _, H = seed_reflector(x)
    return x.copy(), H


def normalised(x):
    u, H = seed_reflector(x)
    return u / np.linalg.norm(u), 0.5  # the same P: u scaled by c, H by c^2


def scaled(x):
    """tred2's way: the reflector of x / s, s the sum of the magnitudes, is the reflector of x."""
    return seed_reflector(x.astype(np.float64) / np.abs(x.astype(np.float64)).sum())


def not_written(x):
    raise NotImplementedError("Exercise: compute u and H")


@pytest.mark.parametrize("dtype", (np.float32, np.float64))
@pytest.mark.parametrize("fn", (seed_reflector, normalised))
def test_a_correct_reflector_passes(fn, dtype):
    result = check.reflector(fn, dtype=dtype)
    assert result.passed and result.diagnosis == "pass"
    assert str(result) == f"PASS {fn.__name__}: 4 sizes from 2 to 8"


@pytest.mark.parametrize("dtype", (np.float32, np.float64))
def test_the_wrong_sign_fails_and_says_so(dtype):
    result = check.reflector(wrong_sign, dtype=dtype)
    assert not result.passed
    assert (result.diagnosis, result.size, result.index) == ("wrong-result", 2, 1)
    assert "wrong sign" in result.hint
    assert str(result).startswith("FAIL wrong_sign: wrong-result at n=2, index 1. a random x: P x = +sign(f) |x| e")
    assert "\n" not in str(result)


@pytest.mark.parametrize(
    "fn, words",
    [
        (numpy_sign, "np.sign(0) is 0"),
        (forgot_fg, "H must be |u|^2 / 2"),
        (unchanged_u, "H must be |u|^2 / 2"),
    ],
)
def test_other_mistakes_fail_with_a_hint(fn, words):
    result = check.reflector(fn)
    assert not result.passed and result.diagnosis == "wrong-result"
    assert words in result.hint, str(result)


def test_a_blank_exercise_is_reported_not_attempted_with_its_message():
    result = check.reflector(not_written)
    assert not result.passed and result.diagnosis == "exception"
    assert str(result) == (
        "NOT ATTEMPTED not_written: not attempted yet: the exercise's cell still raises "
        "NotImplementedError (Exercise: compute u and H). Write your code in place of the raise, "
        "run that cell, then this check."
    )


def test_a_wrong_return_value_is_an_exception_diagnosis():
    result = check.reflector(lambda x: x)
    assert result.diagnosis == "exception" and "(u, H)" in result.hint and result.name == "reflector"


def test_the_verdict_is_deterministic():
    assert str(check.reflector(wrong_sign, sizes=(3, 5))) == str(check.reflector(wrong_sign, sizes=(5, 3)))


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="at least 2"):
        check.reflector(seed_reflector, sizes=(1, 4))
    with pytest.raises(TypeError, match="float32 or float64"):
        check.reflector(seed_reflector, dtype=np.int32)


@pytest.mark.parametrize("magnitude", (1e200, 1e-200))
def test_at_extreme_magnitudes_only_a_scaled_reflector_passes(magnitude):
    assert str(check.reflector(scaled, magnitude=magnitude)) == "PASS scaled: 4 sizes from 2 to 8"
    result = check.reflector(seed_reflector, magnitude=magnitude)
    assert result.diagnosis == "wrong-result" and "h = |x|^2 is not" in result.hint, str(result)
    assert check.reflector(scaled, dtype=np.float32).passed


def test_a_magnitude_the_dtype_cannot_hold_is_refused():
    with pytest.raises(ValueError, match="magnitude must be a number from"):
        check.reflector(scaled, magnitude=1e200, dtype=np.float32)
    with pytest.raises(ValueError, match="magnitude must be a number from"):
        check.reflector(scaled, magnitude=0)
