"""A turn's model profile, and its request fitted to that profile's context length.

The profile is the one the turn's last event asked for (an API request's ``model``,
``PROFILE_KEY`` in its payload), else the session's ``/model`` choice, else the default.
"""

from __future__ import annotations

from msgspec.structs import replace

from chatgate.agents.base import AgentRequest
from chatgate.domain.profiles import PROFILE_KEY, ModelProfile
from chatgate.domain.profiles import Profiles as Profiles
from chatgate.domain.store_roles import SessionProfiles
from chatgate.domain.trimming import trim_history
from chatgate.domain.turns import Claim


async def chosen_profile(store: SessionProfiles, profiles: Profiles, claim: Claim) -> ModelProfile:
    asked = claim.items[-1].inbound.payload.get(PROFILE_KEY)
    if isinstance(asked, str) and profiles.get(asked) is not None:
        return profiles.resolve(asked)
    if len(profiles.all) == 1:
        return profiles.default  # nothing to choose from: no read
    return profiles.resolve(await store.session_profile(claim.session_key))


def fitted(request: AgentRequest, profile: ModelProfile) -> AgentRequest:
    """The request on ``profile``, its history trimmed to what the profile's context holds
    beside the system message and the input (``domain/trimming.py``)."""
    history = trim_history(request.history, profile, (request.system, request.model_input))
    return replace(request, history=history, profile=profile.name)
