"""tools/unwrap_decorators.py, which lets mutmut mutate decorated functions: the rewritten source
behaves as the original (each decoration applied to the plain function, innermost first), the
functions it leaves alone (``staticmethod``, ``classmethod``, a ``.setter`` of its own name, nested
functions) are the ones written here, and the text is what the docstring shows."""

import importlib.util
import sys
from pathlib import Path

TOOL = Path(__file__).resolve().parents[1] / "tools" / "unwrap_decorators.py"
spec = importlib.util.spec_from_file_location("unwrap_decorators", TOOL)
unwrap_decorators = importlib.util.module_from_spec(spec)
spec.loader.exec_module(unwrap_decorators)

SOURCE = """\
import contextlib
import functools


def twice(fn):
    return lambda *a: 2 * fn(*a)


def plus(k):
    return lambda fn: (lambda *a: fn(*a) + k)


@twice
@plus(1)
def f(x):
    return x * 10


@contextlib.contextmanager
def opened(log):
    log.append("in")
    yield 5
    log.append("out")


class C:
    def __init__(self):
        self._v = 3
        self.reads = 0

    @property
    def v(self):
        return self._v

    @v.setter
    def v(self, value):
        self._v = value

    @functools.cached_property
    def once(self):
        self.reads += 1
        return self.reads

    @staticmethod
    def s():
        return "s"

    @classmethod
    def c(cls):
        return cls.__name__

    def outer(self):
        @twice
        def inner():
            return 4

        return inner()
"""


def load(text, tmp_path, name):
    path = tmp_path / f"{name}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def test_the_rewritten_module_behaves_as_the_original(tmp_path):
    text, names = unwrap_decorators.unwrap(SOURCE)
    assert names == ["f", "opened", "v", "once"]
    for module in (load(SOURCE, tmp_path, "original"), load(text, tmp_path, "rewritten")):
        assert module.f(3) == 2 * (30 + 1)  # the decorator nearest the def applies first
        log = []
        with module.opened(log) as got:
            assert got == 5 and log == ["in"]
        assert log == ["in", "out"]
        c = module.C()
        assert c.v == 3
        c.v = 7
        assert c.v == 7 and c._v == 7
        assert (c.once, c.once, c.reads) == (1, 1, 1)  # computed once
        assert (module.C.s(), module.C.c(), c.outer()) == ("s", "C", 8)


def test_the_text_is_a_plain_def_and_the_decoration_as_an_assignment():
    text, _ = unwrap_decorators.unwrap(SOURCE)
    assert "def f(x):\n    return x * 10\nf = twice(plus(1)(f))\n" in text
    assert "    def v(self):\n        return self._v\n    v = property(v)\n\n    @v.setter\n" in text
    assert "    once = functools.cached_property(once)\n" in text
    assert "    @staticmethod\n" in text and "    @classmethod\n" in text
    assert "        @twice\n        def inner():" in text  # nested: left alone
    assert "@property" not in text and "@contextlib" not in text


def test_a_module_without_decorators_is_unchanged():
    source = "def g():\n    return 1\n"
    assert unwrap_decorators.unwrap(source) == (source, [])
