"""Connection options every regtrack client uses, so that connecting never costs a trial."""

from __future__ import annotations

import inspect
from typing import Any

import redis

# Nothing on connect that an older server answers with an error (which would count
# against the trial it happens in): RESP2 (no HELLO 3 and its follow-ups) and no
# CLIENT SETINFO, which arrived in 7.2. redis-py 8 spells the latter driver_info=None.
QUIET_CONNECT: dict[str, Any] = {
    "protocol": 2,
    **(
        {"driver_info": None}
        if "driver_info" in inspect.signature(redis.Redis.__init__).parameters
        else {"lib_name": None, "lib_version": None}
    ),
}
