"""Knobs: a settings field that a user sets with a flag, declared once on the field.

A field of a settings model carries a :class:`Knob` in its ``Annotated`` metadata
(its flag, help, and whether an experiment file may set it and a resumed
comparison must keep it). Everything else a command needs of the knob is derived
here from the model: the argparse flag (type, choices and default from the
field), the values read back from the parsed arguments, the experiment file's
key and accepted TOML types, the flag an error names, and the resume check.
Adding a knob shared by ``run`` and ``compare`` is one annotated field on
:class:`~replay.load.SharedSettings`; ``serve-sim`` (``replay.servers.sim.SimConfig``) and
``plan --twin`` (``replay.twin.PlanSettings``) declare theirs the same way, and
:func:`from_knobs` reports a bad value as one line naming its flag.
"""

from __future__ import annotations

import argparse
import types
import typing
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

from replay.errors import ConfigError
from traces import first_problem

__all__ = ["Knob", "add_knob_flags", "experiment_types", "from_knobs", "knob_error",
           "knob_flags", "knob_of", "knob_values", "knobs", "not_resumed"]

_MODEL_DEFAULT: Any = object()


@dataclass(frozen=True)
class Knob:
    """How a user sets one settings field."""

    flag: str
    help: str
    metavar: str | None = None
    experiment: bool = True
    """An experiment file (``compare --config``) may set it, under :attr:`dest`."""
    resumed: bool = True
    """A resumed comparison must keep its value (False: it changes no run)."""
    default: Any = _MODEL_DEFAULT
    """The flag's default where the command's differs from the model's (``serve-sim``
    listens on 8000; a ``SimConfig`` built in code picks a free port)."""

    @property
    def dest(self) -> str:
        """The argparse destination and experiment key: ``--think-scale`` -> ``think_scale``."""
        return self.flag.removeprefix("--").replace("-", "_")


def knobs(model: type[BaseModel],
          fields: Iterable[str] | None = None) -> Iterator[tuple[str, FieldInfo, Knob]]:
    """``(field name, field, knob)`` of every field of ``model`` that has a knob (only
    those in ``fields`` when given), in the model's order."""
    wanted = None if fields is None else set(fields)
    for name, info in model.model_fields.items():
        knob = next((m for m in info.metadata if isinstance(m, Knob)), None)
        if knob is not None and (wanted is None or name in wanted):
            yield name, info, knob


def knob_of(model: type[BaseModel], field: str, *, prefix: str = "", suffix: str = "",
            help: str | None = None) -> Knob:
    """The knob ``model`` declares on ``field``, for another settings model that takes
    the same knob: same flag and metavar, its help framed by ``prefix``/``suffix`` (or
    replaced by ``help`` where the value means something else there)."""
    knob = next(m for m in model.model_fields[field].metadata if isinstance(m, Knob))
    return replace(knob, help=prefix + (knob.help if help is None else help) + suffix)


def _base_type(annotation: Any) -> Any:
    """The value type of a field: ``Optional`` and ``Annotated`` removed."""
    while True:
        origin = typing.get_origin(annotation)
        if origin is typing.Annotated:
            annotation = typing.get_args(annotation)[0]
        elif origin in (typing.Union, types.UnionType):
            rest = [a for a in typing.get_args(annotation) if a is not type(None)]
            annotation = rest[0]
        else:
            return annotation


def _flag_kwargs(info: FieldInfo, knob: Knob, required: bool) -> dict[str, Any]:
    base = _base_type(info.annotation)
    if base is bool:
        return {"action": "store_true", "help": knob.help}
    if typing.get_origin(base) is tuple:  # a repeatable flag; None: not given (the default)
        out: dict[str, Any] = {"action": "append", "help": knob.help, "default": None}
        if knob.metavar is not None:
            out["metavar"] = knob.metavar
        return out
    default = info.get_default() if knob.default is _MODEL_DEFAULT else knob.default
    kwargs: dict[str, Any] = {"help": knob.help, "default": default}
    if typing.get_origin(base) is Literal:
        kwargs["choices"] = typing.get_args(base)
    else:
        kwargs["type"] = base
    if knob.metavar is not None:
        kwargs["metavar"] = knob.metavar
    if info.is_required():
        kwargs["default"] = None
        if required:
            kwargs["required"] = True
        else:
            kwargs["help"] = f"{knob.help} (required, here or in --config)"
    return kwargs


def add_knob_flags(parser: argparse.ArgumentParser | argparse._ArgumentGroup,
                   model: type[BaseModel], fields: Iterable[str] | None = None, *,
                   required: bool = True) -> None:
    """The flags of ``model``'s knobs. A field without a default is a required flag,
    or (``required=False``: it may come from ``--config``) one checked later."""
    for _name, info, knob in knobs(model, fields):
        parser.add_argument(knob.flag, dest=knob.dest, **_flag_kwargs(info, knob, required))


def knob_values(args: argparse.Namespace, model: type[BaseModel],
                fields: Iterable[str] | None = None) -> dict[str, Any]:
    """The settings values of ``model``'s knobs that ``args`` holds, by field name."""
    return {name: getattr(args, knob.dest) for name, _info, knob in knobs(model, fields)
            if hasattr(args, knob.dest)}


def experiment_types(model: type[BaseModel]) -> dict[str, tuple[type, ...]]:
    """Experiment key -> the TOML types it accepts, for every knob a file may set."""
    out: dict[str, tuple[type, ...]] = {}
    for _name, info, knob in knobs(model):
        if not knob.experiment:
            continue
        base = _base_type(info.annotation)
        if typing.get_origin(base) is Literal:
            out[knob.dest] = (str,)
        elif typing.get_origin(base) is tuple:
            out[knob.dest] = (list,)
        elif base is float:
            out[knob.dest] = (int, float)
        else:
            out[knob.dest] = (base,)
    return out


def knob_flags(model: type[BaseModel]) -> dict[str, str]:
    """Field -> the flag that sets it, for naming a field in an error."""
    return {name: knob.flag for name, _info, knob in knobs(model)}


def not_resumed(model: type[BaseModel]) -> frozenset[str]:
    """The fields a resumed comparison may change (they change no run)."""
    return frozenset(name for name, _info, knob in knobs(model) if not knob.resumed)


def knob_error(exc: ValidationError, flags: Mapping[str, str]) -> ConfigError:
    """The first validation error as one line naming the flag (``flags``: field ->
    flag; the field name where it has none), e.g. ``--warmup: must be >= 0 (got -1.0)``."""
    problem = first_problem(exc)
    msg = problem.message
    loc = [part for part in (problem.field or "").split(".") if part and not part.isdigit()]
    if not loc:
        return ConfigError(msg)
    shown = msg.replace("Input should be", "must be").replace("greater than or equal to", ">=")
    shown = shown.replace("greater than", ">").replace("less than or equal to", "<=")
    got = problem.value
    tail = f" (got {got!r})" if got is not None and not isinstance(got, dict | tuple | list) \
        and repr(got) not in shown else ""  # said once: a message may quote the value
    return ConfigError(f"{flags.get(loc[0], loc[0])}: {shown}{tail}")


M = TypeVar("M", bound=BaseModel)


def from_knobs(model: type[M], values: Mapping[str, Any],
               flags: Mapping[str, str] | None = None) -> M:
    """``model(**values)``; a bad value is a :class:`ConfigError` naming its flag (from
    the model's knobs unless ``flags`` is given), never a traceback."""
    try:
        return model(**values)
    except ValidationError as exc:
        raise knob_error(exc, knob_flags(model) if flags is None else flags) from None
