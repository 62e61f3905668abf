"""The API's routes, one router per resource; ``web.app.create_app`` assembles them.

Each module has one ``router(...)`` taking what its routes read (the daemon's services, a
control object) and the token guard (``web.auth.TokenGuard``) when some of them need the
token: a new route goes in its resource's module, a new resource is a module here and
one line in ``create_app``. Request bodies and documents only one router uses live with
it; shared documents are ``web.models``.
"""
