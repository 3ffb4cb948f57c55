"""schemathesis hooks for tests/api/fuzz.rs.

Every well-formed X-Operator becomes the test world's operator, who holds admin on every cluster, so generated
calls reach the API's logic instead of a 404 for an operator without grants. A malformed one (or none) is sent as
generated: its refusal is part of what is tested. Forcing the header on every request instead would turn a
generated bad operator into a good one, and the fuzzer would take the 200 for a bad request accepted.
"""

import re

import schemathesis

OPERATOR = "tester"
# What the document declares for X-Operator (src/api/doc.rs, OPERATOR_PATTERN; at most 200 characters).
WELL_FORMED = re.compile(r"[!-~]([ -~]*[!-~])?")


@schemathesis.hook
def map_headers(context, headers):
    if headers is None:
        return headers
    value = headers.get("X-Operator")
    if isinstance(value, str) and len(value) <= 200 and WELL_FORMED.fullmatch(value):
        headers["X-Operator"] = OPERATOR
    return headers
