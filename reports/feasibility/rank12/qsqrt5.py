"""Exact arithmetic in Q(sqrt 5) with fractions only: a + b sqrt 5, a and b rational.

The sign of a + b sqrt 5 is decided exactly (when a and b have opposite signs, by
comparing a^2 with 5 b^2), so every comparison below is exact. Shared by
check_delsarte.py and check_equality_case.py; parse() reads the JSON form
["a", "b"] (two rational strings) written by the certificates.
"""
from fractions import Fraction as F


class Q5:
    """a + b sqrt 5 with rational a, b."""
    __slots__ = ("a", "b")

    def __init__(self, a, b=0):
        self.a, self.b = F(a), F(b)

    @staticmethod
    def _of(o):
        return o if isinstance(o, Q5) else Q5(o)

    def __add__(self, o):
        o = Q5._of(o)
        return Q5(self.a + o.a, self.b + o.b)

    __radd__ = __add__

    def __neg__(self):
        return Q5(-self.a, -self.b)

    def __sub__(self, o):
        return self + (-Q5._of(o))

    def __rsub__(self, o):
        return Q5._of(o) - self

    def __mul__(self, o):
        o = Q5._of(o)
        return Q5(self.a * o.a + 5 * self.b * o.b, self.a * o.b + self.b * o.a)

    __rmul__ = __mul__

    def __pow__(self, k):
        out = Q5(1)
        for _ in range(k):
            out = out * self
        return out

    def inv(self):
        d = self.a * self.a - 5 * self.b * self.b     # != 0 unless a = b = 0 (sqrt 5 irrational)
        if d == 0:
            raise ZeroDivisionError("0 in Q(sqrt 5)")
        return Q5(self.a / d, -self.b / d)

    def __truediv__(self, o):
        return self * Q5._of(o).inv()

    def __rtruediv__(self, o):
        return Q5._of(o) * self.inv()

    def __eq__(self, o):
        o = Q5._of(o)
        return self.a == o.a and self.b == o.b

    def __hash__(self):
        return hash((self.a, self.b))

    def sign(self):
        """Exact sign (-1, 0, 1) of a + b sqrt 5."""
        a, b = self.a, self.b
        if b == 0:
            return (a > 0) - (a < 0)
        if a == 0 or (a > 0) == (b > 0):
            return 1 if b > 0 else -1
        s = (a * a > 5 * b * b) - (a * a < 5 * b * b)     # opposite signs: |a| against |b| sqrt 5
        return s if a > 0 else -s

    def __lt__(self, o):
        return (self - o).sign() < 0

    def __le__(self, o):
        return (self - o).sign() <= 0

    def __gt__(self, o):
        return (self - o).sign() > 0

    def __ge__(self, o):
        return (self - o).sign() >= 0

    def __float__(self):
        return float(self.a) + float(self.b) * 5 ** 0.5

    def __repr__(self):
        return f"({self.a}) + ({self.b}) sqrt5"


SQRT5 = Q5(0, 1)


def parse(v):
    """["a", "b"] (rational strings) -> a + b sqrt 5; a plain rational string is b = 0."""
    if isinstance(v, str):
        return Q5(F(v))
    if not (isinstance(v, list) and len(v) == 2 and all(isinstance(x, str) for x in v)):
        raise AssertionError(f"not an element of Q(sqrt 5): {v!r}")
    return Q5(F(v[0]), F(v[1]))
