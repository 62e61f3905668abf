"""Which keys of a config file hold secrets, for the warning when others can read the file.

A config readable by every local user hands its secrets to all of them: fleetd warns (a
warning, not a refusal: docs/reference.md "Config file") and names the keys, never their
values. Secrets are not only ``[[alerts.webhooks]] secret``: a database password in
``[store] url``, a webhook URL's credentials or query, a Slack or Discord webhook URL (its
key is its path), and a recipe's secret environment or flags (an ``HF_TOKEN``,
``--api-key``) count as well, in the config's ``[serving.recipe]`` table or in the recipe
file ``[serving] recipe`` names. The file's own table is judged, not the merged settings: a
password given through a ``CMPFLEET_*`` variable is not in the file.
"""

from __future__ import annotations

import stat
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from daemon.alerts.sinks import Sink, url_holds_secret
from daemon.config import ConfigError, Settings, read_toml
from daemon.store import mask_url
from serving.recipe.masking import mask_argv, mask_env, mask_text

OTHERS_READ = stat.S_IRGRP | stat.S_IROTH


def secret_keys(table: dict[str, Any]) -> list[str]:
    """The keys of a parsed config that hold a secret (names only, in file order)."""
    found: list[str] = []
    store = table.get("store")
    store_url = store.get("url") if isinstance(store, dict) else None
    if isinstance(store_url, str) and mask_url(store_url) != store_url:
        found.append("store.url")
    alerts = table.get("alerts")
    hooks = alerts.get("webhooks") if isinstance(alerts, dict) else None
    for index, hook in enumerate(hooks if isinstance(hooks, list) else []):
        if not isinstance(hook, dict):
            continue
        if hook.get("secret"):
            found.append(f"alerts.webhooks[{index}].secret")
        url = hook.get("url")
        if isinstance(url, str) and url_holds_secret(url, str(hook.get("format", "json"))):
            found.append(f"alerts.webhooks[{index}].url")
    serving = table.get("serving")
    recipe = serving.get("recipe") if isinstance(serving, dict) else None
    if isinstance(recipe, dict):
        found.extend(f"serving.recipe.{key}" for key in recipe_secret_keys(recipe))
    profiles = serving.get("profiles") if isinstance(serving, dict) else None
    for name, profile in (profiles if isinstance(profiles, dict) else {}).items():
        if isinstance(profile, dict):
            found.extend(f"serving.profiles.{name}.{key}" for key in recipe_secret_keys(profile))
    return found


def recipe_secret_keys(recipe: dict[str, Any]) -> list[str]:
    """The keys of a recipe table (inline or a recipe file) that hold a secret."""
    found: list[str] = []
    env = recipe.get("env")
    if isinstance(env, dict):
        plain = {str(name): str(value) for name, value in env.items()}
        if mask_env(plain) != plain:
            found.append("env")
    args = recipe.get("extra_args")
    if isinstance(args, list):
        words = [str(arg) for arg in args]
        if mask_argv(words) != words:
            found.append("extra_args")
    return found


def exposed_secrets(
    config_path: Path, recipe: object, profile_recipes: Iterable[object] = ()
) -> list[tuple[Path, list[str]]]:
    """Each file others can read that holds secrets: the config, and recipe files it names.

    ``recipe`` is ``[serving] recipe`` as configured and ``profile_recipes`` the profiles'
    ``recipe = "path"`` (a path, relative to the config's folder, is a file of its own
    whose mode matters as much).
    """
    found = [(config_path, readable_secret_keys(config_path))]
    for named in (recipe, *profile_recipes):
        if isinstance(named, str):
            path = Path(named) if Path(named).is_absolute() else config_path.parent / named
            found.append((path, _readable(path, recipe_secret_keys)))
    return [(path, keys) for path, keys in found if keys]


def _readable(path: Path, judge: Callable[[dict[str, Any]], list[str]]) -> list[str]:
    try:
        if not path.stat().st_mode & OTHERS_READ:
            return []
        return judge(read_toml(path))
    except (OSError, ConfigError):
        return []  # fleetd has already read it; a file gone since has nothing to warn about


def readable_secret_keys(path: Path) -> list[str]:
    """Secret-holding keys of the config ``path`` when group or others may read it."""
    return _readable(path, secret_keys)


def config_secret_values(settings: Settings, sinks: list[Sink]) -> set[str]:
    """The secret values fleetd holds from its config: masked in the engine's output too.

    Webhook signing secrets (``secret`` or ``secret_file``, as loaded) and the passwords
    and query tokens of the store and webhook URLs. The engine never gets them, but a
    line that holds one (a model's remote code reading the environment of a shell the
    rig owner pasted into) is shown masked all the same.
    """
    found: set[str] = set()
    for sink in sinks:
        if sink.secret:
            found.add(sink.secret.decode("utf-8", "replace"))
        mask_text(sink.url, found)
    if settings.store.url is not None:
        mask_text(settings.store.url, found)
    return found
