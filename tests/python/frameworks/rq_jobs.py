"""The functions the RQ framework test enqueues (imported by RQ's worker by name)."""


def add(a, b):
    return a + b


def fail(text):
    raise ValueError(text)
