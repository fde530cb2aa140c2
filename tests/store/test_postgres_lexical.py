"""PostgreSQL's lexical channel ranks as SQLite's FTS5 bm25() does, and its corpus
statistics stay exact through every write, migration and concurrent writer."""

from __future__ import annotations

import random
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import numpy as np
import psycopg
import pytest
from store_fixtures import (  # noqa: F401  (fixtures are found by their registered names)
    DIM,
    T0,
    locomo_word_corpus,
    make_episode,
    postgres_schema_url_fixture,
    unit_vectors,
)

from anamnesis.store.base import Filters, Selection
from anamnesis.store.postgres import PostgresStore, lexical, search
from anamnesis.store.postgres.lexical import any_lexeme, token_count
from anamnesis.store.postgres.schema import MIGRATIONS
from anamnesis.store.sqlite import SQLiteStore
from anamnesis.types import Scope

CONVERSATION = Scope("conv-26", session_id="s1")
OTHER_TENANT = Scope("bob", agent_id="helper")


@pytest.fixture
def pg(postgres_schema_url):
    store = PostgresStore(postgres_schema_url, dim=DIM)
    yield store
    store.close()


def _corpus() -> tuple[list, list[list[str]]]:
    """200 episodes in two tenants, and the queries to run on them: the 76 real turns
    of the LoCoMo fixture in the first, the 124 recombined sentences in the second, so
    that N counts both tenants (``locomo_word_corpus``)."""
    turns, mixed, queries = locomo_word_corpus()
    episodes = [make_episode(t, scope=CONVERSATION) for t in turns]
    episodes += [make_episode(t, scope=OTHER_TENANT) for t in mixed]
    return episodes, queries


def test_ranking_matches_sqlite_fts5_bm25(pg, tmp_path):
    episodes, queries = _corpus()
    vectors = unit_vectors(len(episodes))
    sqlite = SQLiteStore(tmp_path / "reference.db", dim=DIM)
    try:
        sqlite.insert_episodes(episodes, vectors)
        pg.insert_episodes(episodes, vectors)
        overlaps, identical, equal_scores, shared = [], 0, 0, 0
        for terms in queries:
            for scope in (CONVERSATION, OTHER_TENANT):
                expected = sqlite.lexical_search(terms, scope, Filters(), 10)
                got = pg.lexical_search(terms, scope, Filters(), 10)
                ids_expected = [c.episode_id for c in expected]
                ids_got = [c.episode_id for c in got]
                if not ids_expected and not ids_got:
                    continue
                union = set(ids_expected) | set(ids_got)
                overlaps.append(len(set(ids_expected) & set(ids_got)) / len(union))
                identical += ids_expected == ids_got
                scores = {c.episode_id: c.score for c in expected}
                for candidate in got:
                    if candidate.episode_id in scores:
                        shared += 1
                        equal_scores += candidate.score == pytest.approx(
                            scores[candidate.episode_id], rel=1e-9
                        )
    finally:
        sqlite.close()
    assert len(overlaps) > 100
    # Measured: 1.0 on all three (the two stemmers agree on every stem in this
    # conversation). The bars leave room for the cases where Snowball and Porter
    # differ (e.g. "generous": Porter "gener", conflated with "general").
    assert np.mean(overlaps) >= 0.95
    assert identical / len(overlaps) >= 0.9
    assert equal_scores / shared >= 0.95


def test_rare_terms_outrank_common_ones_and_short_episodes_outrank_long(pg):
    common = [make_episode(f"the weather was nice on day {i}") for i in range(20)]
    rare = make_episode("a weather report mentioned a tornado")
    long = make_episode("tornado " + " ".join(f"filler{i}" for i in range(60)))
    pg.insert_episodes([*common, rare, long], unit_vectors(22))
    hits = pg.lexical_search(["weather", "tornado"], Scope("alice"), Filters(), 5)
    assert [h.episode_id for h in hits[:2]] == [rare.id, long.id]
    assert hits[0].score > hits[1].score > hits[2].score > 0


@pytest.fixture
def passes(monkeypatch):
    """The lexemes each BM25 pass of the test's searches was confined to (None: every
    match scored)."""
    seen: list[str | None] = []
    original = lexical.bm25_query

    def spy(weights, candidates, params, limit):
        confined = "%s::tsquery" in candidates
        position = candidates[: candidates.find("%s::tsquery")].count("%s")
        seen.append(params[position] if confined else None)
        return original(weights, candidates, params, limit)

    monkeypatch.setattr(search, "bm25_query", spy)
    return seen


def _every_match(pg, terms, scope, filters, limit):
    """BM25 scored over every match, as lexical_search does below its pruning threshold."""
    saved = search.PRUNE_MIN_POSTINGS
    search.PRUNE_MIN_POSTINGS = 10**12
    try:
        return pg.lexical_search(terms, scope, filters, limit)
    finally:
        search.PRUNE_MIN_POSTINGS = saved


def test_pruned_search_returns_the_top_of_scoring_every_match(pg, monkeypatch, passes):
    episodes, queries = _corpus()
    # Equal texts tie on score: the pruned search must break ties as the full one does.
    episodes += [
        make_episode(f"{word} tornado camera", scope=CONVERSATION)
        for word in ("caught", "caught", "caught", "saw", "saw")
    ]
    pg.insert_episodes(episodes, unit_vectors(len(episodes)))
    queries += [["tornado", "caught", "camera"], ["caught", "camera"]]
    monkeypatch.setattr(search, "PRUNE_MIN_POSTINGS", 0)
    monkeypatch.setattr(search, "PRUNE_MIN_SCOPE_ROWS", 0)
    monkeypatch.setattr(search, "FIRST_PASS_POSTINGS", 1)
    middle = sorted(e.event_time for e in episodes)[len(episodes) // 2]
    compared = confined = 0
    for terms in queries:
        for scope in (CONVERSATION, OTHER_TENANT):
            for filters in (Filters(), Filters(event_before=middle)):
                for limit in (1, 3, 10):
                    passes.clear()
                    got = pg.lexical_search(terms, scope, filters, limit)
                    confined += bool(passes) and passes[-1] is not None
                    expected = _every_match(pg, terms, scope, filters, limit)
                    assert [(c.episode_id, c.score) for c in got] == [
                        (c.episode_id, c.score) for c in expected
                    ], terms
                    compared += bool(expected)
    assert compared > 300
    assert confined > 50  # the final pass skipped episodes holding only weak lexemes

    # Writes that raise a lexeme's largest tf or tf / len(d) (a word repeated, a short
    # text), and deletes that leave the bounds above what remains: still the same top.
    for episode in episodes[:40:4]:
        words = episode.content.split()
        pg.update_episode(
            episode.id,
            CONVERSATION,
            content=" ".join(words[:2] * 4) if len(words) > 1 else "tornado tornado",
            content_hash="h",
            metadata={},
            vector=None,
            changed_at=middle,
        )
    for episode in episodes[1:60:5]:
        pg.delete_episode(episode.id, CONVERSATION)
    weights = _weights(pg, ["tornado", "caught", "camera", "time"])
    assert all(tf is not None for tf in weights.max_tf)  # the tight bounds are in use
    for terms in queries:
        for limit in (1, 3, 10):
            got = pg.lexical_search(terms, CONVERSATION, Filters(), limit)
            expected = _every_match(pg, terms, CONVERSATION, Filters(), limit)
            assert [(c.episode_id, c.score) for c in got] == [
                (c.episode_id, c.score) for c in expected
            ], terms


def _weights(pg, terms):
    with psycopg.connect(pg.url) as conn:
        return lexical.query_weights(conn, terms)


def _largest_contributions(url: str) -> dict[str, float]:
    """Per lexeme, the most it adds to any stored episode's score, as a multiple of its
    weight: tf * (k1 + 1) / (tf + k1 * (1 - b + b * len(d) / avglen)), scored in SQL."""
    with psycopg.connect(url) as conn:
        return dict(
            conn.execute(
                f"""SELECT m.lexeme, max(cardinality(m.positions) * 2.2
                      / (cardinality(m.positions) + 1.2 * (0.25 + 0.75 * {lexical.DOCUMENT_LENGTH}
                         / (SELECT tokens::float8 / documents FROM text_corpus))))
                    FROM episodes e, unnest(e.content_tsv) AS m GROUP BY m.lexeme"""
            ).fetchall()
        )


def test_each_lexeme_bound_stays_above_what_it_adds_through_every_write(pg, postgres_schema_url):
    alice = Scope("alice")
    episodes = [
        make_episode("apples and pears from the market", scope=alice),
        make_episode("a basket of apples, pears and plums for the winter", scope=alice),
        make_episode("plums", scope=alice),
    ]
    pg.insert_episodes(episodes, unit_vectors(3))

    def check() -> dict[str, tuple[int, float]]:
        """Every lexeme's bound holds, and is exact where no delete lowered the maximum."""
        largest = _largest_contributions(postgres_schema_url)
        weights = _weights(pg, list(largest))
        for index, lexeme in enumerate(weights.lexemes):
            bound = weights.bound(index) / weights.weights[index]
            assert bound >= largest[lexeme] * (1 - 1e-12), lexeme
            assert bound < 2.2
        with psycopg.connect(postgres_schema_url) as conn:
            return {
                r[0]: (r[1], r[2])
                for r in conn.execute(
                    "SELECT lexeme, max_tf, max_density FROM text_lexemes WHERE documents > 0"
                )
            }

    stored = check()
    assert stored["appl"] == (1, 1 / 7)  # 6 content tokens and 1 scope token (then 11)
    assert stored["plum"] == (1, 1 / 2)
    # An update that repeats a word the episode already held: n(t) does not change,
    # the largest tf does.
    pg.update_episode(
        episodes[0].id,
        alice,
        content="apples apples apples",
        content_hash="h",
        metadata={},
        vector=None,
        changed_at=T0 + timedelta(days=1),
    )
    stored = check()
    assert stored["appl"] == (3, 3 / 4)
    # Deleting the episode that set a maximum leaves the bound high, never low.
    pg.delete_episode(episodes[0].id, alice)
    assert check()["appl"] == (3, 3 / 4)
    pg.forget(alice, Selection(containing="basket"))
    assert check() == {"plum": (1, 1 / 2)}  # no episode holds "appl" any more
    pg.insert_episodes([make_episode("apples", scope=alice)], unit_vectors(1))
    assert check()["appl"] == (1, 1 / 2)
    pg.rebuild_lexical_statistics()
    assert check() == {"plum": (1, 1 / 2), "appl": (1, 1 / 2)}


def test_a_common_word_is_not_scored_when_rare_ones_fill_the_top(pg, monkeypatch, passes):
    common = [make_episode(f"the cat sat on mat {i}") for i in range(60)]
    rare = [make_episode(f"a zebra crossed at dawn {i}") for i in range(5)]
    both = make_episode("the cat watched a zebra")
    pg.insert_episodes([*common, *rare, both], unit_vectors(66))
    monkeypatch.setattr(search, "PRUNE_MIN_POSTINGS", 0)
    monkeypatch.setattr(search, "PRUNE_MIN_SCOPE_ROWS", 0)
    hits = pg.lexical_search(["cat", "zebra"], Scope("alice"), Filters(), 3)
    assert passes == ["'zebra'"]  # one pass: episodes without "zebra" were never scored
    assert [h.episode_id for h in hits] == [
        c.episode_id for c in _every_match(pg, ["cat", "zebra"], Scope("alice"), Filters(), 3)
    ]
    assert hits[0].episode_id == both.id


def test_a_tie_between_the_two_passes_goes_to_the_earlier_episode(pg, monkeypatch, passes):
    # "zebra" and "yak" are equally rare, so the two episodes score the same; the
    # first pass takes "yak" (the first of equals), the second finds "zebra".
    earlier = make_episode("a zebra note")
    later = make_episode("a yak note")
    pg.insert_episodes([earlier, later, make_episode("nothing")], unit_vectors(3))
    monkeypatch.setattr(search, "PRUNE_MIN_POSTINGS", 0)
    monkeypatch.setattr(search, "PRUNE_MIN_SCOPE_ROWS", 0)
    monkeypatch.setattr(search, "FIRST_PASS_POSTINGS", 1)
    hits = pg.lexical_search(["yak", "zebra"], Scope("alice"), Filters(), 1)
    assert passes[0] == "'yak'" and passes[1].endswith(" & !('yak')")  # not scored twice
    assert [h.episode_id for h in hits] == [earlier.id]
    assert hits == _every_match(pg, ["yak", "zebra"], Scope("alice"), Filters(), 1)


def test_a_user_of_few_rows_is_scored_in_one_pass(pg, monkeypatch, passes):
    pg.insert_episodes(
        [make_episode(f"the cat sat on mat {i}") for i in range(30)]
        + [make_episode(f"a zebra crossed at dawn {i}") for i in range(5)],
        unit_vectors(35),
    )
    with psycopg.connect(pg.url, autocommit=True) as conn:
        conn.execute("ANALYZE episodes")  # the planner's statistics say how many rows
    monkeypatch.setattr(search, "PRUNE_MIN_POSTINGS", 0)
    monkeypatch.setattr(search, "PRUNE_MIN_SCOPE_ROWS", 36)
    assert pg.lexical_search(["cat", "zebra"], Scope("alice"), Filters(), 3)
    assert passes == [None]  # alice has 35 rows: every match scored at once
    passes.clear()
    monkeypatch.setattr(search, "PRUNE_MIN_SCOPE_ROWS", 35)
    pg.lexical_search(["cat", "zebra"], Scope("alice"), Filters(), 3)
    assert passes == ["'zebra'"]


def test_any_lexeme_matches_each_lexeme_exactly_as_stored(pg, postgres_schema_url):
    lexemes = ["it's", "back\\slash", "a:b", "two words", "star*", "'quoted'", "c&d|e"]
    with psycopg.connect(postgres_schema_url) as conn:
        for lexeme in lexemes:
            query = any_lexeme([lexeme])
            matches = [
                conn.execute(
                    "SELECT array_to_tsvector(%s::text[]) @@ %s::tsquery", ([other], query)
                ).fetchone()[0]
                for other in lexemes
            ]
            assert matches == [other == lexeme for other in lexemes], lexeme
        both = any_lexeme(lexemes[:2])
        for lexeme in lexemes:
            found = conn.execute(
                "SELECT array_to_tsvector(%s::text[]) @@ %s::tsquery", ([lexeme], both)
            ).fetchone()[0]
            assert found == (lexeme in lexemes[:2])


def test_the_floor_condition_keeps_every_episode_that_could_reach_the_floor(
    postgres_schema_url,
):
    weights = lexical.QueryWeights(
        lexemes=["ant", "bee", "cat", "dog", "eel", "fox"],
        weights=[5.0, 3.0, 2.5, 1.0, 0.5, 0.25],
        mean_length=10.0,
    )
    bounds = dict(zip(weights.lexemes, map(weights.bound, range(6)), strict=True))
    subsets = [
        [lexeme for bit, lexeme in enumerate(weights.lexemes) if mask >> bit & 1]
        for mask in range(1, 64)
    ]
    with psycopg.connect(postgres_schema_url) as conn:
        for floor in (0.5, 2.0, 5.5, 7.0, 11.0, 13.6, 26.0):
            for budget in (64, 4, 1):
                condition = lexical.at_least(weights, floor, budget)
                assert condition is not None
                for subset in subsets:
                    kept = conn.execute(
                        "SELECT array_to_tsvector(%s::text[]) @@ %s::tsquery",
                        (subset, condition),
                    ).fetchone()[0]
                    reaches = sum(bounds[lexeme] for lexeme in subset) >= floor
                    if reaches or budget == 64:  # exact when the tree fits the budget
                        assert kept == reaches, (floor, budget, subset)
        assert lexical.at_least(weights, 0.0, 64) is None
        assert lexical.at_least(weights, 100.0, 64) is None  # beyond every bound: no test


def _statistics(url: str) -> tuple[tuple[int, int], dict[str, int]]:
    with psycopg.connect(url) as conn:
        corpus = conn.execute("SELECT documents, tokens FROM text_corpus").fetchone()
        lexemes = dict(
            conn.execute("SELECT lexeme, documents FROM text_lexemes WHERE documents <> 0")
        )
    return corpus, lexemes


def _recounted(url: str) -> tuple[tuple[int, int], dict[str, int]]:
    """The statistics counted from scratch, as the migration fills them."""
    with psycopg.connect(url) as conn:
        conn.execute("CREATE TEMP TABLE saved_corpus AS SELECT * FROM text_corpus")
        conn.execute("CREATE TEMP TABLE saved_lexemes AS SELECT * FROM text_lexemes")
        from anamnesis.store.postgres.lexical import rebuild_statistics

        rebuild_statistics(conn)
        corpus = conn.execute("SELECT documents, tokens FROM text_corpus").fetchone()
        lexemes = dict(conn.execute("SELECT lexeme, documents FROM text_lexemes"))
        conn.rollback()
    return corpus, lexemes


def test_statistics_follow_inserts_updates_and_deletes(pg, postgres_schema_url):
    alice, bob = Scope("alice", session_id="s1"), Scope("bob")
    episodes = [make_episode(f"apples and pears number {i}", scope=alice) for i in range(5)]
    episodes += [make_episode(f"bananas, apples, {i} cherries", scope=bob) for i in range(5)]
    pg.insert_episodes(episodes, unit_vectors(10))
    corpus, lexemes = _statistics(postgres_schema_url)
    assert corpus[0] == 10
    # content tokens plus the scope tokens FTS5 would count (user + session / user)
    assert corpus[1] == 5 * (5 + 2) + 5 * (4 + 1)
    assert lexemes["appl"] == 10 and lexemes["pear"] == 5 and lexemes["banana"] == 5
    assert (corpus, lexemes) == _recounted(postgres_schema_url)

    pg.update_episode(
        episodes[0].id,
        alice,
        content="a completely new text about plums",
        content_hash="h",
        metadata={},
        vector=None,
        changed_at=T0 + timedelta(days=1),
    )
    pg.delete_episode(episodes[6].id, bob)
    pg.delete_scope(alice)
    corpus, lexemes = _statistics(postgres_schema_url)
    assert corpus == (4, 4 * (4 + 1))
    assert lexemes == {"appl": 4, "banana": 4, "cherri": 4, "0": 1, "2": 1, "3": 1, "4": 1}
    assert (corpus, lexemes) == _recounted(postgres_schema_url)

    with psycopg.connect(postgres_schema_url) as conn:
        conn.execute("DELETE FROM episodes WHERE content = 'bananas, apples, 0 cherries'")
    assert _statistics(postgres_schema_url)[0] == (4, 20)
    pg.rebuild_lexical_statistics()
    corpus, lexemes = _statistics(postgres_schema_url)
    assert corpus == (3, 15) and "0" not in lexemes


def test_forget_leaves_no_lexeme_of_the_forgotten_text(pg, postgres_schema_url):
    alice = Scope("alice")
    kept = make_episode("apples and pears", scope=alice)
    gone = make_episode("apples and xqzvorpluntek", scope=alice)
    pg.insert_episodes([kept, gone], unit_vectors(2))
    pg.forget(alice, Selection(containing="xqzvorpluntek"))
    with psycopg.connect(postgres_schema_url) as conn:
        lexemes = dict(conn.execute("SELECT lexeme, documents FROM text_lexemes"))
    assert lexemes == {"appl": 1, "pear": 1}
    assert _statistics(postgres_schema_url) == _recounted(postgres_schema_url)


def test_concurrent_writers_do_not_deadlock_and_keep_counts_exact(pg, postgres_schema_url):
    vocabulary = "red green blue apple river stone cloud music dance light".split()

    def write(worker: int) -> None:
        rng = random.Random(worker)
        scope = Scope(f"user{worker}")
        for round_ in range(6):
            batch = [
                make_episode(" ".join(rng.sample(vocabulary, 5)), scope=scope) for _ in range(8)
            ]
            pg.insert_episodes(batch, unit_vectors(8, seed=worker * 100 + round_))
            pg.update_episode(
                batch[0].id,
                scope,
                content=" ".join(reversed(rng.sample(vocabulary, 4))),
                content_hash="h",
                metadata={},
                vector=None,
                changed_at=T0,
            )
            pg.delete_episode(batch[1].id, scope)

    with ThreadPoolExecutor(max_workers=6) as pool:
        list(pool.map(write, range(6)))
    corpus, lexemes = _statistics(postgres_schema_url)
    assert corpus[0] == 6 * 6 * 7
    assert (corpus, lexemes) == _recounted(postgres_schema_url)


def test_a_version_1_store_gets_its_statistics_on_open(postgres_schema_url):
    with psycopg.connect(postgres_schema_url) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        for statement in MIGRATIONS[1](DIM):
            conn.execute(statement)  # type: ignore[arg-type]
        conn.execute(
            "INSERT INTO meta VALUES ('application', 'anamnesis'), ('schema_version', '1')"
        )
        for i, text in enumerate(["the river was cold", "a cold cold morning", "warm sun"]):
            conn.execute(
                "INSERT INTO episodes (id, user_id, content, event_time, recorded_at, "
                "content_hash) VALUES (%s, 'alice', %s, now(), now(), 'h')",
                (f"old{i}", text),
            )
    store = PostgresStore(postgres_schema_url, dim=DIM)
    try:
        assert store.get_meta("schema_version") == str(max(MIGRATIONS))
        corpus, lexemes = _statistics(postgres_schema_url)
        assert corpus == (3, (4 + 1) + (4 + 1) + (2 + 1))
        assert lexemes == {"river": 1, "cold": 2, "morn": 1, "warm": 1, "sun": 1}
        with psycopg.connect(postgres_schema_url) as conn:
            bounds = conn.execute(
                "SELECT max_tf, max_density FROM text_lexemes WHERE lexeme = 'cold'"
            ).fetchone()
        assert bounds == (2, 2 / 5)  # "a cold cold morning": 4 tokens and the user's
        hits = store.lexical_search(["cold"], Scope("alice"), Filters(), 5)
        assert [h.episode_id for h in hits] == ["old1", "old0"]
        store.insert_episodes([make_episode("cold again")], unit_vectors(1))
        assert _statistics(postgres_schema_url)[0] == (4, 13 + 2 + 1)
    finally:
        store.close()


def test_token_count_splits_as_unicode61_does():
    assert token_count("I'm 3.5 years old — well-known_fact, café!") == 10
    assert token_count("") == 0


def _indexes(url: str) -> set[str]:
    with psycopg.connect(url) as conn:
        return {
            r[0]
            for r in conn.execute(
                "SELECT indexname FROM pg_indexes WHERE schemaname = current_schema() "
                "AND tablename = 'episodes'"
            )
        }


def test_a_tenants_lexical_search_is_confined_to_its_rows_by_the_index(pg, postgres_schema_url):
    assert {"episodes_user_fts"} <= _indexes(postgres_schema_url)
    assert "episodes_fts" not in _indexes(postgres_schema_url)  # replaced, not kept beside
    assert "user_id, content_tsv" in pg.lexical_backend
    with psycopg.connect(postgres_schema_url) as conn:
        definition = conn.execute(
            "SELECT indexdef FROM pg_indexes WHERE schemaname = current_schema() "
            "AND indexname = 'episodes_user_fts'"
        ).fetchone()[0]
    assert "USING gin (user_id, content_tsv)" in definition


def test_without_btree_gin_the_store_warns_searches_the_same_and_upgrades_later(
    postgres_schema_url, monkeypatch
):
    from anamnesis.store.postgres import schema

    episodes = [make_episode(f"the cat sat on mat {i}") for i in range(8)]
    episodes += [make_episode("a cat and a zebra", scope=OTHER_TENANT)]
    monkeypatch.setattr(schema, "SCOPED_INDEX_EXTENSION", "btree_gin_not_installed")
    with pytest.warns(RuntimeWarning, match="run CREATE EXTENSION btree_gin_not_installed"):
        store = PostgresStore(postgres_schema_url, dim=DIM)
    try:
        assert "GIN on content_tsv only" in store.lexical_backend
        assert "btree_gin_not_installed" in store.lexical_backend  # the server's reason
        assert "episodes_fts" in _indexes(postgres_schema_url)
        store.insert_episodes(episodes, unit_vectors(len(episodes)))
        before = store.lexical_search(["cat", "zebra"], Scope("alice"), Filters(), 5)
    finally:
        store.close()
    monkeypatch.undo()
    store = PostgresStore(postgres_schema_url, dim=DIM)  # the extension is there now
    try:
        assert "user_id, content_tsv" in store.lexical_backend
        assert "episodes_fts" not in _indexes(postgres_schema_url)
        after = store.lexical_search(["cat", "zebra"], Scope("alice"), Filters(), 5)
        assert [(c.episode_id, c.score) for c in after] == [(c.episode_id, c.score) for c in before]
        assert len(after) == 5
    finally:
        store.close()


def test_a_role_that_cannot_build_the_index_opens_the_store_and_says_why(postgres_schema_url):
    PostgresStore(postgres_schema_url, dim=DIM).close()
    with psycopg.connect(postgres_schema_url) as conn:  # as a primary not yet upgraded
        conn.execute("DROP INDEX episodes_user_fts")
        conn.execute("CREATE INDEX episodes_fts ON episodes USING gin (content_tsv)")
    read_only = postgres_schema_url.replace(
        "options=", "options=-cdefault_transaction_read_only%3Don%20"
    )
    with pytest.warns(RuntimeWarning, match="open the store once as the tables' owner"):
        replica = PostgresStore(read_only, dim=DIM)
    try:
        assert "read-only transaction" in replica.lexical_backend
        assert replica.lexical_search(["cat"], Scope("alice"), Filters(), 5) == []
    finally:
        replica.close()
    assert "episodes_fts" in _indexes(postgres_schema_url)
