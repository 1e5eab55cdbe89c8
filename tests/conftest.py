"""Test-wide settings, fixed here so that a run depends on nothing the machine or the
caller's environment happens to hold (a warm ``~/.cache/yota``, a ``YOTA_*`` variable
left set in a shell)."""

import atexit
import os
import shutil
import tempfile

# every IR is verified after every transformation
os.environ["YOTA_VERIFY"] = "1"
# the tests never touch the user's compiled-gradient cache (~/.cache/yota) nor inherit
# one: a private, empty directory for this run, removed at its end
_CACHE = tempfile.mkdtemp(prefix="yota-test-cache-")
os.environ["YOTA_CACHE_DIR"] = _CACHE
atexit.register(shutil.rmtree, _CACHE, ignore_errors=True)
# settings that would change what the tests see: the cache switched off or capped, a
# BLAS library chosen for AOT-compiled programs, the whole run profiled (YOTA_PROFILE)
for _var in ("YOTA_CACHE", "YOTA_CACHE_MAX_BYTES", "YOTA_BLAS", "YOTA_PROFILE", "YOTA_PROFILE_TRACE"):
    os.environ.pop(_var, None)
