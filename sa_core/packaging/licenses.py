"""LICENSE texts for packed distributions, chosen by SPDX id.

Templates ship for MIT, Apache-2.0, ISC, GPL-3.0 (a notice pointing to the GPL), BSD-3-Clause and
UNLICENSED (all rights reserved). Any other valid SPDX expression gets a short file holding the
id and a copyright line. The copyright holder defaults to ``[COPYRIGHT HOLDER]``.

Example::

    text = license_text("MIT", holder="Ada Lovelace")
    expression = metadata_expression("MIT")      # "MIT", for pyproject's license field
"""

from __future__ import annotations

import datetime
from importlib import resources
from string import Template

from sa_core.packaging.errors import PackagingError

__all__ = ["DEFAULT_HOLDER", "TEMPLATE_IDS", "license_text", "metadata_expression"]

DEFAULT_HOLDER = "[COPYRIGHT HOLDER]"

_TEMPLATES: dict[str, tuple[str, dict[str, str]]] = {
    "MIT": ("MIT.txt", {}),
    "Apache-2.0": ("Apache-2.0.txt", {}),
    "ISC": ("ISC.txt", {}),
    "BSD-3-Clause": ("BSD-3-Clause.txt", {}),
    "GPL-3.0": ("GPL-3.0.txt", {"gpl_version": "version 3 of the License"}),
    "GPL-3.0-only": ("GPL-3.0.txt", {"gpl_version": "version 3 of the License"}),
    "GPL-3.0-or-later": (
        "GPL-3.0.txt",
        {"gpl_version": "either version 3 of the License, or (at your option) any later version"},
    ),
    "UNLICENSED": ("UNLICENSED.txt", {}),
}

TEMPLATE_IDS: tuple[str, ...] = tuple(_TEMPLATES)
"""The SPDX ids with a full template (matched case-insensitively)."""

UNLICENSED_EXPRESSION = "LicenseRef-UNLICENSED"
"""The core-metadata expression for npm's ``UNLICENSED`` (not an SPDX id)."""


def _canonical_id(spdx: str) -> str | None:
    lowered = spdx.strip().lower()
    return next((key for key in _TEMPLATES if key.lower() == lowered), None)


def metadata_expression(spdx: str) -> str:
    """Return the license expression for ``[project] license`` (PEP 639).

    ``UNLICENSED`` becomes ``LicenseRef-UNLICENSED``; any other value must be a valid SPDX
    expression (``MIT``, ``Apache-2.0 OR MIT``, ``LicenseRef-Acme``) and is canonicalised.

    Raises:
        PackagingError: the value is not a valid SPDX license expression.

    """
    from packaging.licenses import InvalidLicenseExpression, canonicalize_license_expression

    if _canonical_id(spdx) == "UNLICENSED":
        return UNLICENSED_EXPRESSION
    try:
        return str(canonicalize_license_expression(spdx))
    except InvalidLicenseExpression as exc:
        raise PackagingError(
            f"License '{spdx}' is not a valid SPDX license expression ({exc}). Use an SPDX id "
            f"such as MIT, Apache-2.0 or BSD-3-Clause (see https://spdx.org/licenses/), "
            f"'UNLICENSED' for all rights reserved, or 'LicenseRef-<name>' for your own terms."
        ) from None


def license_text(spdx: str, holder: str | None = None, year: int | None = None) -> str:
    """Return the LICENSE file text for an SPDX id.

    Args:
        spdx: the license id (``MIT`` ...); ids with a template match case-insensitively.
        holder: the copyright holder; ``[COPYRIGHT HOLDER]`` when empty.
        year: the copyright year; the current year by default.

    Raises:
        PackagingError: ``spdx`` has no template and is not a valid SPDX expression.

    """
    values = {
        "holder": (holder or "").strip() or DEFAULT_HOLDER,
        "year": str(year or datetime.date.today().year),
    }
    key = _canonical_id(spdx)
    if key is None:
        expression = metadata_expression(spdx)
        return (
            f"SPDX-License-Identifier: {expression}\n\n"
            f"Copyright (c) {values['year']} {values['holder']}\n\n"
            f"This software is licensed under {expression}; see https://spdx.org/licenses/ for "
            f"the license text.\n"
        )
    filename, extra = _TEMPLATES[key]
    template = resources.files("sa_core.packaging").joinpath("licenses").joinpath(filename)
    return Template(template.read_text(encoding="utf-8")).safe_substitute(values, **extra)
