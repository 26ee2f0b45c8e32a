import atexit
import os
import shutil
import tempfile

from hypothesis import HealthCheck, settings

# Generated kernels of the test run go to a directory of their own, not the user's cache.
if "SHAPEVM_CACHE_DIR" not in os.environ:
    os.environ["SHAPEVM_CACHE_DIR"] = tempfile.mkdtemp(prefix="shapevm-test-cache-")
    atexit.register(shutil.rmtree, os.environ["SHAPEVM_CACHE_DIR"], ignore_errors=True)

settings.register_profile(
    "dev", max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "ci",
    max_examples=400,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))
