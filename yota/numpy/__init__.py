"""The NumPy → IR table, one module per family of NumPy functions.

Importing this package fills ``registry.TABLE``: each family module registers its
entries with ``@register(name, forward, *numpy_funcs)`` (see ``registry``). The families
of ``registry.LAZY_FAMILIES`` (math functions, scans, sorting, statistics, einsum,
linalg, joining, data movement) are imported on the first lookup of a name or NumPy
function the others do not register (``registry.load_families``). The tracer
dispatches NumPy calls, ufuncs and Python operators on traced arrays into the table; the
lowering (``yota.lowering``) turns each recorded call into IR ops with the entry's
lowering. Supporting a new NumPy function means adding an entry to its family's module,
or a new module here for a new family.

=============== ==========================================================
``registry``     ``NumpyOp``, ``TABLE``, ``register``, call validation
``ufuncs``       arithmetic, math, comparison, logic, predicates, divmod
``mathfuncs``    arcsinh/arccosh/arctanh, exp2, logaddexp(2), hypot, fmax/fmin, fabs,
                 sinc, degrees/radians, nan_to_num, copysign, heaviside, cbrt, trunc,
                 fix, ldexp, float_power, real/imag/conj/angle on real input
``elementwise``  where, clip, round, copy, astype
``creation``     zeros_like, ones_like, empty_like, full_like; linspace, logspace,
                 geomspace with traced endpoints (compositions)
``reductions``   sum, prod, max, min, mean, var, std, any, all, count_nonzero,
                 argmax, argmin
``scans``        cumsum, cumprod, nancumsum, nancumprod (log-step scans)
``sorting``      sort, argsort, partition, median, quantile, percentile and their nan
                 versions (a bitonic sorting network)
``statistics``   diff, ediff1d, gradient, ptp, average, nansum, nanprod, nanmean,
                 nanvar, nanstd, nanmax, nanmin
``contractions`` matmul, dot, vdot, inner, outer, tensordot, kron, cross, vecdot,
                 matvec, vecmat, np.linalg's contractions (matmul, tensordot...)
``einsum``       einsum: every subscript form, as transposes, reshapes and matmuls
``linalg``       np.linalg: solve, inv, det, slogdet, cholesky, eigh, svd, qr, pinv,
                 lstsq, norms, cond, matrix_rank, matrix_power, multi_dot, tensor*
``shape``        reshape, ravel, squeeze, transpose, moveaxis, broadcast_to,
                 permute_dims, matrix_transpose...
``joining``      concatenate/concat, stack & co., block, append, split & co., unstack,
                 atleast_*, broadcast_arrays, meshgrid
``building``     np.array/np.asarray of traced values, np.r_/np.c_, np.shape/ndim/size
``movement``     pad, repeat, tile, roll, flips, rot90, tril/triu, diag*, trace, take*,
                 delete, insert, resize, compress, select, choose
``padding``      pad's computed modes: linear_ramp, maximum, minimum, mean, median,
                 odd reflections (compositions)
``sequences``    NumPy functions and ufuncs given lists holding traced values
``ufunc_at``     np.<ufunc>.at but add/subtract (repeats applied in rounds)
``indexing``     ``x[key]``: slices, flips, integer-array gathers
``axes``         axis and shape arguments, normalized
=============== ==========================================================
"""

from . import (  # noqa: F401  (each family registers its entries on import)
    building,
    contractions,
    creation,
    elementwise,
    indexing,
    reductions,
    shape,
    ufuncs,
)
from .registry import TABLE, NumpyOp, register

__all__ = ["TABLE", "NumpyOp", "register"]
