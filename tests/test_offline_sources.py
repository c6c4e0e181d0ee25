"""`regtrack sources offline` before it builds anything: the pinned releases load from the
package data unchanged (their digest is what decides whether a repository is rebuilt), bad
input is refused with one line, and a folder it did not make is never replaced. Building
the set for real: the offline_redis fixture (conftest.py) and tests/test_pipx.py."""

from __future__ import annotations

from tests.conftest import cli_in_process


def test_the_pinned_releases_are_the_recipes_every_repository_was_made_from():
    """A change here changes every commit SHA or forces every repository to be rebuilt:
    make it on purpose (and bump FORMAT_VERSION when the layout changes)."""
    from regtrack.targets.offline import recipes

    products = recipes.products()
    assert sorted(products) == ["redis", "valkey"]
    redis = products["redis"]
    assert [s.version for s in redis.sources] == ["6.2.14", "7.0.15", "8.0.2", "8.0.6"]
    assert recipes.recipe_digest(redis) == "51a05fd38612cd95"
    assert recipes.recipe_digest(products["valkey"]) == "22ac347c04994956"


def test_an_unknown_product_is_bad_input(tmp_path):
    proc = cli_in_process("sources", "offline", "memcached", str(tmp_path / "x"))
    assert proc.returncode == 2
    assert "no offline source set for 'memcached'; choose redis or valkey" in proc.stderr
    assert not (tmp_path / "x").exists()


def test_a_folder_it_did_not_make_is_never_replaced(tmp_path):
    dest = tmp_path / "mine"
    dest.mkdir()
    (dest / "notes.txt").write_text("keep me\n")
    proc = cli_in_process(
        "sources", "offline", "redis", str(dest), "--work", str(tmp_path / "work")
    )
    assert proc.returncode == 3
    assert "is not empty and was not made by this command" in proc.stderr
    assert [p.name for p in dest.iterdir()] == ["notes.txt"]
