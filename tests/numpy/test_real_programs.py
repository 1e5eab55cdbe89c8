"""Real programs, written as their authors would (issue 30's done-when): NumPy and SciPy
code with no concession to Yota, differentiated as it is.

1. black-box variational inference: an ELBO with ``scipy.stats.norm.logpdf``, the
   reparameterized samples drawn inside the objective, the mean of a list of log joints;
2. a Gaussian mixture's log likelihood: ``scipy.special.logsumexp`` and
   ``scipy.stats.multivariate_normal.logpdf`` per component;
3. a negative-binomial likelihood with ``scipy.special.gammaln``;
4. a Gaussian process's negative log marginal likelihood: ``scipy.linalg.cho_factor`` and
   ``cho_solve``;
5. an expected-improvement acquisition (``norm.cdf``/``norm.pdf`` of a GP posterior),
   differentiated with respect to the query points;
6. a 2-D convolution layer with ``scipy.signal.convolve2d`` over a batch of images;
7. an SIR epidemic fitted through ``scipy.integrate.odeint``, an opaque primitive whose
   gradient is the user's adjoint rule (another opaque primitive);
8. a semi-Lagrangian advection step: the smoke field, a plain array read from outside,
   gathered at ``np.floor``'ed traced positions with bilinear weights.

For each: ``yota.grad`` on llvm (compiled) and on the interpreter agree with each other
and with the plain run's value, and the gradient matches central finite differences
along a random direction per argument (``gradcheck``). The step is 1e-6: for these
float64 programs the truncation error is O(h^2 f''') ~ 1e-12 and the rounding error
~ 1e-16 |f| / h ~ 1e-10 |f|, so the default tolerance (rtol 1e-6, atol 1e-9, scaled by
10) holds with a wide margin; the ODE's solver tolerance (1e-10) adds ~1e-10 / 1e-6 =
1e-4 relative noise to its differences, so it is checked at rtol 1e-4. Sizes are small:
the whole file runs in a few seconds.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from scipy.integrate import odeint
from scipy.linalg import cho_factor, cho_solve
from scipy.signal import convolve2d
from scipy.special import expit, gammaln, logsumexp
from scipy.stats import multivariate_normal, norm
from support.gradcheck import check_grad

import yota

RNG = np.random.default_rng(30)


# -- 1. black-box variational inference -------------------------------------------------------------
T_OBS = np.linspace(-1.0, 1.0, 8)
Y_OBS = 0.7 - 1.3 * T_OBS + 0.2 * RNG.standard_normal(8)


def log_joint(z: Any) -> Any:
    """Bayesian linear regression: a standard normal prior on (intercept, slope)."""
    prior = np.sum(norm.logpdf(z, 0.0, 1.0))
    return prior + np.sum(norm.logpdf(Y_OBS, loc=z[0] + z[1] * T_OBS, scale=0.3))


def elbo(mean: Any, log_std: Any) -> Any:
    rs = np.random.default_rng(0)  # the same draws at every call: common random numbers
    samples = rs.standard_normal((5, 2)) * np.exp(log_std) + mean
    entropy = 0.5 * mean.shape[0] * (1.0 + np.log(2 * np.pi)) + np.sum(log_std)
    return np.mean([log_joint(s) for s in samples]) + entropy


# -- 2. a Gaussian mixture ---------------------------------------------------------------------------
X_GMM = np.concatenate([RNG.standard_normal((6, 2)) + 2.0, RNG.standard_normal((6, 2)) - 1.0])


def gmm_log_likelihood(params: dict[str, Any], data: np.ndarray) -> Any:
    log_weights = params["logits"] - logsumexp(params["logits"])
    cluster_lls = []
    for log_w, mean, chol in zip(log_weights, params["means"], params["chols"], strict=True):
        cov = chol @ chol.T + 0.1 * np.eye(2)
        cluster_lls.append(log_w + multivariate_normal.logpdf(data, mean, cov))
    return np.sum(logsumexp(np.array(cluster_lls).T, axis=1))


GMM_PARAMS = {"logits": np.array([0.2, -0.1]),
              "means": np.array([[1.5, 1.8], [-0.5, -1.2]]),
              "chols": np.array([[[1.0, 0.0], [0.3, 0.8]], [[0.7, 0.0], [-0.2, 1.1]]])}


# -- 3. a negative-binomial likelihood ----------------------------------------------------------------
COUNTS = np.array([0, 3, 1, 7, 2, 2, 5, 0, 1, 4])


def negbin_loglike(r: Any, p: Any, x: np.ndarray) -> Any:
    return np.sum(gammaln(r + x) - gammaln(r) - gammaln(x + 1) + x * np.log(p)
                  + r * np.log(1 - p))


def negbin_objective(params: np.ndarray, x: np.ndarray) -> Any:
    r, p = np.exp(params[0]), expit(params[1])
    return -negbin_loglike(r, p, x)


# -- 4. a Gaussian process ------------------------------------------------------------------------------
X_GP = np.linspace(0.0, 3.0, 7)[:, None]
Y_GP = np.sin(2.0 * X_GP[:, 0]) + 0.05 * RNG.standard_normal(7)


def rbf(a: np.ndarray, b: np.ndarray, log_ls: Any, log_var: Any) -> Any:
    sqdist = np.sum(a ** 2, 1)[:, None] + np.sum(b ** 2, 1)[None, :] - 2 * a @ b.T
    return np.exp(log_var) * np.exp(-0.5 * sqdist / np.exp(2 * log_ls))


def gp_neg_log_marginal(params: np.ndarray, x: np.ndarray, y: np.ndarray) -> Any:
    log_ls, log_var, log_noise = params
    k = rbf(x, x, log_ls, log_var) + np.exp(log_noise) * np.eye(len(x))
    c_and_lower = cho_factor(k, lower=True)
    alpha = cho_solve(c_and_lower, y)
    log_det = 2.0 * np.sum(np.log(np.diag(c_and_lower[0])))
    return 0.5 * y @ alpha + 0.5 * log_det + 0.5 * len(x) * np.log(2 * np.pi)


# -- 5. expected improvement -------------------------------------------------------------------------
GP_HYPERS = np.array([np.log(0.6), 0.0, np.log(1e-2)])


def expected_improvement(xq: np.ndarray, x: np.ndarray, y: np.ndarray) -> Any:
    log_ls, log_var, log_noise = GP_HYPERS
    k = rbf(x, x, log_ls, log_var) + np.exp(log_noise) * np.eye(len(x))
    ks = rbf(xq[:, None], x, log_ls, log_var)
    c_and_lower = cho_factor(k, lower=True)
    mu = ks @ cho_solve(c_and_lower, y)
    var = np.exp(log_var) - np.sum(ks * cho_solve(c_and_lower, ks.T).T, axis=1)
    sigma = np.sqrt(np.maximum(var, 1e-12))
    best = np.min(y)
    z = (best - mu) / sigma
    return np.sum((best - mu) * norm.cdf(z) + sigma * norm.pdf(z))


# -- 6. a 2-D convolution layer -------------------------------------------------------------------------
IMAGES = RNG.standard_normal((2, 6, 6))
TARGETS = RNG.standard_normal((2, 2))


def conv_layer_loss(filters: np.ndarray, bias: np.ndarray, images: np.ndarray,
                    targets: np.ndarray) -> Any:
    features = []
    for image in images:
        maps = [np.tanh(convolve2d(image, f, mode="valid") + b)
                for f, b in zip(filters, bias, strict=True)]
        features.append([np.mean(m) for m in maps])
    return np.sum((np.array(features) - targets) ** 2)


# -- 7. an ODE through scipy.integrate.odeint ------------------------------------------------------------
def sir(s: np.ndarray, t: float, beta: float, gamma: float) -> np.ndarray:
    susceptible, infected, _ = s
    return np.array([-beta * susceptible * infected,
                     beta * susceptible * infected - gamma * infected,
                     gamma * infected])


def sir_jacobians(s: np.ndarray, beta: float, gamma: float) -> tuple[np.ndarray, np.ndarray]:
    """d sir / d s and d sir / d (beta, gamma)."""
    su, inf, _ = s
    return (np.array([[-beta * inf, -beta * su, 0.0],
                      [beta * inf, beta * su - gamma, 0.0],
                      [0.0, gamma, 0.0]]),
            np.array([[-su * inf, 0.0], [su * inf, -inf], [0.0, inf]]))


@yota.primitive(opaque=True)
def epidemic(theta: Any, s0: Any, times: Any) -> Any:
    return odeint(sir, s0, times, args=(theta[0], theta[1]), rtol=1e-10, atol=1e-12)


@yota.primitive(opaque=True)
def epidemic_adjoint(path: Any, theta: Any, times: Any, dpath: Any) -> Any:
    """d sum(dpath * path) / d theta: the adjoint state integrated backwards from each
    observation to the one before it, collecting the parameter gradient on the way."""
    lam, g = dpath[-1].copy(), np.zeros(2)

    def backwards(z: np.ndarray, t: float, beta: float, gamma: float) -> np.ndarray:
        js, jp = sir_jacobians(z[:3], beta, gamma)
        return np.concatenate([sir(z[:3], t, beta, gamma), -z[3:6] @ js, -z[3:6] @ jp])

    for i in range(len(times) - 1, 0, -1):
        z = odeint(backwards, np.concatenate([path[i], lam, g]), [times[i], times[i - 1]],
                   args=(theta[0], theta[1]), rtol=1e-10, atol=1e-12)[-1]
        lam, g = z[3:6] + dpath[i - 1], z[6:]
    return g


@yota.diffrule(epidemic, "theta")
def _(theta: Any, s0: Any, times: Any, *, y: Any, dy: Any) -> Any:
    return epidemic_adjoint(y, theta, times, dy)


yota.nodiff(epidemic, "s0")
yota.nodiff(epidemic, "times")
TIMES = np.linspace(0.0, 6.0, 7)
S0 = np.array([0.97, 0.03, 0.0])
CASES = odeint(sir, S0, TIMES, args=(1.6, 0.45))[:, 1] * (1 + 0.05 * RNG.standard_normal(7))


def sir_fit_loss(log_theta: np.ndarray, cases: np.ndarray) -> Any:
    infected = epidemic(np.exp(log_theta), S0, TIMES)[:, 1]
    return np.sum((np.log(infected) - np.log(cases)) ** 2)


# -- 8. a semi-Lagrangian advection step -------------------------------------------------------------------
N = 12
SMOKE = np.exp(-0.1 * ((np.arange(N)[:, None] - 4.0) ** 2 + (np.arange(N)[None, :] - 6.0) ** 2))
TARGET = np.roll(SMOKE, (1, 2), axis=(0, 1))


def advect(f: np.ndarray, vx: Any, vy: Any) -> Any:
    """Move field f according to velocities vx, vy (backwards, bilinear, periodic)."""
    rows, cols = f.shape
    cell_xs, cell_ys = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
    center_xs = (cell_xs - vx).ravel()
    center_ys = (cell_ys - vy).ravel()
    left_ix = np.floor(center_xs).astype(int)
    top_ix = np.floor(center_ys).astype(int)
    rw = center_xs - left_ix  # relative weights of the four neighbours
    bw = center_ys - top_ix
    left_ix, right_ix = np.mod(left_ix, rows), np.mod(left_ix + 1, rows)
    top_ix, bot_ix = np.mod(top_ix, cols), np.mod(top_ix + 1, cols)
    flat_f = (1 - rw) * ((1 - bw) * f[left_ix, top_ix] + bw * f[left_ix, bot_ix]) \
        + rw * ((1 - bw) * f[right_ix, top_ix] + bw * f[right_ix, bot_ix])
    return np.reshape(flat_f, (rows, cols))


def advection_loss(velocity: np.ndarray) -> Any:
    vx, vy = velocity  # one step of a uniform wind, the smoke read from outside
    return np.sum((advect(SMOKE, vx, vy) - TARGET) ** 2)


# -- the checks ------------------------------------------------------------------------------------------
MODELS: dict[str, tuple[Any, list[Any], float]] = {  # (loss, arguments, rtol of the FD check)
    "bbvi_elbo": (elbo, [np.array([0.3, -0.5]), np.array([-1.0, -0.7])], 1e-6),
    "gmm": (gmm_log_likelihood, [GMM_PARAMS, X_GMM], 1e-6),
    "negative_binomial": (negbin_objective, [np.array([0.4, 0.3]), COUNTS], 1e-6),
    "gp_marginal_likelihood": (gp_neg_log_marginal, [np.array([-0.3, 0.2, -3.0]), X_GP, Y_GP],
                               1e-6),
    "expected_improvement": (expected_improvement, [np.array([0.35, 1.4, 2.65]), X_GP, Y_GP],
                             1e-6),
    "conv2d_layer": (conv_layer_loss, [0.5 * RNG.standard_normal((2, 3, 3)),
                                       np.array([0.1, -0.2]), IMAGES, TARGETS], 1e-6),
    "sir_odeint": (sir_fit_loss, [np.log(np.array([1.4, 0.5])), CASES], 1e-4),
    "semi_lagrangian": (advection_loss, [np.array([0.83, 1.71])], 1e-6),
}


@pytest.mark.parametrize("name", list(MODELS))
def test_real_program(name: str) -> None:
    f, args, rtol = MODELS[name]
    want = f(*args)
    v_llvm, g_llvm = yota.grad(f, *args, backend="llvm")
    v_interp, g_interp = yota.grad(f, *args, backend="interp")
    np.testing.assert_allclose(v_llvm, want, rtol=1e-10)
    np.testing.assert_allclose(v_interp, want, rtol=1e-10)
    for a, b in zip(g_llvm.flat, g_interp.flat, strict=True):  # compiled vs interpreted
        if isinstance(a, dict):
            assert a.keys() == b.keys()
            for k in a:
                np.testing.assert_allclose(a[k], b[k], rtol=1e-9, atol=1e-12)
        else:
            assert (a is None) == (b is None)
            if a is not None:
                np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)
    assert check_grad(f, args, g_llvm, rtol=rtol) >= 1
    # the program again, at other values of the first argument
    moved = [yota.structs.rebuild(args[0], lambda p, x: x * 1.01 if np.asarray(x).dtype.kind
                                  == "f" else x), *args[1:]]
    v2, g2 = yota.grad(f, *moved, backend="llvm")
    np.testing.assert_allclose(v2, f(*moved), rtol=1e-10)
    assert check_grad(f, moved, g2, rtol=rtol) >= 1


def test_the_advected_field_is_read_when_the_program_runs() -> None:
    """The smoke is an input of the compiled step: a new field in place is advected."""
    v = np.array([0.83, 1.71])
    before = yota.grad(advection_loss, v)[0]
    saved = SMOKE.copy()
    try:
        SMOKE[:] = np.roll(saved, 1, axis=0)
        val, g = yota.grad(advection_loss, v)
        assert float(val) == pytest.approx(float(advection_loss(v)), rel=1e-12)
        assert float(val) != pytest.approx(float(before), rel=1e-3)
        check_grad(advection_loss, [v], g)
    finally:
        SMOKE[:] = saved
