"""Restricted message templates of target files: only their fields, as text."""


from __future__ import annotations

import pytest

from partition_lab.errors import TargetSpecError
from partition_lab.targets.templates import MessageTemplate, check_template


@pytest.mark.parametrize("template, shown", [
    ("{op} is {value:<10}, not {expected}", "relu is 3         , not 4"),
    ("{{literal}} {op}", "{literal} relu"), ("no fields", "no fields"),
    ("{op:^80}", " " * 38 + "relu" + " " * 38)])
def test_safe_templates_pass(template, shown):
    fields = ("op", "value", "expected")
    check_template(template, fields, "t")  # raises TargetSpecError on a template it refuses
    assert MessageTemplate(template, fields, "t").format(op="relu", value=3, expected=4) == shown


def test_a_template_formats_only_its_fields_as_text():
    template = MessageTemplate("{op:>5}|{value}", ("op", "value"), "t")

    class Loud:
        def __format__(self, spec):
            raise AssertionError("an object's __format__ must not run")

        def __str__(self):
            return "v"

    assert template.format(op="ab", value=Loud(), other="ignored") == "   ab|v"


@pytest.mark.parametrize("template", ["{op.__class__}", "{op[0]}", "{op:>81}", "{op!s}",
                                      "{op:>{value}}", "{op:,}", "{x}", "}{"])
def test_unsafe_templates_fail(template):
    with pytest.raises(TargetSpecError):
        check_template(template, ("op", "value"), "t")


