import os
import tempfile

os.environ.setdefault("YOTA_VERIFY", "1")
# The tests never touch the user's compiled-gradient cache (~/.cache/yota).
os.environ.setdefault("YOTA_CACHE_DIR", tempfile.mkdtemp(prefix="yota-test-cache-"))
