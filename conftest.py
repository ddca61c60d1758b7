"""pytest, for every test, docstring example and notebook: a compiled-function cache of the session's own in a
temporary directory (:mod:`concurrency_model.compiled`), never the user's; subprocesses inherit it."""
import atexit
import os
import shutil
import tempfile

os.environ["CONCURRENCY_MODEL_CACHE_DIR"] = tempfile.mkdtemp(prefix="concurrency-model-test-cache-")
atexit.register(shutil.rmtree, os.environ["CONCURRENCY_MODEL_CACHE_DIR"], ignore_errors=True)
