"""``[diag]``: where every card diagnostic stops for heat.

Passive cards in a 4U case reach their limits within minutes of full load; the community
QC ladders stop at 80 °C core and 85 °C HBM (PixelML/club-170hx's QC ladder; dev-boz's
suite at 72/85 °C: docs/domain.md). The memory test's stress mode, ``diag compute`` and
``diag pcie`` watch both at 1 s and stop there, naming the card and the reading.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from hwcheck.carddiag.model import ThermalLimits


class DiagSettings(BaseModel):
    """``[diag]``: the thermal stop of every diagnostic."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    stop_core_c: Annotated[float, Field(gt=30, le=110)] = 80.0
    stop_hbm_c: Annotated[float, Field(gt=30, le=120)] = 85.0

    def limits(self) -> ThermalLimits:
        """The limits the thermal guard applies."""
        return ThermalLimits(self.stop_core_c, self.stop_hbm_c)
