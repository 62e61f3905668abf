"""Launch profiles: the named recipes of one rig, one running at a time, all on one port.

Owners keep several working launches on a rig (DeepSeek on 4 cards, GLM on 8, a 6-card
TP2 x PP3 on cards 0-5) and switch between them; their scripts stop every profile before
starting one. ``[serving.recipe]`` (or ``recipe = "path"``) is the profile ``default``;
``[serving.profiles.NAME]`` tables add the others; ``[serving] profile`` names the one
autostarted. This module is the model (which profiles exist, which one is configured);
reading them from the config is the daemon's, and switching is the engine service's.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from serving.errors import NotFound
from serving.recipe.build import recipe_hash
from serving.recipe.recipe import Recipe

DEFAULT_PROFILE = "default"
PROFILE_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


@dataclass(frozen=True)
class Profile:
    """One named recipe; ``source`` says where it was read (a config table or a file)."""

    name: str
    recipe: Recipe
    source: str

    @property
    def recipe_hash(self) -> str:
        """The hash a launch of this profile carries (``cmpfleet.recipe-hash``)."""
        return recipe_hash(self.recipe)


class ProfileSet:
    """The profiles in config order, and the one the config autostarts."""

    def __init__(self, profiles: Sequence[Profile], configured: str) -> None:
        if not profiles:
            raise ValueError("a profile set needs at least one profile")
        self._profiles = {profile.name: profile for profile in profiles}
        if configured not in self._profiles:
            raise ValueError(f"no profile {configured!r} among {', '.join(self._profiles)}")
        self.configured = configured

    @classmethod
    def single(cls, recipe: Recipe, source: str = "[serving.recipe]") -> ProfileSet:
        """One recipe as the profile ``default`` (a config with no profiles)."""
        return cls([Profile(DEFAULT_PROFILE, recipe, source)], DEFAULT_PROFILE)

    @property
    def names(self) -> list[str]:
        """Profile names in config order."""
        return list(self._profiles)

    def __contains__(self, name: object) -> bool:
        return name in self._profiles

    def get(self, name: str) -> Profile:
        """The profile ``name``; ``NotFound`` naming the known ones."""
        profile = self._profiles.get(name)
        if profile is None:
            raise NotFound(
                f"no profile {name!r} (known: {', '.join(self.names)})", "unknown_profile"
            )
        return profile

    def matching(self, digest: str) -> list[str]:
        """The profiles whose recipe hashes to ``digest`` (what a running engine was)."""
        return [name for name, profile in self._profiles.items() if profile.recipe_hash == digest]
