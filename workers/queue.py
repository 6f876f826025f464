"""The one huey instance, built from settings (SQLite file when embedded, Redis otherwise)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from openkb.config import Settings, get_settings

if TYPE_CHECKING:
    from huey import Huey

_huey: Huey | None = None


def build_huey(settings: Settings) -> Huey:
    # huey (and the Redis client it loads) is imported on first use, not with this module: a CLI
    # command installs this queue and most never enqueue (a third of a second at every start)
    from huey import RedisHuey, SqliteHuey

    if settings.redis_url:
        return RedisHuey("openkb", url=settings.redis_url)
    settings.openkb_home.mkdir(parents=True, exist_ok=True)
    return SqliteHuey("openkb", filename=str(settings.openkb_home / "queue.db"), timeout=10)


def get_huey() -> Huey:
    global _huey
    if _huey is None:
        _huey = build_huey(get_settings())
        from workers import tasks

        tasks.register(_huey)
    return _huey


def reset_huey() -> None:
    global _huey
    _huey = None


class HueyQueue:
    """``openkb.jobs.JobQueue`` backed by huey: every job goes through one generic task."""

    def enqueue(self, name: str, **kwargs: Any) -> None:
        from workers import tasks

        get_huey()
        assert tasks.run_job is not None
        tasks.run_job(name, kwargs)
