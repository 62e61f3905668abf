"""``recipe show`` through the daemon: the next launch, and its diff to the last ready one.

Served over the API and compared with stored launches, so both sides are masked alike
(the stored launches are masked when written).
"""

from __future__ import annotations

import dataclasses

from daemon.store.launches import LaunchRow
from serving.recipe.build import diff_specs, show_text, spec_to_dict
from serving.recipe.masking import KnownSecrets, mask_spec
from serving.recipe.spec import LaunchSpec
from web.models import LastReadyLaunchDocument, LaunchSpecDocument, RecipeDocument


def recipe_document(
    next_launch: LaunchSpec, last: LaunchRow | None, known: KnownSecrets | None = None
) -> RecipeDocument:
    """The document of ``GET /api/v1/serving/recipe`` for ``next_launch``.

    ``known``: the secrets fleetd holds, hidden on both sides of the diff alike.
    """
    spec = mask_spec(next_launch, known)
    spec_document = LaunchSpecDocument.model_validate(spec_to_dict(spec))
    if last is None:
        return RecipeDocument(spec=spec_document, text=show_text(spec), last_ready=None, diff=None)
    stored = dataclasses.replace(
        spec, argv=tuple(last.argv), env=dict(last.env), preset_overrides=()
    )
    previous = dataclasses.replace(mask_spec(stored, known), preset_overrides=spec.preset_overrides)
    return RecipeDocument(
        spec=spec_document,
        text=show_text(spec),
        last_ready=LastReadyLaunchDocument(
            id=last.id,
            started_at=last.started_at.isoformat(),
            ready_at=None if last.ready_at is None else last.ready_at.isoformat(),
            argv=list(last.argv),
            env=dict(last.env),
            recipe_hash=last.recipe_hash,
        ),
        diff=diff_specs(
            previous, spec, old_label=f"last ready launch #{last.id}", new_label="next launch"
        ),
    )
