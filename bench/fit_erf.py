#!/usr/bin/env python3
"""fit_erf.py: the coefficients of k_erff (src/tensor/k_math.h): erf(x) = x P(x^2) / Q(x^2) on
[0, 4], P of degree 6 and Q of degree 4 with Q(0) = 1, fitted to erf(x)/x by linearised least
squares (P - g Q = 0, weighted by 1/(g Q) of the previous pass: relative error) with Lawson's
reweighting towards the largest errors, then checked in float arithmetic against math.erf.
Prints the coefficients, lowest degree first, and the errors in ulp. Needs numpy."""
import math

import numpy as np

N, DP, DQ = 4000, 6, 4
x = np.linspace(0, 4.0, N)
s = x * x
g = np.array([math.erf(v) / v if v > 0 else 2 / math.sqrt(math.pi) for v in x])
w, q_prev = np.ones(N), np.ones(N)
for it in range(60):
    A = np.hstack([np.vander(s, DP + 1, increasing=True),
                   -g[:, None] * np.vander(s, DQ + 1, increasing=True)[:, 1:]])
    W = (w / (g * q_prev))[:, None]
    c = np.linalg.lstsq(A * W, g * W[:, 0], rcond=None)[0]
    p, q = c[:DP + 1], np.concatenate([[1.0], c[DP + 1:]])
    q_prev = np.polyval(q[::-1], s)
    err = (np.polyval(p[::-1], s) / q_prev - g) / g
    if it > 5:
        w = w * np.sqrt(np.abs(err) / np.abs(err).max()) + 1e-12
        w /= w.max()
print("max relative error of the fit:", np.abs(err).max())
print("P:", ", ".join(repr(v) for v in p))
print("Q:", ", ".join(repr(v) for v in q))

f32 = np.float32
x32 = np.linspace(0, 4.0, 200001).astype(f32)[1:]
s32 = x32 * x32


def horner(coef, v):
    acc = np.full_like(v, f32(coef[-1]))
    for k in coef[-2::-1]:
        acc = (acc * v + f32(k)).astype(f32)
    return acc


y = np.minimum((x32 * horner(p, s32) / horner(q, s32)).astype(f32), f32(1))
ref = np.array([math.erf(float(v)) for v in x32])
ulp = np.abs(y - ref) / np.spacing(ref.astype(f32))
print(f"in float: max {ulp.max():.2f} ulp, mean {ulp.mean():.2f} ulp")
