"""The fused aggregation over many groups: chunks' groups merged partition by partition
(``_scanner.absorb``), rows of mostly new groups appended without a lookup and made
distinct where they are merged or exported, and the groups exported as Arrow buffers
(``_scanner.export_columns``), no Python object per group. Each checked against DuckDB,
or against the one-table merge and export it replaces."""

from __future__ import annotations

import itertools
import random

import pytest

from gateway_csv import _scanner, fused, scan
from tests.csv_support import assert_same, gateway_for, write

#: delimiter, quote, escape, columns, header, null texts, comment, pad (tests/test_csv_simd.py)
DIALECT = (ord(","), ord('"'), ord('"'), 2, True, (b"",), -1, False)


def _rows(seed: int, n: int, distinct: int) -> str:
    """k (text), i (integer), d (date), ts (timestamp), b (boolean), f (double), v
    (integer, some near BIGINT's end), big (9e18 in a few groups: sums past BIGINT)."""
    rng = random.Random(seed)
    lines = ["k,i,d,ts,b,f,v,big"]
    for r in range(n):
        g = rng.randrange(distinct)
        k = "" if g % 97 == 0 else f"key{g}"  # some NULL keys
        i = "" if g % 89 == 0 else str(g % 1000 - 500)
        d = f"20{g % 30:02d}-0{g % 9 + 1}-1{g % 10}"
        ts = f"{d} 0{g % 10}:1{r % 10}:00"
        b = ("true", "false", "")[g % 3]
        f = "" if r % 13 == 0 else repr(rng.uniform(-1e6, 1e6))
        v = str(rng.choice([rng.randrange(-1000, 1000), 2**62 + r]))
        big = str(9 * 10**18 if g % 50 == 0 else r)
        lines.append(f"{k},{i},{d},{ts},{b},{f},{v},{big}")
    return "\n".join(lines) + "\n"


QUERIES = [
    "SELECT k, i, sum(v) AS s, count(*) AS n, count(f) AS nf, avg(f) AS af FROM t GROUP BY k, i",
    "SELECT k, min(f) AS lo, max(f) AS hi, min(d) AS d0, max(ts) AS t1, avg(v) AS a FROM t GROUP BY k",
    "SELECT d, b, sum(big) AS s, sum(f) AS sf FROM t GROUP BY d, b",
    "SELECT ts, i, count(*) AS n, min(v) AS lo FROM t GROUP BY ts, i",
    "SELECT b, count(*) AS n, sum(big) AS s FROM t GROUP BY b",
    "SELECT count(*) AS n, sum(v) AS s, min(d) AS d FROM t",
    # two-column states (corr's takes two cells of a record) beside one-cell ones (not of v:
    # two of its values 5,091 apart near 2**62 have a stddev_pop of 2,545.5, DuckDB's
    # Welford 2,804 and two states joined 2,560; the order of additions decides there)
    "SELECT k, var_samp(f) AS vs, stddev_pop(i) AS sp, covar_pop(f, i) AS cp, corr(i, f) AS c, "
    "count(*) AS n, pow(corr(f, i), 2) AS r2, covar_samp(i, f) AS cs FROM t GROUP BY k",
    # corr last: its third cell's unused count is where the key starts (q9's layout), a
    # text key beside another in the arena, or a lone one in the record
    "SELECT k, i, pow(corr(f, i), 2) AS r2 FROM t GROUP BY k, i",
    "SELECT k, count(*) AS n, corr(i, f) AS c FROM t GROUP BY k",
]


@pytest.mark.parametrize("chunk_bytes", [1 << 12, 1 << 16, 1 << 24])
@pytest.mark.parametrize("distinct", [40, 6000])
def test_many_groups_answer_as_duckdb(tmp_path, monkeypatch, chunk_bytes, distinct):
    """Few and many groups, in many chunks (merged by partition) and in one (whose state
    may be unindexed and is then made distinct as it is exported)."""
    path = write(tmp_path, "g.csv", _rows(distinct, 8000, distinct))
    exported = []
    real = _scanner.export_columns
    monkeypatch.setattr(_scanner, "export_columns",
                        lambda states, *args: exported.append(len(states)) or real(states, *args))
    with gateway_for(path, chunk_bytes=chunk_bytes) as gw:
        for sql in QUERIES:
            assert_same(gw, sql)
    assert len(exported) == len(QUERIES)  # each answered by the fused scan
    if chunk_bytes == 1 << 12:
        assert set(exported) == {_scanner.AGG_PARTS}


def _scan(path, start: int, boundary: int, spill: int = -1, unindexed: bool = False,
          groups: int = 0):
    file = _scanner.File(str(path))
    try:
        end, _seen, _out, _skipped, error, state = _scanner.scan(
            file, start, boundary, DIALECT, ((0, 0), (1, 1)), (), ((0, 0),),
            ((fused.A_COUNT_STAR, -1), (fused.A_SUM, 1)), -1, spill, unindexed, groups)
    finally:
        file.close()
    assert error is None
    return end, state


def _by_key(keys: list, aggs: list) -> dict:
    return {k: tuple(a[g] for a in aggs) for g, k in enumerate(keys[0])}


def test_a_scan_of_mostly_new_groups_appends_them_and_exports_them_distinct(tmp_path):
    """An unindexed scan appends each row as a group of its own; the rows repeat
    keys, and the export still has each group once."""
    path = write(tmp_path, "r.csv", "k,v\n" + "".join(f"k{r % 5000},{r}\n" for r in range(12000)))
    end, state = _scan(path, 4, path.stat().st_size, unindexed=True)
    assert end == path.stat().st_size
    keys, aggs = state.export()
    assert len(keys[0]) == state.groups == 5000
    expected = {f"k{g}": (len(range(g, 12000, 5000)), sum(range(g, 12000, 5000)))
                for g in range(5000)}
    assert _by_key(keys, aggs) == expected


def _keys_file(tmp_path, rows: int, distinct: int):
    rng = random.Random(rows + distinct)
    return write(tmp_path, "s.csv", "k,v\n" + "".join(
        f"k{rng.randrange(distinct)},{r % 7}\n" for r in range(rows)))


def test_a_scan_of_1e5_keys_keeps_looking_rows_up(tmp_path):
    """20,000 keys drawn at random: the first 4096 rows are nearly all new groups, but
    past 65,536 rows few are, so the scan stays indexed and never stops early (a spill
    of one byte would stop an unindexed scan at its next row)."""
    path = _keys_file(tmp_path, 100_000, 20_000)
    size = path.stat().st_size
    end, state = _scan(path, 4, size, spill=1)
    assert end == size
    assert state.groups == len({line.split(",")[0] for line in path.read_text().splitlines()[1:]})


@pytest.mark.parametrize("groups", [1, 20_000, 1 << 20])
def test_a_scan_given_room_for_groups_answers_as_one_grown_from_empty(tmp_path, groups):
    """The room a scan's table starts with (the most groups a chunk had so far), too
    little, about right or far too much, changes no answer."""
    path = _keys_file(tmp_path, 30_000, 20_000)
    size = path.stat().st_size
    _end, roomy = _scan(path, 4, size, groups=groups)
    _end, grown = _scan(path, 4, size)
    assert roomy.groups == grown.groups
    assert _by_key(*roomy.export()) == _by_key(*grown.export())


def test_a_scan_of_mostly_new_groups_stops_at_its_spill_and_the_rest_answers_alike(tmp_path):
    """Distinct keys: past 65,536 rows the scan stops looking up and, past its spill,
    stops; the rest scanned unindexed from there, and both merged, answer as one scan."""
    path = _keys_file(tmp_path, 90_000, 10**9)
    size = path.stat().st_size
    end, first = _scan(path, 4, size, spill=1 << 16)
    assert 1 << 16 < end < size
    rest_end, rest = _scan(path, end, size, spill=1 << 16, unindexed=True)
    assert rest_end < size  # an unindexed scan stops at its spill too
    tail_end, tail = _scan(path, rest_end, size, unindexed=True)
    assert tail_end == size
    first.merge(rest)
    first.merge(tail)
    _end, whole = _scan(path, 4, size)
    assert _by_key(*first.export()) == _by_key(*whole.export())


def test_grouped_chunks_of_mostly_new_groups_are_cut_back_and_answer_as_duckdb(tmp_path,
                                                                               monkeypatch):
    """A grouped scan reads chunks of GROUPED_CHUNKS times chunk_bytes; one of mostly new
    groups stops at chunk_bytes and the rest of its chunk is scanned unindexed, in
    chunks of chunk_bytes, in the pool."""
    path = _keys_file(tmp_path, 200_000, 10**9)
    seen = []
    real = scan.Scanner._scan
    monkeypatch.setattr(scan.Scanner, "_scan", lambda self, chunk, *args: seen.append(
        (chunk.unindexed, chunk.boundary - chunk.start)) or real(self, chunk, *args))
    with gateway_for(path, chunk_bytes=1 << 18) as gw:
        assert_same(gw, "SELECT k, count(*) AS n, sum(v) AS s FROM t GROUP BY k")
        assert_same(gw, "SELECT v, count(*) AS n FROM t GROUP BY v")
    rest = [size for unindexed, size in seen if unindexed]
    assert rest and max(rest) <= (1 << 18) + 64
    assert max(size for _unindexed, size in seen) > 4 << 18


@pytest.mark.parametrize("groups", [1, 10_000, 50_000, 1 << 20])
def test_an_unindexed_scan_given_room_for_its_rows_answers_as_one_grown_from_empty(tmp_path,
                                                                                   groups):
    """An unindexed scan's table starts with room for the rows it is expected to read
    (Scanner._scan's estimate): too little (10,000 for 40,000 rows: its runs by partition
    fill, and the rest is appended after them), about right or far too much, it answers
    alike."""
    path = _keys_file(tmp_path, 40_000, 10**9)
    size = path.stat().st_size
    _end, roomy = _scan(path, 4, size, unindexed=True, groups=groups)
    _end, grown = _scan(path, 4, size, unindexed=True)
    assert _by_key(*roomy.export()) == _by_key(*grown.export())


def test_an_unindexed_scan_given_room_for_its_rows_lays_them_out_by_partition(tmp_path):
    """Given the rows it will read (8,192 or more), an unindexed scan appends each row to
    its partition's run, so absorb reads each partition's groups in a row; grown from
    empty, or past what it was given, its rows lie in the order they were read."""
    path = _keys_file(tmp_path, 40_000, 10**9)
    size = path.stat().st_size
    _end, runs = _scan(path, 4, size, unindexed=True, groups=42_000)
    assert runs.in_partition_order
    _end, grown = _scan(path, 4, size, unindexed=True)
    assert not grown.in_partition_order
    _end, overflowed = _scan(path, 4, size, unindexed=True, groups=10_000)
    assert not overflowed.in_partition_order
    parts = runs.partitions()
    _scanner.absorb(parts, [runs], 0, _scanner.AGG_PARTS)
    assert sum(part.groups for part in parts) == len(_by_key(*grown.export()))


def test_unindexed_chunks_are_given_room_for_their_rows(tmp_path, monkeypatch):
    """Past a spill, each unindexed chunk's scan is given the rows it will read, estimated
    from the bytes of a row where the chunk spilled: 5% over its rows, not grown from 64
    groups by doubling (each doubling a copy of the whole table)."""
    path = _keys_file(tmp_path, 200_000, 10**9)
    asked = []
    real = _scanner.scan
    monkeypatch.setattr(_scanner, "scan", lambda *args: asked.append(
        (args[1], args[2], args[10], args[11])) or real(*args))
    with gateway_for(path, chunk_bytes=1 << 18) as gw:
        assert_same(gw, "SELECT k, count(*) AS n, sum(v) AS s FROM t GROUP BY k")
    lines = path.read_bytes()
    unindexed = [(start, end, groups) for start, end, flag, groups in asked if flag]
    assert unindexed
    for start, end, groups in unindexed:
        rows = lines.count(b"\n", start, min(end, start + (1 << 18)))  # up to its spill
        assert rows <= groups <= rows * 1.15 + 64


def test_after_a_spill_the_chunks_not_yet_started_look_no_row_up(tmp_path, monkeypatch):
    """Once a grouped chunk stops early (its rows mostly new groups), the chunks not yet
    started are scanned unindexed from their first row, each given room for the rows up to
    its spill (looking up their first rows only to stop was a tenth of q9's time)."""
    path = _keys_file(tmp_path, 900_000, 10**9)  # 13 MB: grouped chunks of 2 MiB
    asked = []
    real = _scanner.scan
    monkeypatch.setattr(_scanner, "scan", lambda *args: asked.append(
        (args[1], args[2], args[10], args[11])) or real(*args))
    chunk = 1 << 18
    with gateway_for(path, chunk_bytes=chunk) as gw:
        assert_same(gw, "SELECT k, count(*) AS n, sum(v) AS s FROM t GROUP BY k")
    whole = [(start, end, flag, groups) for start, end, flag, groups in asked
             if end - start > 2 * chunk]  # the grouped chunks of 8 times chunk_bytes
    assert not whole[0][2]  # the first looks its rows up, and stops early
    later = [(start, groups) for start, end, flag, groups in whole if flag]
    assert len(later) >= 2  # all but the first four (submitted before the first stopped)
    lines = path.read_bytes()
    for start, groups in later:
        rows = lines.count(b"\n", start, start + chunk)
        assert rows <= groups <= rows * 1.15 + 64


def test_a_many_group_query_gives_back_the_table_arrays_it_kept(tmp_path):
    """Freed scan tables' arrays are kept for the next scan's (its pages already faulted
    in) and go back to the system once the query's scans are merged."""
    path = _keys_file(tmp_path, 40_000, 10**9)
    _scanner.pool_release()
    _end, state = _scan(path, 4, path.stat().st_size, unindexed=True, groups=60_000)
    del state  # its records (60,000 of 32 bytes) and hashes: kept
    assert _scanner.pool_held() >= 60_000 * 32
    _end, again = _scan(path, 4, path.stat().st_size, unindexed=True, groups=60_000)
    assert _scanner.pool_held() < 60_000 * 32  # taken by the next scan's table
    del again
    _scanner.pool_release()
    assert _scanner.pool_held() == 0
    # an indexed scan's (a chunk of 1e5 groups: a dozen to a query) are freed, not kept
    _end, indexed = _scan(path, 4, path.stat().st_size, groups=60_000)
    del indexed
    assert _scanner.pool_held() == 0
    with gateway_for(_keys_file(tmp_path, 200_000, 10**9), chunk_bytes=1 << 18) as gw:
        assert_same(gw, "SELECT k, count(*) AS n, sum(v) AS s FROM t GROUP BY k")
    assert _scanner.pool_held() == 0


def test_the_kept_arrays_go_back_before_the_last_merge(tmp_path, monkeypatch):
    """Once a file's last chunk is scanned no scan is left to take the kept arrays: they
    go back to the system before the last chunks are merged into the partitions, which
    grow most then (not after that merge)."""
    _scanner.pool_release()
    seed = _keys_file(tmp_path, 40_000, 10**9)
    _end, state = _scan(seed, 4, seed.stat().st_size, unindexed=True, groups=60_000)
    del state
    assert _scanner.pool_held() >= 60_000 * 32  # too big for the query's chunks to take
    held = []
    real = fused._absorb
    monkeypatch.setattr(fused, "_absorb", lambda *args: held.append(_scanner.pool_held())
                        or real(*args))
    with gateway_for(_keys_file(tmp_path, 200_000, 10**9), chunk_bytes=1 << 18) as gw:
        assert_same(gw, "SELECT k, count(*) AS n, sum(v) AS s FROM t GROUP BY k")
    assert held and held[-1] == 0


def test_absorb_merges_chunks_partition_by_partition_as_merge_does(tmp_path):
    rng = random.Random(7)
    path = write(tmp_path, "r.csv", "k,v\n" + "".join(
        f"{'' if r % 41 == 0 else f'k{rng.randrange(3000)}'},{rng.randrange(-9, 9)}\n"
        for r in range(20000)))
    size = path.stat().st_size
    cuts = [4] + [path.read_bytes().index(b"\n", size * i // 5) + 1 for i in range(1, 5)] + [size]
    partials = [_scan(path, a, b)[1] for a, b in itertools.pairwise(cuts)]
    parts = partials[0].partitions()
    assert len(parts) == _scanner.AGG_PARTS
    _scanner.absorb(parts, partials[:3], 0, 10)  # any ranges, any batches
    _scanner.absorb(parts, partials[:3], 10, _scanner.AGG_PARTS)
    _scanner.absorb(parts, partials[3:], 0, _scanner.AGG_PARTS)
    n, keys, aggs = _scanner.export_columns(parts, "s")
    one = [_scan(path, a, b)[1] for a, b in itertools.pairwise(cuts)]
    for other in one[1:]:
        one[0].merge(other)
    want_keys, want_aggs = one[0].export()
    assert n == len(want_keys[0])
    got = fused._array(fused.pa.string(), n, keys[0]).to_pylist()
    counts = fused._array(fused.pa.int64(), n, aggs[0]).to_pylist()
    sums = fused._array(fused.pa.int64(), n, aggs[1]).to_pylist()
    assert {k: (c, s) for k, c, s in zip(got, counts, sums, strict=True)} == \
        _by_key(want_keys, want_aggs)


def test_absorb_and_export_refuse_states_of_other_plans(tmp_path):
    path = write(tmp_path, "r.csv", "k,v\na,1\nb,2\n")
    _end, state = _scan(path, 4, path.stat().st_size)
    file = _scanner.File(str(path))
    try:
        other = _scanner.scan(file, 4, path.stat().st_size, DIALECT, ((0, 0), (1, 1)), (), ((0, 0),),
                              ((fused.A_MAX, 1),), -1)[5]
    finally:
        file.close()
    with pytest.raises(TypeError):
        _scanner.absorb(state.partitions(), [other], 0, 1)
    with pytest.raises(TypeError):
        _scanner.export_columns([state, other], "s")
    with pytest.raises(ValueError):
        _scanner.export_columns([state], "q")  # a text key as integers


@pytest.mark.parametrize("chunk_bytes", [1 << 12, 1 << 24])
def test_a_lone_text_key_in_the_record_or_the_arena_answers_as_duckdb(tmp_path, chunk_bytes):
    """A lone text key of up to 24 bytes (its tag, length byte and 22 bytes) is held in
    its group's record, a longer one in the arena: keys of 0-40 characters either side of
    that, NULL, empty and multi-byte ones, in one table and merged across chunks."""
    rng = random.Random(24)
    names = [""] + ["é" * 11, "x" * 22, "y" * 23, "z" * 21 + "é"] + \
        ["".join(rng.choice("ab") for _ in range(rng.randrange(1, 41))) for _ in range(3000)]
    lines = ["k,v"]
    for r in range(20000):
        k = rng.choice(names)
        lines.append(f"{'' if r % 53 == 0 else chr(34) + k + chr(34)},{rng.randrange(-50, 50)}")
    path = write(tmp_path, "k.csv", "\n".join(lines) + "\n")
    with gateway_for(path, chunk_bytes=chunk_bytes) as gw:
        assert_same(gw, "SELECT k, count(*) AS n, sum(v) AS s, min(v) AS lo FROM t GROUP BY k")
        assert_same(gw, "SELECT k, max(v) - min(v) AS r FROM t GROUP BY k")


@pytest.mark.parametrize("chunk_bytes", [1 << 12, 1 << 24])
def test_keys_of_any_length_beside_others_answer_as_duckdb(tmp_path, chunk_bytes):
    """Text keys beside other keys: a key's length in one byte up to 254 bytes and in four
    past it, an integer of 32 bits in 4 bytes and a wider one in 8, and a merged table's
    records holding the keys most of its first chunk's keys fit in (the rest in its
    arena): keys of 0-300 characters, NULL, empty and multi-byte ones, in one table and
    merged across chunks partition by partition."""
    rng = random.Random(254)
    texts = ["", "é" * 127, "x" * 253, "y" * 254, "z" * 255, "w" * 300] + \
        [f"k{i:05d}" for i in range(400)] + \
        ["".join(rng.choice("ab") for _ in range(rng.randrange(1, 60))) for _ in range(200)]
    lines = ["k,j,i,v"]
    for r in range(12000):
        k = "" if r % 43 == 0 else f'"{rng.choice(texts)}"'
        j = "" if r % 47 == 0 else rng.choice(texts[:8] + texts[-20:])
        i = "" if r % 51 == 0 else str(rng.choice([rng.randrange(-5, 5), 2**31 - 1, -(2**31),
                                                 2**31, -(2**31) - 1, 2**62 + r % 3]))
        lines.append(f"{k},{j},{i},{rng.randrange(-99, 99)}")
    path = write(tmp_path, "k.csv", "\n".join(lines) + "\n")
    with gateway_for(path, chunk_bytes=chunk_bytes) as gw:
        assert_same(gw, "SELECT k, j, i, count(*) AS n, sum(v) AS s FROM t GROUP BY k, j, i")
        assert_same(gw, "SELECT k, i, min(v) AS lo, max(v) AS hi FROM t GROUP BY k, i")
        assert_same(gw, "SELECT j, k, avg(v) AS a FROM t GROUP BY j, k")


@pytest.mark.parametrize("lone", [False, True])
def test_partitions_made_from_a_chunk_without_groups_answer_as_duckdb(tmp_path, lone):
    """The partitions take their records' room for keys from the first chunk's groups;
    a first chunk whose rows the WHERE drops has none, and they still hold an arena
    offset's room."""
    rng = random.Random(3)
    lines = ["k,j,v"] + [f"skip{r},x,-1" for r in range(3000)] + \
        [f"k{rng.randrange(4000)},{'j' * rng.randrange(0, 30)},{rng.randrange(0, 50)}"
         for _ in range(20000)]
    path = write(tmp_path, "w.csv", "\n".join(lines) + "\n")
    keys = "k" if lone else "k, j"
    with gateway_for(path, chunk_bytes=1 << 12) as gw:
        assert_same(gw, f"SELECT {keys}, count(*) AS n, sum(v) AS s FROM t WHERE v >= 0 "
                        f"GROUP BY {keys}")


def test_partitions_merged_again_answer_as_merge_does(tmp_path):
    """A merged table keeps no hashes: merging it into another state, or partitioning it
    again (absorbed into new partitions), hashes its keys first."""
    rng = random.Random(9)
    path = write(tmp_path, "r.csv", "k,v\n" + "".join(
        f"{'' if r % 37 == 0 else f'k{rng.randrange(5000)}'},{rng.randrange(-9, 9)}\n"
        for r in range(20000)))
    size = path.stat().st_size
    cuts = [4] + [path.read_bytes().index(b"\n", size * i // 4) + 1 for i in range(1, 4)] + [size]
    partials = [_scan(path, a, b)[1] for a, b in itertools.pairwise(cuts)]
    parts = partials[0].partitions()
    _scanner.absorb(parts, partials, 0, _scanner.AGG_PARTS)
    again = parts[0].partitions()
    _scanner.absorb(again, list(parts), 0, _scanner.AGG_PARTS)
    merged = _scan(path, 4, 4)[1]  # no rows: an empty state
    for part in parts:
        merged.merge(part)
    want = [_scan(path, a, b)[1] for a, b in itertools.pairwise(cuts)]
    for other in want[1:]:
        want[0].merge(other)
    expected = _by_key(*want[0].export())
    assert _by_key(*merged.export()) == expected
    n, keys, aggs = _scanner.export_columns(list(again), "s")
    got = fused._array(fused.pa.string(), n, keys[0]).to_pylist()
    counts = fused._array(fused.pa.int64(), n, aggs[0]).to_pylist()
    sums = fused._array(fused.pa.int64(), n, aggs[1]).to_pylist()
    assert {k: (c, s) for k, c, s in zip(got, counts, sums, strict=True)} == expected


def test_many_groups_keep_within_the_memory_bound():
    """1.5M groups of two text keys (h2o's q2 in small): the partitions' records of 48
    bytes with their keys, their index up to 5/8 full, their records mapped (so freed as
    the answer is written, and never resident past what is written). On main before: 289
    MB over the process's peak before the query; after: 142-167 MB (the answer, the file's
    mapped pages and the chunks being merged included). Measured in a process of its own
    (ru_maxrss only rises). And what stays resident once the answer is dropped: the scans'
    freed tables are given back (malloc_trim after the merge): 51-63 MB over the RSS
    before the query, 97-112 MB when they stayed in malloc's arenas."""
    code = """
import gc, os, resource, tempfile
import gateway
folder = tempfile.mkdtemp()
path, small = os.path.join(folder, "g.csv"), os.path.join(folder, "s.csv")
with open(path, "w") as f:
    f.write("k,j,v\\n")
    f.writelines(f"a{r % 100:03d},b{r:07d},{r % 1000}\\n" for r in range(1_500_000))
with open(small, "w") as f:
    f.write("k,j,v\\na,b,1\\n")
sql = "SELECT k, j, sum(v) AS s FROM t GROUP BY k, j"
config = {"type": "csv", "threads": 2, "chunk_bytes": 1 << 20}
with gateway.connect({"engines": {"csv": config}, "sources": {"t": {"path": small}}}) as gw:
    gw.execute(sql, engine="csv").to_arrow()
def rss():
    return next(int(line.split()[1]) for line in open("/proc/self/status")
                if line.startswith("VmRSS"))
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
resident = rss()
with gateway.connect({"engines": {"csv": config}, "sources": {"t": {"path": path}}}) as gw:
    result = gw.execute(sql, engine="csv")
    table = result.to_arrow()
    assert "fallback_reason" not in result.notes, result.notes
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert table.num_rows == 1_500_000, table.num_rows
    del table, result
    gc.collect()
    kept = rss() - resident
print((after - before) // 1024, kept // 1024)
"""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr
    peak, kept = map(int, done.stdout.split())
    assert peak < 230, f"peak RSS grew {peak} MB"
    assert kept < 85, f"{kept} MB stayed resident after the answer was dropped"


def _direct_rows(seed: int) -> str:
    """Few groups, then (past the scan's DIRECT_GROUPS, 4096) many: text keys of 0-20
    bytes either side of the direct cache's 8 and 16, escaped ones (read from the
    scanner's scratch, not the file), NULL; integer, date and boolean keys; the last row
    without a newline, its key in the file's last bytes."""
    rng = random.Random(seed)
    texts = ["", "a", "x" * 7, "x" * 8, "y" * 8, "x" * 9, "x" * 8 + "y", "z" * 15, "z" * 16, "z" * 15 + "q", "z" * 17,
             'a""b', '""' * 8, '""' * 9, "é" * 4, "é" * 8] + [f"k{i}" for i in range(40)]
    lines = ["k,j,i,d,b,v,f"]
    for r in range(30_000):
        if r < 12_000:
            k, i = rng.choice(texts), rng.randrange(-3, 4)
        else:
            k, i = f"many{rng.randrange(9000)}", rng.randrange(9000)
        quoted = '"' in k or rng.random() < 0.5
        key = "" if r % 61 == 0 else f'"{k}"' if quoted else k
        j = "" if r % 67 == 0 else rng.choice(texts[:12]).replace('"', "")
        d = f"2024-0{i % 9 + 1}-1{abs(i) % 10}" if r % 71 else ""
        b = ("true", "false", "")[r % 3]
        lines.append(f"{key},{j},{'' if r % 73 == 0 else i},{d},{b},{rng.randrange(-99, 99)},"
                     f"{rng.uniform(-1, 1)!r}")
    return "\n".join(lines)


@pytest.mark.parametrize("chunk_bytes", [1 << 14, 1 << 24])
def test_few_groups_folded_as_read_answer_as_duckdb(tmp_path, chunk_bytes):
    """A scan of few groups finds a row's group in a small cache by its key's raw bytes
    and folds the row in at once (aggregate_direct), going on through the pipeline once
    the groups pass DIRECT_GROUPS: every key shape that cache takes (a lone text of up to
    16 bytes, two keys of up to 8, values, NULLs) and those it does not (longer texts,
    a float key), in one chunk that crosses DIRECT_GROUPS and in many small ones."""
    path = write(tmp_path, "d.csv", _direct_rows(39))
    with gateway_for(path, chunk_bytes=chunk_bytes) as gw:
        for sql in ["SELECT k, count(*) AS n, sum(v) AS s, avg(v) AS a, min(f) AS lo FROM t GROUP BY k",
                    "SELECT k, j, count(*) AS n, sum(v) AS s, max(d) AS d FROM t GROUP BY k, j",
                    "SELECT j, i, count(i) AS n, sum(f) AS s FROM t GROUP BY j, i",
                    "SELECT i, avg(v) AS a, max(f) AS hi FROM t GROUP BY i",
                    "SELECT d, b, count(*) AS n, min(v) AS lo FROM t GROUP BY d, b",
                    "SELECT b, sum(v) AS s FROM t GROUP BY b",
                    "SELECT f, count(*) AS n FROM t WHERE v > 90 GROUP BY f",
                    "SELECT count(*) AS n, sum(v) AS s, avg(f) AS a FROM t"]:
            assert_same(gw, sql)


def _priced_rows(seed: int, n: int) -> str:
    """lineitem's shape: a flag, a quantity, prices, discounts and taxes (DOUBLE, some
    NULL, a few negative or -0.0), a date (some NULL)."""
    rng = random.Random(seed)
    lines = ["flag,status,qty,price,disc,tax,day"]
    for r in range(n):
        price = "" if r % 37 == 0 else f"{rng.uniform(-5, 10_000):.2f}"
        disc = "" if r % 41 == 0 else rng.choice(["0.00", "-0.0", "0.05", f"{rng.uniform(0, 0.1):.2f}"])
        tax = "" if r % 43 == 0 else f"{rng.uniform(0, 0.08):.2f}"
        day = "" if r % 47 == 0 else f"199{rng.randrange(2, 9)}-{rng.randrange(1, 13):02d}-{rng.randrange(1, 29):02d}"
        lines.append(f"{rng.choice('ANR')},{rng.choice('FO')},{rng.randrange(1, 51)},{price},{disc},{tax},{day}")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("chunk_bytes", [1 << 12, 1 << 24])
def test_sums_of_products_of_doubles_are_fused_and_answer_as_duckdb(tmp_path, monkeypatch,
                                                                    chunk_bytes):
    """TPC-H Q1's and Q6's sums of products (l_extendedprice * (1 - l_discount) * (1 + l_tax))
    are computed in the fused scan, left to right as written, NULL where a factor is, and
    its WHERE on DATE literals is filtered in the scanner: the answers are DuckDB's."""
    path = write(tmp_path, "l.csv", _priced_rows(1, 6000))
    exported = []
    real = _scanner.export_columns
    monkeypatch.setattr(_scanner, "export_columns",
                        lambda states, *args: exported.append(len(states)) or real(states, *args))
    fusable = [
        "SELECT flag, status, sum(qty) AS q, sum(price) AS p, sum(price * (1 - disc)) AS dp, "
        "sum(price * (1 - disc) * (1 + tax)) AS charge, avg(price * (1 - disc)) AS adp, "
        "avg(disc) AS d, count(*) AS n FROM t WHERE day <= DATE '1998-09-02' "
        "GROUP BY flag, status ORDER BY flag, status",
        "SELECT sum(price * disc) AS revenue FROM t WHERE day >= DATE '1994-01-01' "
        "AND day < DATE '1995-01-01' AND disc BETWEEN 0.05 AND 0.07 AND qty < 24",
        "SELECT flag, sum((price - 0.5) * (2.25 + tax) * disc * (tax + 1)) AS s, "
        "avg(1 + disc) AS a FROM t GROUP BY flag",
    ]
    with gateway_for(path, chunk_bytes=chunk_bytes) as gw:
        for sql in fusable:
            assert_same(gw, sql)
        assert len(exported) == len(fusable)  # each answered by the fused scan
        # left to Arrow, and DuckDB's answers too: a product not left to right, an
        # integer factor, a sum of columns, five factors, min of a product
        for sql in ["SELECT flag, sum(price * (disc * tax)) AS s FROM t GROUP BY flag",
                    "SELECT flag, sum(price * qty) AS s FROM t GROUP BY flag",
                    "SELECT flag, sum(price + tax) AS s FROM t GROUP BY flag",
                    "SELECT sum(price * disc * tax * tax * disc) AS s FROM t"]:
            assert_same(gw, sql)
    assert len(exported) == len(fusable)
    # min of a product: Arrow's, unless a group's min ties 0.0 and -0.0 (a negative price
    # times a zero discount), which goes to the fallback
    with gateway_for(path, chunk_bytes=chunk_bytes, fallback="duck") as gw:
        assert_same(gw, "SELECT flag, min(price * disc) AS lo FROM t GROUP BY flag")


def _statistics_scan(path, start: int, boundary: int, unindexed: bool = False):
    """k, corr(v, w), stddev_samp(v) and count(*) of a file k,v,w (text, integer, double)."""
    file = _scanner.File(str(path))
    dialect = (ord(","), ord('"'), ord('"'), 3, True, (b"",), -1, False)
    try:
        end, _seen, _out, _skipped, error, state = _scanner.scan(
            file, start, boundary, dialect, ((0, 0), (1, 1), (2, 2)), (), ((0, 0),),
            ((fused.A_CORR, 1, 2), (fused.A_STDDEV_SAMP, 2), (fused.A_COUNT_STAR, -1)), -1, -1,
            unindexed)
    finally:
        file.close()
    assert error is None and end == boundary
    return state


def test_statistics_of_appended_groups_merge_into_those_of_looked_up_ones(tmp_path):
    """An unindexed scan's groups (a state per row, joined by Chan's formulas where they
    are made distinct) answer as a scan that looks each row up (Welford's update), to the
    last bits the order of additions decides."""
    rng = random.Random(3)
    path = write(tmp_path, "s.csv", "k,v,w\n" + "".join(
        f"k{rng.randrange(300)},{'' if r % 17 == 0 else rng.randrange(-50, 50)},"
        f"{'' if r % 19 == 0 else repr(rng.uniform(-1e3, 1e3))}\n" for r in range(20000)))
    size = path.stat().st_size
    appended = _by_key(*_statistics_scan(path, 6, size, unindexed=True).export())
    looked_up = _by_key(*_statistics_scan(path, 6, size).export())
    assert appended.keys() == looked_up.keys() and len(appended) == 300
    for key, (corr, sd, n) in looked_up.items():
        assert appended[key][2] == n
        assert appended[key][0] == pytest.approx(corr, rel=1e-9)
        assert appended[key][1] == pytest.approx(sd, rel=1e-9)


def test_the_scan_refuses_a_statistic_of_another_shape(tmp_path):
    """corr needs its second column; stddev has none; neither takes text or a product."""
    path = write(tmp_path, "r.csv", "k,v\na,1\nb,2\n")
    file = _scanner.File(str(path))
    try:
        for aggs in [((fused.A_CORR, 1),), ((fused.A_STDDEV_SAMP, 1, 1),),
                     ((fused.A_VAR_POP, 0),), ((fused.A_CORR, 1, 0),),
                     ((fused.A_VAR_SAMP, 1, ((1, 0, 0.0),)),), ((fused.A_TOP + 1, 1),)]:
            with pytest.raises(ValueError):
                _scanner.scan(file, 4, path.stat().st_size, DIALECT, ((0, 0), (1, 1)), (),
                              ((0, 0),), aggs, -1)
    finally:
        file.close()
