"""Building a record model directly from values validation would keep as they are.

Validating a model costs more than building it when every value is already what validation
returns: an exact ``str``, ``int`` or ``bool``, an allowed literal, ``None`` where the field
allows it, or a model instance of the field's exact class (pydantic keeps instances as they
are). :class:`PlainBuilder` builds such a model the way pydantic's validator would (the same
``__dict__`` in field order, the same fields set, no extras) and declines anything else, which
the caller then validates as usual. Lists are taken only where named (``lists``: a list of
instances of one exact model class, copied into a new list as validation does); dicts never.
The engine builds several messages and tool calls per model step with it.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import NoneType, UnionType
from typing import Any, Generic, Literal, TypeVar, Union, get_args, get_origin

from pydantic import BaseModel

M = TypeVar("M", bound=BaseModel)
_Kind = tuple[tuple[type, ...], frozenset[Any] | None]
_new, _set = object.__new__, object.__setattr__


def _containers(model: type[BaseModel]) -> list[str]:
    """The fields that may hold a list or a dict (validation copies those)."""
    names = []
    for name, info in model.model_fields.items():
        annotation = info.annotation
        union = get_origin(annotation) in (Union, UnionType)
        arms = get_args(annotation) if union else (annotation,)
        if any(get_origin(arm) in (list, dict) or arm in (list, dict) for arm in arms):
            names.append(name)
    return names


def _field_kinds(model: type[BaseModel]) -> dict[str, _Kind]:
    """The fields a value may skip validation for: its exact types, and its literal values.

    ``None`` as the literal values: any value of those types is allowed. A list or a dict
    arm admits only ``None``; a field with an arm of any other type is left out.
    """
    kinds: dict[str, _Kind] = {}
    for name, info in model.model_fields.items():
        annotation = info.annotation
        union = get_origin(annotation) in (Union, UnionType)
        types: set[type] = set()
        literals: set[Any] = set()
        for arm in get_args(annotation) if union else (annotation,):
            if get_origin(arm) is Literal:
                literals.update(get_args(arm))
                types.update(type(value) for value in get_args(arm))
            elif arm in (str, int, bool, NoneType):
                types.add(arm)
            elif _kept_as_is(arm):
                types.add(arm)  # an instance of exactly this class is kept as it is
            elif get_origin(arm) not in (list, dict):
                break  # a type validation converts: never taken as it is
        else:
            if literals and types - {type(value) for value in literals} - {NoneType}:
                continue  # literals beside a plain type: validated
            kinds[name] = (tuple(types), frozenset(literals) or None)
    return kinds


_SAFE_CONFIG = frozenset({"extra", "populate_by_name", "defer_build", "title"})
"""Model settings that change nothing validation does to the values a builder takes."""


def _kept_as_is(cls: Any) -> bool:
    """Whether validation keeps an instance of exactly ``cls`` as it is (no revalidation)."""
    return (
        isinstance(cls, type)
        and issubclass(cls, BaseModel)
        and cls.model_config.get("revalidate_instances", "never") == "never"
    )


class PlainBuilder(Generic[M]):
    """Builds ``model`` from plain values without validating them (see the module docstring).

    Args:
        model: A model without validators or private attributes (default factories that
            take no argument are called as validation calls them).
        lists: List fields taken as a list of instances of the given exact model class.
    """

    def __init__(self, model: type[M], lists: Mapping[str, type[BaseModel]] | None = None):
        fields = model.model_fields.values()
        if model.__pydantic_post_init__ is not None or any(
            f.default_factory_takes_validated_data for f in fields
        ):
            raise TypeError(f"{model.__name__} needs validation to be built")
        decorators = model.__pydantic_decorators__
        if decorators.validators or decorators.field_validators or decorators.model_validators:
            raise TypeError(f"{model.__name__} has validators")
        if set(model.model_config) - _SAFE_CONFIG or model.__private_attributes__:
            raise TypeError(f"{model.__name__} has settings or private attributes to validate")
        if any(f.alias or f.validation_alias for f in fields):
            raise TypeError(f"{model.__name__} has aliases")
        if any(not _kept_as_is(item) for item in (lists or {}).values()):
            raise TypeError(f"{model.__name__}: a list item class is revalidated")
        self._model = model
        self._kinds = _field_kinds(model)
        self._lists = dict(lists or {})
        self._required = [n for n, f in model.model_fields.items() if f.is_required()]
        self._defaults = {name: info.default for name, info in model.model_fields.items()}
        self._allows_extra = model.model_config.get("extra") == "allow"
        self._partial = set(model.model_fields) != set(self._kinds)
        """Some field is never taken as it is (:meth:`updated` cannot vouch for it)."""
        self._containers = [name for name in _containers(model) if name not in self._lists]
        """The dict and list fields (taken only when ``None``), but the named lists."""
        self._factories = {
            name: info.default_factory
            for name, info in model.model_fields.items()
            if info.default_factory is not None
        }
        """The fields whose default is made per model (validation calls the factory)."""

    def build(self, values: dict[str, Any]) -> M | None:
        """``model(**values)``, or ``None`` when a value needs validation (or one is missing)."""
        if not self._plain(values):
            return None
        for name in self._required:
            if name not in values:
                return None
        data = self._defaults.copy()
        data.update(values)
        for name, factory in self._factories.items():
            if name not in values:
                data[name] = factory()  # type: ignore[call-arg]
        return self._made(data, set(values))

    def updated(self, instance: M, changes: dict[str, Any]) -> M | None:
        """``model.model_validate({**instance.__dict__, **changes})``, or ``None`` (validate).

        ``instance``'s own values were checked when it was built: only ``changes`` are, and
        ``instance`` must hold no dict or list (validation would copy them) but a named list
        field's, and no extra (validation would drop it).
        """
        if type(instance) is not self._model or instance.__pydantic_extra__ or self._partial:
            return None
        data = instance.__dict__
        for name in self._containers:
            if data[name] is not None:
                return None
        for name, item in self._lists.items():
            value = data[name]
            if value is not None and not all(type(element) is item for element in value):
                return None
        if not self._plain(changes):
            return None
        data = data.copy()
        data.update(changes)
        return self._made(data, set(data))

    def _plain(self, values: dict[str, Any]) -> bool:
        """Whether every value is one validation keeps as it is."""
        kinds, lists = self._kinds, self._lists
        for name, value in values.items():
            kind = kinds.get(name)
            if kind is None:
                return False
            if type(value) not in kind[0]:
                item = lists.get(name)
                if item is None or type(value) is not list:
                    return False
                if not all(type(element) is item for element in value):
                    return False
            elif kind[1] is not None and value is not None and value not in kind[1]:
                return False
        return True

    def _made(self, data: dict[str, Any], fields_set: set[str]) -> M:
        """The model of ``data`` (every field, in order), named lists copied as validation does."""
        for name in self._lists:
            if type(data[name]) is list:
                data[name] = list(data[name])
        built = _new(self._model)
        _set(built, "__dict__", data)
        _set(built, "__pydantic_fields_set__", fields_set)
        _set(built, "__pydantic_extra__", {} if self._allows_extra else None)
        _set(built, "__pydantic_private__", None)
        return built


__all__ = ["PlainBuilder"]
