"""Tags as requests carry them (a list of {key, value}), checked whole before anything is written."""

from __future__ import annotations

from .errors import validation


def tag_map(tags: list[dict]) -> dict[str, str]:
    """The tags by key; raises ValidationException for a tag without a key (the model leaves the key optional, AWS
    does not). The value defaults to the empty string, as on AWS."""
    for index, tag in enumerate(tags):
        if "key" not in tag:
            raise validation(f"Value null at 'tags.{index + 1}.member.key' failed to satisfy constraint: Member "
                             f"must not be null")
    return {tag["key"]: tag.get("value", "") for tag in tags}
