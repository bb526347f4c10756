from typing import Any

def prove(primary: list[tuple[Any, Any]], reference: list[tuple[Any, Any]],
          columns: tuple[int, ...], folder: str, parts: int,
          hash_mask: int) -> tuple[bytes, bytes] | None: ...
