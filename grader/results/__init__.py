"""The results: what a grading leaves behind, below every command that makes or reads it.

    record.py      ``StoredResult`` (one student's result), ``ResultStatus``, lateness, cache keys
    store.py       ``SQLiteStore``: ``results.sqlite``, the batch cache the exports and feedback read
    names.py       the name rules: which student ids and file names may become paths or words
    roster.py      the class roster (CSV) and which stored results claim each of its students
    tables.py      the SQLAlchemy tables of the one store (batch cache and service); lti_tables.py
    database.py    engines, sessions, Alembic migrations (``migrations/``), retries
    schema.py      the whole metadata (what the migrations and the schema tests compare against)

``grader batch``, the exports, the feedback pages, Gradescope mode and the grading service import
from here; nothing here imports them (tests/test_layers.py). ``record``, ``names`` and ``store``
load no SQLAlchemy until a store is opened.
"""
