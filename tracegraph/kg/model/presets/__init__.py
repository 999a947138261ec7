"""Versioned training presets shipped with the package (``fb15k-237.json``, ``wn18rr.json``…).

A preset file is JSON::

    {"format": "tracegraph-preset", "version": 1, "name": "...", "description": "...",
     "settings": {"learning_rate": 0.003, "input_dropout": 0.2, ...}}

Setting names are the ``tracegraph train`` option names with underscores: a
:class:`~tracegraph.kg.model.train.TrainConfig` field or a :class:`~tracegraph.kg.model.conve.ConvEConfig`
field (model settings). Where a run's settings come from, in order of precedence: options given
on the command line, then the preset, then the built-in defaults. The run's ``config.json``
records the preset's name and the sha256 of its file's bytes, so a result names exactly what
produced it. ``--preset`` takes a shipped name or the path of a preset file (``tracegraph tune``
writes one for its best trial).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from tracegraph.errors import DataError, TracegraphError

FORMAT = "tracegraph-preset"
VERSION = 1
# where a run reads and writes is never part of a preset: it is the run's own choice
RUN_SPECIFIC = frozenset(
    {
        "train",
        "valid",
        "test",
        "output_dir",
        "entity_map",
        "relation_map",
        "resume",
        "preset",
        "preset_sha256",
        "model",
        "filter_triples",
        "num_entities",
        "num_relations",
    }
)


@dataclass(frozen=True)
class Preset:
    """A set of training settings read from a preset file.

    Attributes:
        name: The preset's name.
        sha256: SHA-256 of the file's bytes.
        settings: Train and model setting names to values.
        source: The file it was read from.
    """

    name: str
    sha256: str
    settings: dict
    source: str  # the file it was read from


def shipped_presets() -> list[str]:
    """The names of the presets shipped with tracegraph, sorted."""
    return sorted(p.name[:-5] for p in resources.files(__name__).iterdir() if p.name.endswith(".json"))


def setting_names() -> tuple[set[str], set[str]]:
    """The settings a preset may set.

    Returns:
        The TrainConfig setting names and the ConvEConfig setting names.
    """
    from tracegraph.kg.model.conve import ConvEConfig
    from tracegraph.kg.model.train import TrainConfig

    train = {f.name for f in dataclasses.fields(TrainConfig)} - RUN_SPECIFIC
    model = {f.name for f in dataclasses.fields(ConvEConfig)} - RUN_SPECIFIC
    return train, model


def setting_defaults() -> dict:
    """Every setting a preset may hold, with its built-in default (whose type checks preset values).

    Returns:
        Setting names to defaults.
    """
    from tracegraph.kg.model.conve import ConvEConfig
    from tracegraph.kg.model.train import TrainConfig

    train, model = setting_names()
    fields = {f.name: f.default for f in (*dataclasses.fields(TrainConfig), *dataclasses.fields(ConvEConfig))}
    return {k: fields[k] for k in train | model}


def _same_kind(value, default) -> bool:
    if isinstance(default, bool):
        return isinstance(value, bool)
    if default is None or isinstance(default, int):  # None: an optional count (patience)
        return (value is None and default is None) or (isinstance(value, int) and not isinstance(value, bool))
    if isinstance(default, float):
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, type(default))


def load_preset(name_or_path: str) -> Preset:
    """Load a shipped preset by name, or a preset file by path.

    Args:
        name_or_path: A shipped preset's name, or the path of a ``.json`` preset file.

    Returns:
        The preset.

    Raises:
        DataError: If the file is missing or not a valid preset.
        TracegraphError: If no shipped preset has that name.
    """
    path = Path(name_or_path)
    if path.suffix == ".json" or path.is_file():  # a folder named like a preset (data/fb15k-237) is not one
        if not path.is_file():
            raise DataError("preset file not found", path)
        data, source = path.read_bytes(), str(path)
    else:
        res = resources.files(__name__) / f"{name_or_path}.json"
        if not res.is_file():
            raise TracegraphError(
                f"unknown preset {name_or_path!r}; shipped: {', '.join(shipped_presets())} "
                f"(or give the path of a .json preset file)"
            )
        data, source = res.read_bytes(), f"tracegraph/kg/model/presets/{name_or_path}.json"
    return parse_preset(data, source)


def decode_json(data: bytes, source) -> object:
    """Decode UTF-8 JSON bytes (a leading byte-order mark is tolerated).

    Args:
        data: The bytes.
        source: The file they came from, for error messages.

    Returns:
        The parsed value.

    Raises:
        DataError: If the bytes are not UTF-8 or not valid JSON (with the line).
    """
    try:
        from tracegraph.runtime.textfiles import strip_bom

        return json.loads(strip_bom(data.decode("utf-8"), source))
    except json.JSONDecodeError as e:
        raise DataError(f"invalid JSON: {e.msg}", source, e.lineno) from None
    except UnicodeDecodeError as e:
        raise DataError(f"not UTF-8 text: {e.reason}", source) from None


def parse_preset(data: bytes, source: str) -> Preset:
    """Parse and check a preset file's bytes.

    Args:
        data: The file's bytes.
        source: The file's path, for error messages and the default name.

    Returns:
        The preset.

    Raises:
        DataError: If it is not a preset of this version, or a setting is unknown or of the wrong
            type (with the line).
    """
    doc = decode_json(data, source)
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise DataError(f'not a preset file: expected {{"format": "{FORMAT}", ...}}', source, 1)
    if doc.get("version") != VERSION:
        raise DataError(
            f"preset version {doc.get('version')!r} is not supported (this tracegraph reads {VERSION})",
            source,
            line_of_key(data, "version"),
        )
    settings = doc.get("settings")
    if not isinstance(settings, dict):
        raise DataError('"settings" must be an object of option names to values', source, line_of_key(data, "settings"))
    defaults = setting_defaults()
    for key, value in settings.items():
        if key not in defaults:
            raise DataError(
                f"unknown setting {key!r} (a train option name with underscores, e.g. learning_rate)",
                source,
                line_of_key(data, key),
            )
        if not _same_kind(value, defaults[key]):
            raise DataError(
                f"setting {key!r}: {value!r} is not a {type(defaults[key]).__name__}", source, line_of_key(data, key)
            )
    name = str(doc.get("name") or Path(source).stem)
    return Preset(name, hashlib.sha256(data).hexdigest(), dict(settings), source)


def apply_preset(cfg, preset: Preset, explicit: set[str] = frozenset()):
    """A copy of ``cfg`` with the preset's settings, except those given on the command line.

    The copy records the preset's name and hash.

    Args:
        cfg: A :class:`~tracegraph.kg.model.train_config.TrainConfig`.
        preset: The preset.
        explicit: Setting names the user gave explicitly; the preset does not override them.

    Returns:
        The new config.
    """
    train_names, _ = setting_names()
    model = dict(cfg.model)
    changes = {}
    for key, value in preset.settings.items():
        if key in explicit:
            continue
        if key in train_names:
            changes[key] = value
        else:
            model[key] = value
    return dataclasses.replace(cfg, **changes, model=model, preset=preset.name, preset_sha256=preset.sha256)


def explicit_options(ctx) -> set[str]:
    """The options of a click/Typer command given on the command line or through the environment.

    Those are the settings a preset must not override.

    Args:
        ctx: The click context.

    Returns:
        The option names.
    """
    # compared by name: Typer may bring its own copy of click's ParameterSource enum
    given = ("COMMANDLINE", "ENVIRONMENT")
    return {name for name in ctx.params if getattr(ctx.get_parameter_source(name), "name", None) in given}


def preset_document(name: str, description: str, settings: dict, **extra) -> dict:
    """A preset file's content (``tracegraph tune`` writes its best trial with this).

    Args:
        name: The preset's name.
        description: One line describing it.
        settings: Setting names to values.
        **extra: More top-level keys, placed before ``settings``.

    Returns:
        The JSON document.
    """
    return {
        "format": FORMAT,
        "version": VERSION,
        "name": name,
        "description": description,
        **extra,
        "settings": settings,
    }


def line_of_key(data: bytes, key: str) -> int | None:
    """The first line where ``"key"`` appears (JSON parsers do not keep the positions of values).

    Args:
        data: The file's bytes.
        key: The key.

    Returns:
        The 1-based line, or None if the key does not appear.
    """
    needle = f'"{key}"'.encode()
    pos = data.find(needle)
    return data[:pos].count(b"\n") + 1 if pos >= 0 else None
