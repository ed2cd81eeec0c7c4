"""Settings of the recipe project: only what the recipe needs (SQLite, one app)."""

import os
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
SECRET_KEY = "recipe-only-not-a-secret"
DEBUG = False
USE_TZ = True
INSTALLED_APPS = ["orders"]
ROOT_URLCONF = "shop.urls"
WSGI_APPLICATION = "shop.wsgi.application"
# The pod's probes and the Service reach it by IP: list your host names here in production.
ALLOWED_HOSTS = os.environ.get("ALLOWED_HOSTS", "localhost,127.0.0.1").split(",")
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.environ.get("ORDERS_DB", str(BASE_DIR / "orders.sqlite3")),
    }
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Where clockflake.django.next_id leases its worker id (read at its first call, not at import).
CLOCKFLAKE_URI = os.environ.get("CLOCKFLAKE_URI", "file:///var/lib/myapp/ids?app=orders")
