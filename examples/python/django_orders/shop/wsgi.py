"""The WSGI application Gunicorn serves: gunicorn -c gunicorn.conf.py shop.wsgi"""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "shop.settings")
application = get_wsgi_application()
