"""The service's whole schema: the core tables and the LTI tables, in one SQLAlchemy metadata
(what Alembic's migrations and the schema tests compare against)."""

from __future__ import annotations

from . import lti_tables  # noqa: F401  (importing it adds the LTI tables)
from .tables import Base

metadata = Base.metadata
