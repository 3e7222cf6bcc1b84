"""What the public API returns: :class:`Metrics`, an evaluation's metrics.json keys as a read-only mapping."""

from __future__ import annotations

from typing import Any, Iterator, Mapping


class Metrics(Mapping[str, Any]):
    """The metrics.json keys of one evaluation, read-only."""

    def __init__(self, values: Mapping[str, Any]) -> None:
        self._values = dict(values)

    def __getitem__(self, key: str) -> Any:
        """The value of one key."""
        return self._values[key]

    def __iter__(self) -> Iterator[str]:
        """The keys, in metrics.json order."""
        return iter(self._values)

    def __len__(self) -> int:
        """The number of keys."""
        return len(self._values)
