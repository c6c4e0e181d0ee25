import os

import pytest

from regtrack.core.errors import BadInput
from regtrack.targets.versions import parse_spec, parse_specs, resolve


def test_labels_and_kinds():
    specs = parse_specs("a=bin:/usr/bin/redis-server, 7.0.15 ,new=unstable,image:redis:7.2")
    assert [(s.label, s.kind, s.value) for s in specs] == [
        ("a", "bin", "/usr/bin/redis-server"),
        ("7.0.15", "git", "7.0.15"),
        ("new", "git", "unstable"),
        ("image:redis:7.2", "image", "redis:7.2"),
    ]


def test_equals_sign_inside_a_path_is_not_a_label():
    spec = parse_spec("bin:/opt/x=y/redis-server")
    assert (spec.kind, spec.value) == ("bin", "/opt/x=y/redis-server")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a=bin:/x,a=bin:/y", "used twice"),
        ("bin:/x,bin:/x", "used twice"),
        ("", "no versions"),
        ("a=", "nothing after"),
        ("bad label=7.0", "not valid"),
        ("7.0;rm -rf /", "not a tag, branch or commit"),
        ("$(reboot)", "not a tag, branch or commit"),
        ("foo:bar", "unknown prefix"),
        ("bin:", "nothing after"),
        ("x\n", "control characters"),
    ],
)
def test_bad_specs_are_refused_with_a_message(text, message):
    with pytest.raises(BadInput, match=message):
        parse_specs(text)


def test_bin_spec_resolves_to_an_executable_with_its_sha256(tmp_path):
    exe = tmp_path / "redis-server"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    link = tmp_path / "link"
    link.symlink_to(exe)
    (target,) = resolve(parse_specs(f"x=bin:{link}"))
    assert target.binary == str(link)  # run by the name given (argv[0] matters to Redis)
    assert target.resolved_path == str(exe)
    assert len(target.binary_sha256) == 64


def test_missing_or_non_executable_binary_is_bad_input(tmp_path):
    with pytest.raises(BadInput, match="does not exist"):
        resolve(parse_specs(f"bin:{tmp_path}/nope"))
    plain = tmp_path / "plain"
    plain.write_text("x")
    os.chmod(plain, 0o644)
    with pytest.raises(BadInput, match="not an executable"):
        resolve(parse_specs(f"bin:{plain}"))
