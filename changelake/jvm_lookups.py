"""PySpark's view of the JVM, made to remember the classes, packages and static methods it has
looked up.

py4j resolves a name such as `jvm.functions` or `jvm.PythonUtils` by asking the JVM each time,
and the JVM tries it as a class in every package PySpark imported into the view: each miss is a
`Class.forName` that searches every jar on the classpath. PySpark does it in every `F.col`,
`F.lit` and column list it passes (`_to_seq`), hundreds of times in a table's batch, and asks
again for the static method (`functions.col`) each time. Profiled under load (JFR on a streaming
run of the demo shop), the class lookups were a fifth of the JVM's CPU spent answering the
driver's Python. A class found once stays that class for the JVM's life, and a static method
that method, so the view keeps what it found; a static field's value is asked for each time
(it can change). py4j takes a name it cannot find for a package, and that is kept too: a
`java_import` after a bare name was first asked for would not make it that class (PySpark
imports before it asks).
"""

from __future__ import annotations

from typing import Any

from py4j.java_gateway import JavaClass, JavaMember, JavaPackage, JVMView

_FOUND = "_changelake_found"  # the attribute holding what a view, package or class found


class _Remembering:
    def __getattr__(self, name: str) -> Any:
        found: dict[str, Any] = self.__dict__[_FOUND]
        if name in found:
            return found[name]
        value = super().__getattr__(name)  # type: ignore[misc]  # py4j asks the JVM
        if type(value) is JavaPackage:  # `jvm.java` → `.lang` → `.Thread`: each part remembered
            _remember(value, RememberingPackage)
        elif type(value) is JavaClass:
            _remember(value, RememberingClass)
        elif type(value) is not JavaMember:  # a static field's value
            return value
        found[name] = value
        return value


class RememberingView(_Remembering, JVMView):  # type: ignore[misc]  # py4j is untyped
    """A JVM view that asks the JVM for each name once."""


class RememberingPackage(_Remembering, JavaPackage):  # type: ignore[misc]
    """A package of a remembering view, which asks the JVM for each member once."""


class RememberingClass(_Remembering, JavaClass):  # type: ignore[misc]
    """A class of a remembering view, which asks the JVM for each static method once."""


def _remember(found: Any, kind: type) -> None:
    found.__dict__[_FOUND] = {}
    found.__class__ = kind


def remember_lookups(jvm: JVMView) -> None:
    """Make the gateway's one view of the JVM (shared by the context, the sessions and every
    PySpark module) remember its lookups; once per process, whatever the callers."""
    if not isinstance(jvm, RememberingView):
        _remember(jvm, RememberingView)
