"""Sandbox-side harness: imports student code, runs one probe per check in a forked child.

Everything in this package runs *inside* the sandbox, next to untrusted code, so it depends on
nothing but the standard library and numpy, and it never holds expected values. Its outputs are
claims that the host validates (see ``grader.channel``).
"""
