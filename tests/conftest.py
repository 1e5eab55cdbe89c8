import os

os.environ.setdefault("YOTA_VERIFY", "1")
