"""Who a start is for: the one enum recovery, the engine wing and the supervisor share.

It lives below recovery (``serving`` is the lower layer) in a module of its own, so
recovery can name it without importing the supervisor's mechanics.
"""

from __future__ import annotations

import enum


class StartFor(enum.StrEnum):
    """Who a start is for.

    A person's clears a breaker hold; an automatic one is autostart's or the bring-up's;
    a restart answers a backoff's end and counts in the running restart total; a recovery
    restart (recovery restarting a running engine whose canaries fail) counts there too.
    """

    PERSON = "person"
    AUTOMATIC = "automatic"
    RESTART = "restart"
    RECOVERY_RESTART = "recovery_restart"
