"""Everything a protocol's module imports, in one public module: the built-in protocols
import the engine from here, and so does a protocol of one's own (``docs/plugins.md``).

- the engine: ``Checker`` (a protocol subclasses it), its route table (``Route``,
  ``UnknownTypes``, ``Handler``, ``NO_PAYLOAD``), ``EventFindings`` (the findings on the
  event being checked), and its helpers (``KeptText``, ``listing``, ``json_object``,
  ``any_json``, ``may_name``, ``parse_json``, ``preview``, ``Transcript``; ``Holes`` and
  ``UNCHANGED``, what a checker vouches for so that a frame of the same skeleton is not
  parsed again: ``Checker.repeatable``, whose ``repeat_event`` gets the value holes' JSON
  texts, a string's read with ``json_string_text``); ``Entities``, numbered things that
  open and close in a stream, and the rules it decides for each ``EntityKind`` a protocol
  declares;
- the lifecycle: ``terminated_lifecycle`` (a terminal signal and an in-band error), or a
  ``Lifecycle`` table of one's own with its steps (``go``, ``broken``, ``STAY``) and the
  kinds every protocol has (``TERMINAL``, ``ERROR``, ``OTHER``; ``END``, ``ANY`` in a
  table's keys);
- payload shapes: ``req``, ``opt``, ``may`` and the field kinds (``STRING``, ``NUMBER``,
  ...), which a ``Route`` checks, and ``shape_problem`` for a handler's own;
- findings: ``Finding``, ``Rule``, ``Severity``, and ``rules``, the catalog (its rules:
  ``rules.INVALID_JSON``...); a rule's long form is a ``rule_doc``;
- what a checker reads: ``Event`` (one SSE event), ``RequestBody`` and ``RequestFact``
  (what it reads of the request);
- how a protocol is declared and made known: ``ProtocolSpec``, ``Signal``, ``register``,
  ``unregister``.

The modules these come from are private: what they export besides is the built-in
protocols' shared machinery, which may change. ``tests/test_exports.py`` holds this
module to everything those modules offer a checker.
"""

from __future__ import annotations

from streamguard import rules
from streamguard.protocols._base import (
    MAX_KEPT_TEXT_CHARS,
    NO_FINDINGS,
    NO_PAYLOAD,
    NOT_JSON_DATA,
    Checker,
    EventFindings,
    Handler,
    KeptText,
    Route,
    Transcript,
    UnknownTypes,
    any_json,
    cut_rows,
    event_name,
    json_object,
    listing,
    may_name,
    sealed_rows,
    terminated_lifecycle,
)
from streamguard.protocols._entities import Entities, EntityKind
from streamguard.protocols._fields import (
    ANY_VALUE,
    ARRAY,
    ARRAY_OF_LAX_INTEGERS,
    ARRAY_OF_LAX_NUMBERS,
    ARRAY_OF_STRICT_INTEGERS,
    ARRAY_OF_STRINGS,
    BASE64,
    BOOLEAN,
    EACH,
    INTEGER,
    LAX_BOOLEAN,
    LAX_FRACTION,
    LAX_INTEGER,
    LAX_NUMBER,
    LAX_STRING_OR_INTEGER,
    MAX_SHAPE_DEPTH,
    MAX_SHAPE_ITEMS,
    MAX_SHAPE_OBJECTS,
    NUMBER,
    OBJECT,
    OBJECT_OF_OBJECTS,
    OBJECT_OF_SCHEMAS,
    ONE,
    ONE_OR_EACH,
    STRICT_INTEGER,
    STRICT_NUMBER,
    STRING,
    STRING_OR_ARRAY,
    STRING_OR_EXACT_INTEGER,
    STRING_OR_NUMBER,
    Field,
    Nested,
    Shape,
    declared,
    is_number,
    lax_integer,
    may,
    may_hold,
    nested_problem,
    object_problems,
    opt,
    req,
    shape_problem,
    shape_problems,
    type_name,
    usable,
)
from streamguard.protocols._lifecycle import (
    ANY,
    END,
    ERROR,
    OTHER,
    STAY,
    TERMINAL,
    Lifecycle,
    Step,
    broken,
    go,
)
from streamguard.protocols._payload import (
    not_json,
    parse_json,
    preview,
)
from streamguard.protocols._registry import (
    register,
    unregister,
)
from streamguard.protocols._skeleton import (
    UNCHANGED,
    Holes,
    json_string_text,
)
from streamguard.protocols._spec import (
    NOT_JSON,
    EventTest,
    HeadersTest,
    PathTest,
    ProtocolSpec,
    Signal,
)
from streamguard.report import (
    Finding,
    Severity,
)
from streamguard.request import (
    RequestBody,
    RequestFact,
)
from streamguard.rule_docs import (
    rule_doc,
)
from streamguard.rules import (
    Rule,
)
from streamguard.sse import (
    Event,
)

__all__ = [
    "ANY",
    "ANY_VALUE",
    "ARRAY",
    "ARRAY_OF_LAX_INTEGERS",
    "ARRAY_OF_LAX_NUMBERS",
    "ARRAY_OF_STRICT_INTEGERS",
    "ARRAY_OF_STRINGS",
    "BASE64",
    "BOOLEAN",
    "EACH",
    "END",
    "ERROR",
    "INTEGER",
    "LAX_BOOLEAN",
    "LAX_FRACTION",
    "LAX_INTEGER",
    "LAX_NUMBER",
    "LAX_STRING_OR_INTEGER",
    "MAX_KEPT_TEXT_CHARS",
    "MAX_SHAPE_DEPTH",
    "MAX_SHAPE_ITEMS",
    "MAX_SHAPE_OBJECTS",
    "NOT_JSON",
    "NOT_JSON_DATA",
    "NO_FINDINGS",
    "NO_PAYLOAD",
    "NUMBER",
    "OBJECT",
    "OBJECT_OF_OBJECTS",
    "OBJECT_OF_SCHEMAS",
    "ONE",
    "ONE_OR_EACH",
    "OTHER",
    "STAY",
    "STRICT_INTEGER",
    "STRICT_NUMBER",
    "STRING",
    "STRING_OR_ARRAY",
    "STRING_OR_EXACT_INTEGER",
    "STRING_OR_NUMBER",
    "TERMINAL",
    "UNCHANGED",
    "Checker",
    "Entities",
    "EntityKind",
    "Event",
    "EventFindings",
    "EventTest",
    "Field",
    "Finding",
    "Handler",
    "HeadersTest",
    "Holes",
    "KeptText",
    "Lifecycle",
    "Nested",
    "PathTest",
    "ProtocolSpec",
    "RequestBody",
    "RequestFact",
    "Route",
    "Rule",
    "Severity",
    "Shape",
    "Signal",
    "Step",
    "Transcript",
    "UnknownTypes",
    "any_json",
    "broken",
    "cut_rows",
    "declared",
    "event_name",
    "go",
    "is_number",
    "json_object",
    "json_string_text",
    "lax_integer",
    "listing",
    "may",
    "may_hold",
    "may_name",
    "nested_problem",
    "not_json",
    "object_problems",
    "opt",
    "parse_json",
    "preview",
    "register",
    "req",
    "rule_doc",
    "rules",
    "sealed_rows",
    "shape_problem",
    "shape_problems",
    "terminated_lifecycle",
    "type_name",
    "unregister",
    "usable",
]
