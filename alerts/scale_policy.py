"""The scale advisor's settings (``alerts.scaling``), apart from the advisor so that reading a
config file does not load the database layer."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class ScalePolicy(BaseModel):
    model_config = ConfigDict(extra="forbid")
    cooldown: str = Field("300s", description="one recommendation per scope per cooldown (duration)")
    min_instances: int = Field(2, ge=1, description="recommendations never go below this many instances")
    max_instances: int = Field(16, ge=1, description="recommendations never go above this many instances")
