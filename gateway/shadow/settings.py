"""The shadow settings: a checked ``[shadow]`` section, and what is never shadowed."""


from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gateway import records
from gateway.engine import Option
from gateway.errors import ConfigError
from gateway.verify.verdict import CompareOptions

if TYPE_CHECKING:
    from gateway.config import GatewayConfig

DEFAULT_STORE = os.path.join(".arrowgate", "shadow")
DEFAULT_MAX_COMPARE_BYTES = 256 * 2**20
DEFAULT_KEEP_REFERENCE_BYTES = 64 * 2**20
_OPT_OUT = re.compile(r"--\s*arrowgate:.*\bshadow\s*=\s*(off|false|no|0)\b", re.IGNORECASE)

_COMPARE_FIELDS = {f.name: f for f in dataclasses.fields(CompareOptions)}
_OPTION_TYPES: dict[str, tuple[type, ...]] = {"float": (float,), "bool": (bool,), "int": (int,),
                                              "str": (str,)}
SHADOW_OPTIONS: dict[str, Option] = {
    "primary": Option((str,), help="the engine whose queries are shadowed (default: all)"),
    "reference": Option((str,), required=True, help="the engine that answers beside it"),
    "sample": Option((float,), default=1.0, help="the share of queries shadowed, 0 to 1"),
    "timeout": Option((float,), default=30.0,
                      help="seconds to wait for the reference once the primary is done"),
    "noise": Option((bool,), default=False,
                    help="run the reference twice; what differs is nondeterministic"),
    "shadow_writes": Option((bool,), default=False,
                            help="shadow statements that change data (separate copies only)"),
    "background": Option((bool,), default=False,
                         help="the answer's end never waits for the verdict; it follows"),
    "store": Option((str, bool), default=DEFAULT_STORE,
                    help="folder the records are appended to; false for none"),
    "max_compare_bytes": Option((int,), default=DEFAULT_MAX_COMPARE_BYTES,
                                help="bytes both answers may hold for the comparison; above "
                                "it, they are compared streamed, spilling to disk"),
    "keep_reference_bytes": Option((int,), default=DEFAULT_KEEP_REFERENCE_BYTES,
                                   help="keep the reference's answer (record.reference_answer()) "
                                   "when it is at most this many bytes; 0 keeps none"),
    "uncut_rows": Option((int,), default=0,
                         help="check the rows of a LIMIT no total order fixes against the "
                         "reference's answer without it, when that has at most this many "
                         "rows; 0 (the default) never runs that third query"),
    **{name: Option(_OPTION_TYPES[str(f.type)], default=f.default,
                    help="comparison option (see gateway.verify.verdict.CompareOptions)")
       for name, f in _COMPARE_FIELDS.items()},
}


@dataclass
class ShadowSettings:
    """A checked ``[shadow]`` section (or the settings one call asked for)."""

    reference: str
    primary: str | None = None
    sample: float = 1.0
    timeout: float = 30.0
    noise: bool = False
    shadow_writes: bool = False
    background: bool = False
    store: str | None = DEFAULT_STORE
    max_compare_bytes: int = DEFAULT_MAX_COMPARE_BYTES
    keep_reference_bytes: int = DEFAULT_KEEP_REFERENCE_BYTES
    uncut_rows: int = 0
    compare: CompareOptions = field(default_factory=CompareOptions)

    @classmethod
    def from_config(cls, config: GatewayConfig) -> ShadowSettings | None:
        """The settings of ``config``'s ``[shadow]`` section, or None when it has none.

        Raises:
            ConfigError: a wrong key or value, naming the file and the key.
        """
        if not config.shadow:
            return None
        from gateway.config import check_options

        def fail(key: str, message: str, hint: str | None = None) -> ConfigError:
            return ConfigError(message, path=config.path, key=key, hint=hint)

        values, _ = check_options("shadow", config.shadow, SHADOW_OPTIONS, fail)
        for key in ("primary", "reference"):
            name = values[key]
            if name is not None and name not in config.engines:
                raise fail(f"shadow.{key}", f"names no declared engine: {name!r}",
                           "declared engines: " + ", ".join(config.engines))
        if not 0.0 <= values["sample"] <= 1.0:
            raise fail("shadow.sample", f"must be between 0 and 1, not {values['sample']}",
                       "0.1 shadows one query in ten")
        if values["timeout"] <= 0:
            raise fail("shadow.timeout", "must be a positive number of seconds")
        if values["max_compare_bytes"] <= 0:
            raise fail("shadow.max_compare_bytes", "must be a positive number of bytes",
                       "268435456 (256 MiB) is the default")
        if values["keep_reference_bytes"] < 0:
            raise fail("shadow.keep_reference_bytes", "must not be negative",
                       "0 keeps no reference answer")
        if values["uncut_rows"] < 0:
            raise fail("shadow.uncut_rows", "must not be negative", "0 checks nothing more")
        store = values["store"]
        if store is True:
            store = DEFAULT_STORE
        if isinstance(store, str) and not os.path.isabs(store):
            store = str(config.base_dir / store)
        compare = CompareOptions(**{k: values[k] for k in _COMPARE_FIELDS})
        return cls(reference=values["reference"], primary=values["primary"],
                   sample=float(values["sample"]), timeout=float(values["timeout"]),
                   noise=values["noise"], shadow_writes=values["shadow_writes"],
                   background=values["background"], store=store or None,
                   max_compare_bytes=values["max_compare_bytes"],
                   keep_reference_bytes=values["keep_reference_bytes"],
                   uncut_rows=values["uncut_rows"], compare=compare)


# -- deciding what to shadow -----------------------------------------------------
def skip_reason(sql: str, settings: ShadowSettings, dialect: str = "duckdb") -> str | None:
    """Why ``sql`` must not be shadowed, or None when it may be."""
    if _OPT_OUT.search(sql):
        return "opted out with -- arrowgate: shadow=off"
    if settings.shadow_writes:
        return None
    from gateway.sql.kinds import is_read, statement_kind

    if not is_read(sql, dialect):
        kind = statement_kind(sql, dialect)
        what = kind if kind.startswith("SELECT ") else f"{kind} statement"
        return (f"{what}: it would run twice on shared data "
                "(set shadow_writes = true when the reference is a separate copy)")
    return None


def settings_from_mapping(raw: Mapping[str, Any], config: GatewayConfig) -> ShadowSettings:
    """Check a ``[shadow]``-shaped mapping against ``config`` (the CLI builds one from flags)."""
    probe = records.replace(config, shadow=dict(raw))
    settings = ShadowSettings.from_config(probe)
    assert settings is not None
    return settings
